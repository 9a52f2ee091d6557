"""What each case of the bad-input catalogue is expected to do, committed in
tests/data/bad_input_expected.json: "accepted" (the call returned: a write stored the input, a
read answered), "refused:<DSPyMemoryError subclass>", or "refused:tool-error" (an agent tool's
"error: ..." answer). Without it, an input that used to be refused and is now stored would still
pass the catalogue, which only checks that nothing crashed or was half-stored.

A case whose outcome depends on the backend maps to {"sqlite": ..., "postgres": ...} (PostgreSQL
text cannot hold U+0000, so NUL is refused there and stored on SQLite).

After a deliberate change of behaviour, regenerate the file and review its diff:

    python -m tests.bad_input_expected --write

It runs the catalogue twice on a SQLite file and twice on PostgreSQL (pgserver, or the server in
$DSPY_MEMORY_TEST_PG) and refuses to write outcomes that differ between two runs. Without
--write it prints how the current behaviour differs from the committed file."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .bad_input_catalogue import CASES, run_catalogue

EXPECTED = Path(__file__).resolve().parent / "data" / "bad_input_expected.json"
BACKENDS = ("sqlite", "postgres")
COMMAND = "python -m tests.bad_input_expected --write"


def expected(backend: str, path: Path = EXPECTED) -> dict[str, str]:
    """{case name: expected outcome} on `backend`."""
    cases = json.loads(path.read_text())["cases"]
    return {
        name: outcome if isinstance(outcome, str) else outcome[backend] for name, outcome in cases.items()
    }


def differences(outcomes: dict[str, str], wanted: dict[str, str]) -> list[str]:
    """One line per case whose outcome is not the expected one, or that is on one side only."""
    lines = [
        f"{name!r}: expected {wanted[name]}, got {outcomes[name]}"
        for name in outcomes
        if name in wanted and outcomes[name] != wanted[name]
    ]
    lines += [
        f"{name!r}: a case with no expected outcome (got {outcomes[name]})"
        for name in outcomes
        if name not in wanted
    ]
    lines += [
        f"{name!r}: expected {wanted[name]}, but the catalogue has no such case"
        for name in wanted
        if name not in outcomes
    ]
    return lines


def _run(path: str) -> dict[str, str]:
    with Memory(path, embedder=HashEmbedder(64)) as memory:
        outcomes, problems = run_catalogue(memory)
    if problems:
        raise SystemExit("the catalogue found problems; fix them first:\n" + "\n".join(problems))
    return outcomes


def current() -> dict[str, dict[str, str]]:
    """{backend: {case: outcome}}, each backend run twice: an outcome that changes between two
    runs cannot be expected."""
    from .pg import fresh_schema, server_url

    runs: dict[str, list[dict[str, str]]] = {backend: [] for backend in BACKENDS}
    with tempfile.TemporaryDirectory() as folder:
        for attempt in range(2):
            runs["sqlite"].append(_run(f"{folder}/run{attempt}.db"))
        url, stop = server_url(Path(folder) / "pg")
        try:
            for _ in range(2):
                schema, drop = fresh_schema(url)
                try:
                    runs["postgres"].append(_run(schema))
                finally:
                    drop()
        finally:
            stop()
    for backend, (first, second) in runs.items():
        changed = differences(second, first)
        if changed:
            raise SystemExit(f"outcomes on {backend} differ between two runs:\n" + "\n".join(changed))
    return {backend: found[0] for backend, found in runs.items()}


def as_file(by_backend: dict[str, dict[str, str]]) -> dict[str, object]:
    cases: dict[str, object] = {}
    for case in CASES:  # in the catalogue's order, so a diff of the file reads like the catalogue
        outcomes = {backend: by_backend[backend][case.name] for backend in BACKENDS}
        same = len(set(outcomes.values())) == 1
        cases[case.name] = outcomes["sqlite"] if same else outcomes
    return {"about": __doc__.split("\n\n")[0].replace("\n", " "), "regenerate": COMMAND, "cases": cases}


if __name__ == "__main__":
    import logging

    logging.getLogger("dspy_memory").setLevel(logging.ERROR)  # the epoch-seconds notes, 700 cases
    found = current()
    if "--write" in sys.argv:
        EXPECTED.write_text(json.dumps(as_file(found), indent=1, ensure_ascii=True) + "\n")
        print(f"wrote {EXPECTED} ({len(CASES)} cases)")
    else:
        for backend in BACKENDS:
            for line in differences(found[backend], expected(backend)) or ["as expected"]:
                print(f"{backend}: {line}")
