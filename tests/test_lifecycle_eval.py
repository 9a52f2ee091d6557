"""The lifecycle simulation (python -m evals.lifecycle), small and with the hash embedder: its
report's shape, that weekly maintenance shrinks the active set without losing the facts in use,
and that what it archived is still found with include_archived."""

from __future__ import annotations

import json

import pytest

from dspy_memory.util import timeutil
from evals.lifecycle import main

TWIN_KEYS = {
    "active",
    "archived",
    "recent_recall_at_10",
    "old_recall_at_10",
    "old_recall_at_10_include_archived",
    "live_recall_at_10",
    "weeks",
    "retention_curves",
    "ever_recalled_cold",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lifecycle")
    argv = ["--days", "120", "--per-day", "3", "--embedder", "test", "--base-days", "10"]
    argv += [
        "--old-after-days",
        "60",
        "--recall",
        "used",
        "--out",
        str(out / "l.json"),
        "--plot",
        str(out / "l.png"),
    ]
    returned = main(argv)
    return out, returned


def test_the_report_has_both_files_and_the_plot(run):
    out, returned = run
    saved = json.loads((out / "l.json").read_text())
    assert saved["twins"].keys() == {"maintained", "unmaintained"}
    for twin in saved["twins"].values():
        assert TWIN_KEYS <= twin.keys()
        assert len(twin["weeks"]) == 120 // 7 + 1  # every 7th day, and the last
    assert saved["memories"] == sum(saved["facts_by_class"].values()) > 300
    assert saved["twins"]["maintained"]["active"] == returned["twins"]["maintained"]["active"]
    assert (out / "l.png").stat().st_size > 10_000 and (out / "l.md").exists()
    assert timeutil.utcnow().year >= 2025  # the simulated clock is put back


def test_maintenance_shrinks_the_active_set_and_keeps_what_is_used(run):
    _, result = run
    kept, control = result["twins"]["maintained"], result["twins"]["unmaintained"]
    assert control["archived"] == 0 and control["active"] == result["memories"]
    assert kept["archived"] > result["memories"] // 4
    assert kept["active"] + kept["archived"] == result["memories"]
    assert result["recent_facts"] > 20
    assert kept["recent_recall_at_10"] >= control["recent_recall_at_10"] - 0.02
    # Cold memories were never asked about (and searches count nothing with --recall used).
    assert kept["ever_recalled_cold"] == 0 and kept["ever_recalled_hot"] == 1


def test_archived_memories_are_reached_with_include_archived_only(run):
    _, result = run
    kept = result["twins"]["maintained"]
    assert result["old_facts_sampled"] > 50
    assert kept["old_recall_at_10"] < 0.1  # archived: the default search leaves them out...
    assert kept["old_recall_at_10_include_archived"] >= 0.9  # ...include_archived finds them
    curves = kept["retention_curves"]
    assert curves["cold"][-1][1] < 0.05 < curves["hot"][-1][1]
    assert "cold" in kept["archived_on_day"] and "hot" not in kept["archived_on_day"]
