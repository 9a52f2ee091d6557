"""Progress of the long runs (issue 32): `reprocess`, `maintain` and `migrate_store` tell an
`on_progress` callback how far they are, done rising to the total; the command line draws it as
a bar on stderr, keeps stdout for the result (`--json`: only JSON), and `--quiet` draws none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.transfer import TABLES, migrate_store
from dspy_memory.types import Scope
from dspy_memory.util.progress import Progress
from dspy_memory.util.timeutil import set_clock

from .scripted import fused_lm

pytestmark = pytest.mark.backends

LONG_AGO = datetime(2023, 1, 2, 9, tzinfo=timezone.utc)  # memories made then are forgotten now


def rising_to_the_total(seen: list[Progress], unit: str) -> int:
    """Checks what a run told its callback; returns the total."""
    assert seen and {progress.unit for progress in seen} == {unit}
    done = [progress.done for progress in seen]
    assert done == sorted(done), done
    total = seen[-1].total
    assert total is not None and done[-1] == total
    assert {progress.total for progress in seen} <= {None, total}
    return total


def facts(turns: list[dict], existing: list[dict]) -> list[dict]:
    if any("Bob" in turn["text"] for turn in turns):
        raise ConnectionError("the LM is down for Bob")
    return [{"action": "ADD", "content": turn["text"], "subject": "Ada"} for turn in turns]


def test_reprocess_reports_episodes_per_lm_batch(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(facts)) as memory:
        ada = [f"Ada: fact number {i}." for i in range(5)]
        memory._writer.persist(ada, Scope(user_id="ada"), infer=True)
        memory._writer.persist(["Bob: I live in Oslo."], Scope(user_id="bob"), infer=True)
        memory._writer.persist(["Cy: a raw note."], Scope(user_id="cy"))
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(facts), write={"max_batch": 2}) as memory:
        seen: list[Progress] = []
        results = memory.reprocess(on_progress=seen.append)
        assert rising_to_the_total(seen, "episodes") == 7
        # Ada's 5 episodes are 3 LM calls of at most 2, each a step of the bar, and one result.
        assert len(seen) == 1 + 3 + 1 + 1
        assert seen[-1].counts == {"failed": 1}  # Bob's batch
        assert sorted(len(result.episodes) for result in results) == [1, 1, 5]
        [ada_result] = [result for result in results if len(result.episodes) == 5]
        assert ada_result.error is None and len(ada_result.ops) == 5
        seen.clear()
        [again] = memory.reprocess(on_progress=seen.append)  # Bob's failed episode, failing again
        assert again.error and rising_to_the_total(seen, "episodes") == 1 and seen[-1].counts == {"failed": 1}


def test_an_exception_in_the_callback_stops_reprocess_and_frees_the_rest(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        for user in ("ada", "bob", "cy"):
            memory._writer.persist([f"{user} said something."], Scope(user_id=user))
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:

        def broken(progress: Progress) -> None:
            if progress.done:
                raise RuntimeError("the caller's bug")

        with pytest.raises(RuntimeError, match="the caller's bug"):
            memory.reprocess(on_progress=broken)
        assert len(memory.reprocess()) == 2  # the episodes not reached were given back
        assert sum(len(memory.get_all(user_id=user)) for user in ("ada", "bob", "cy")) == 3


def add_long_ago(path: str, users: dict[str, int]) -> None:
    set_clock(lambda: LONG_AGO)
    try:
        with Memory(path, embedder="test") as memory:
            for user, count in users.items():
                memory.add([f"{user} fact {i}." for i in range(count)], user_id=user, infer=False)
    finally:
        set_clock(None)


def test_maintain_reports_scopes_with_running_counts(db_path):
    add_long_ago(db_path, {"ada": 3, "bob": 2, "cy": 1})
    with Memory(db_path, embedder="test") as memory:
        seen: list[Progress] = []
        dry = memory.maintain(all_scopes=True, dry_run=True, on_progress=seen.append)
        assert rising_to_the_total(seen, "scopes") == 3 and seen[-1].counts["archived"] == dry.archived == 6
        seen.clear()
        report = memory.maintain(all_scopes=True, on_progress=seen.append)
        assert rising_to_the_total(seen, "scopes") == 3
        assert [progress.counts["archived"] for progress in seen[1:]] == [0, 3, 5, 6]
        assert seen[-1].counts == {"erased": 0, "archived": 6, "summarized": 0, "merged": 0}
        assert report.archived == 6 and report.scopes == 3
        seen.clear()
        memory.maintain(user_id="ada", on_progress=seen.append)  # nothing left to do
        assert rising_to_the_total(seen, "scopes") == 0


def test_migrate_reports_source_rows_per_batch_and_keeps_its_lines(db_path, tmp_path):
    add_long_ago(db_path, {"ada": 7, "bob": 4})
    seen: list[Progress] = []
    lines: list[str] = []
    copy = str(tmp_path / "copy.db")
    report = migrate_store(db_path, copy, batch_size=3, progress=lines.append, on_progress=seen.append)
    tables = {check.table: check for check in report.checks if check.table in {t.name for t in TABLES}}
    assert rising_to_the_total(seen, "rows") == sum(check.source_rows for check in tables.values())
    assert len(seen) > len(TABLES)  # a step per batch of 3
    assert seen[-1].counts == {"copied": sum(check.copied for check in tables.values()), "already": 0}
    assert any(line.startswith("memories: 11 rows") for line in lines)
    seen.clear()
    assert migrate_store(db_path, copy, on_progress=seen.append).ok  # a finished copy: nothing to copy
    assert seen == []


# -- the command line --------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSPY_MEMORY_LM"}
    return subprocess.run(
        [sys.executable, "-m", "dspy_memory.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def no_bar(err: str, name: str) -> bool:
    return "\r" not in err and f"{name}:" not in err and "%|" not in err


@pytest.mark.parametrize("quiet", [False, True], ids=["bar", "quiet"])
def test_cli_reprocess_draws_the_bar_on_stderr(tmp_path, quiet):
    db = str(tmp_path / "m.db")
    with Memory(db, embedder="test") as memory:
        memory._writer.persist(["Ada: one.", "Ada: two."], Scope(user_id="ada"))
        memory._writer.persist(["Bob: three."], Scope(user_id="bob"))
    done = cli("reprocess", "--db", db, "--json", *(["--quiet"] if quiet else []))
    assert done.returncode == 0, done.stderr
    assert sorted(len(result["episodes"]) for result in json.loads(done.stdout)) == [1, 2]
    if quiet:
        assert no_bar(done.stderr, "reprocess"), done.stderr
    else:
        assert "reprocess: 100%" in done.stderr and "3/3" in done.stderr and "episodes" in done.stderr


@pytest.mark.parametrize("quiet", [False, True], ids=["bar", "quiet"])
def test_cli_maintain_draws_the_bar_on_stderr(tmp_path, quiet):
    db = str(tmp_path / "m.db")
    add_long_ago(db, {"ada": 2, "bob": 1})
    done = cli("maintain", "--all-scopes", "--db", db, "--json", *(["--quiet"] if quiet else []))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["archived"] == 3
    if quiet:
        assert no_bar(done.stderr, "maintain"), done.stderr
    else:
        assert "maintain: 100%" in done.stderr and "2/2" in done.stderr and "archived=3" in done.stderr


@pytest.mark.parametrize("quiet", [False, True], ids=["bar", "quiet"])
def test_cli_migrate_draws_the_bar_with_the_table_lines_above_it(tmp_path, quiet):
    source, copy = str(tmp_path / "m.db"), str(tmp_path / "copy.db")
    add_long_ago(source, {"ada": 2})
    done = cli("migrate", "--from", source, "--to", copy, "--json", *(["--quiet"] if quiet else []))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"]
    if quiet:
        assert done.stderr == ""
    else:
        assert "migrate: 100%" in done.stderr and " rows" in done.stderr
        assert "memories: 2 rows, 2 copied" in done.stderr
