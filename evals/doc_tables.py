"""Tables in README.md and docs/ that are generated from committed JSON, never typed by hand.

    python -m evals.doc_tables            # rewrite every generated table from docs/results/*.json
    python -m evals.doc_tables --check    # exit 1 naming each table that differs from its JSON
    python -m evals.doc_tables oracles    # measure the eval oracles again, record and rewrite

A generated table sits between two markers in a Markdown file:

    <!-- generated: NAME from docs/results/NAME.json by python -m evals.doc_tables -->
    ...
    <!-- end generated: NAME -->

`optimize_offline` is recorded by `python -m evals.optimize_offline --seeds 5 --record` (about
a quarter of an hour), `feedback_loop` by `python -m evals.feedback_loop --record` (minutes); `eval_oracles` by `LOCOMO_DATA=locomo10.json python -m evals.doc_tables oracles`
(seconds; the LoCoMo row only where that file is). The tests check every table against its JSON
(tests/test_doc_tables.py) and measure the oracles again (the LoCoMo row where the file is).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
BLOCK = re.compile(
    r"(?P<head><!-- generated: (?P<name>[a-z_]+) [^\n]*-->\n)(?P<body>.*?)(?P<tail><!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def recorded(name: str) -> Any:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


# -- renderers ---------------------------------------------------------------------------------


def _optimize_offline(data: dict[str, Any]) -> str:
    from evals.optimize_offline import report

    return f"`{data['command']}` ({data['machine']['when'][:10]}):\n\n{report(data)}\n"


def _eval_oracles(data: dict[str, Any]) -> str:
    from evals.report import table

    def exact(rows: dict[str, Any]) -> str:
        by_score: dict[float, list[str]] = {}
        for category, row in sorted(rows.items()):
            if category != "overall":
                by_score.setdefault(round(row["exact"], 3), []).append(category.replace("_", " "))
        parts = "; ".join(
            f"{score:.3f} on {', '.join(names)}" for score, names in sorted(by_score.items(), reverse=True)
        )
        return f"op exact {rows['overall']['exact']:.3f} over {rows['overall']['cases']} cases: {parts}"

    temporal = data["temporal"]
    kinds = ", ".join(
        f"{name} {row['contains']:.3f}" for name, row in sorted(temporal.items()) if name != "overall"
    )
    rows = [["reconcile, rule-based oracle", "`python -m evals.reconcile`", exact(data["reconcile"])]]
    if "reconcile_locomo" in data:
        rows.append(
            [
                "reconcile on the LoCoMo slice, rule-based oracle (needs the LoCoMo file)",
                "`python -m evals.reconcile --locomo LOCOMO_JSON`",
                exact(data["reconcile_locomo"]),
            ]
        )
    rows.append(
        [
            "temporal, oracle writer + top memory at the annotated date (no LM)",
            "`python -m evals.temporal --embedder test`",
            f"contains gold {temporal['overall']['contains']:.3f} over {temporal['overall']['questions']} "
            f"questions: {kinds}",
        ]
    )
    return table(["eval", "command", "result"], rows) + "\n"


def _feedback_loop(data: dict[str, Any]) -> str:
    from evals.feedback_loop import report

    return f"`{data['command']}` ({data['machine']['when'][:10]}):\n\n{report(data)}\n"


RENDERERS: dict[str, Callable[[Any], str]] = {
    "optimize_offline": _optimize_offline,
    "feedback_loop": _feedback_loop,
    "eval_oracles": _eval_oracles,
}


def render(name: str, data: Any = None) -> str:
    return RENDERERS[name](recorded(name) if data is None else data)


# -- measuring the oracles ---------------------------------------------------------------------


def oracle_numbers() -> dict[str, Any]:
    """The reconcile oracle on the whole template set and the temporal oracle writer with the
    test embedder: per category, rounded to 3 decimals. Where the LoCoMo file is on this machine
    (evals.locomo.DEFAULT_DATA, $LOCOMO_DATA), also the reconcile oracle on the LoCoMo slice."""
    from evals.locomo import DEFAULT_DATA
    from evals.reconcile import load_cases, oracle_lm
    from evals.reconcile import run as run_reconcile
    from evals.temporal import evaluate, load_scenarios

    def exact(cases: list[dict[str, Any]]) -> dict[str, Any]:
        summary = run_reconcile(cases, program="reconcile", lm=oracle_lm(cases))["summary"]
        return {
            category: {"cases": row["cases"], "exact": round(row["exact"], 3)}
            for category, row in summary.items()
        }

    numbers: dict[str, Any] = {"reconcile": exact(load_cases())}
    if Path(DEFAULT_DATA).exists():
        from evals.reconcile_locomo import load_locomo_cases

        numbers["reconcile_locomo"] = exact(load_locomo_cases(str(DEFAULT_DATA)))
    with tempfile.TemporaryDirectory() as tmp:
        temporal = evaluate(
            load_scenarios(),
            lm=None,
            embedder="test",
            out=Path(tmp) / "temporal.json",
            plot=Path(tmp) / "temporal.png",
        )["summary"]
    numbers["temporal"] = {
        kind: {"questions": row["questions"], "contains": round(row["contains"], 3)}
        for kind, row in temporal.items()
    }
    return numbers


# -- writing and checking ----------------------------------------------------------------------


def refresh(paths: list[Path] | None = None) -> list[Path]:
    """Rewrite every generated table from its JSON; returns the files that changed."""
    changed = []
    for path in paths or documents():
        text = path.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m["head"] + render(m["name"]) + m["tail"], text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def stale(paths: list[Path] | None = None) -> list[str]:
    """'file: NAME' for every generated table that differs from its JSON."""
    found = []
    for path in paths or documents():
        for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
            if match["body"] != render(match["name"]):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}: {match['name']}")
    return found


def record(name: str, data: Any) -> Path:
    """Commit-ready: write docs/results/NAME.json and rewrite the tables made from it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    for changed in refresh():
        print(f"rewrote the {name} table in {changed.relative_to(ROOT)}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="?", choices=("oracles",), help="measure this again and record it")
    parser.add_argument(
        "--check", action="store_true", help="only check; exit 1 if a table differs from its JSON"
    )
    args = parser.parse_args(argv)
    if args.what == "oracles":
        print(f"recorded {record('eval_oracles', oracle_numbers())}")
    if args.check:
        differing = stale()
        for line in differing:
            print(f"differs from its JSON: {line}", file=sys.stderr)
        return 1 if differing else 0
    refresh()
    return 0


if __name__ == "__main__":
    sys.exit(main())
