"""Retention on the command line (issue 31): `add --expires-in/--expires-at`, `retention set` and
`retention show`, and `maintain` saying what retention erased."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory.cli import main
from dspy_memory.util.timeutil import set_clock


@pytest.fixture
def clock():
    now = [datetime(2026, 3, 1, 9, tzinfo=timezone.utc)]
    set_clock(lambda: now[0])
    yield now
    set_clock(None)


@pytest.fixture
def db(tmp_path):
    return ["--db", str(tmp_path / "m.db"), "--embedder", "test"]


def test_add_with_expires_in_keeps_and_shows_the_expiry(db, clock, capsys):
    assert main(["add", "My door code is 4711.", "--user", "ada", "--expires-in", "24h", *db]) == 0
    lines = capsys.readouterr().out.splitlines()
    memory_id = lines[0].split()[0]
    assert lines[-1].startswith("expires at 2026-03-02 09:00:00 UTC")
    assert main(["get", memory_id, "--user", "ada", "--json", *db]) == 0
    assert json.loads(capsys.readouterr().out)["expires_at"].startswith("2026-03-02T09:00:00")
    assert main(["add", "I like tea.", "--user", "ada", "--expires-at", "2026-04-01", "--json", *db]) == 0
    [episode] = json.loads(capsys.readouterr().out)["episodes"]
    assert episode["expires_at"].startswith("2026-04-01T00:00:00")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--expires-in", "soon"], "--expires-in 'soon' is not an interval"),
        (["--expires-in", "1h", "--expires-at", "2027-01-01"], "pass --expires-at or --expires-in, not both"),
        (["--expires-at", "2020-01-01"], "--expires-at 2020-01-01T00:00:00.000000Z is not in the future"),
    ],
    ids=["not-an-interval", "both", "past"],
)
def test_a_bad_expiry_is_one_line_with_status_2_and_stores_nothing(db, clock, capsys, flags, said):
    assert main(["add", "My door code is 4711.", "--user", "ada", *flags, *db]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dspy-memory add: ") and said in err
    assert "expires_in=" not in err and "expires_at=" not in err
    assert main(["list", "--user", "ada", *db]) == 0
    assert capsys.readouterr().out == ""


def test_retention_set_and_show_round_trip(db, capsys):
    ada = ["--user", "ada", *db]
    assert main(["retention", "set", *ada, "--erase-after", "90d", "--kinds", "turn,fact", "--pinned"]) == 0
    line = "user=ada  erase_after=90d erase_runs_after=90d kinds=turn,fact pinned=erased blocks=kept"
    assert capsys.readouterr().out == line + "\n"
    assert main(["retention", "show", *ada]) == 0
    assert capsys.readouterr().out == line + "\n"
    # Only the settings given change; the others stay as stored.
    assert main(["retention", "set", *ada, "--erase-runs-after", "24h", "--no-pinned", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["scope"] == {"user_id": "ada", "agent_id": None, "run_id": None}
    assert shown["policy"] == {
        "erase_after": "P90D",
        "erase_runs_after": "P1D",
        "kinds": ["turn", "fact"],
        "pinned": False,
        "blocks": False,
    }
    assert main(["retention", "show", *ada, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == shown
    # A scope without its own policy shows the one that applies: here its user's.
    assert main(["retention", "show", *ada, "--agent", "travel"]) == 0
    assert capsys.readouterr().out.startswith("user=ada agent=travel  erase_after=90d erase_runs_after=1d")
    assert main(["retention", "set", "--agent", "support", "--erase-runs-after", "90m", "--blocks", *db]) == 0
    capsys.readouterr()
    assert main(["retention", "show", *db]) == 0  # no scope: every stored policy
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "agent=support  erase_after=never erase_runs_after=90m kinds=all pinned=kept blocks=erased",
        "user=ada  erase_after=90d erase_runs_after=1d kinds=turn,fact pinned=kept blocks=kept",
    ]
    assert main(["retention", "show", "--json", *db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(entry["scope"]["agent_id"] or "" for entry in listed) == ["", "support"]
    # --reset alone removes the scope's policy: it follows the default (keep everything) again.
    assert main(["retention", "set", *ada, "--reset"]) == 0
    assert capsys.readouterr().out.startswith("user=ada  erase_after=never erase_runs_after=never")
    assert main(["retention", "show", *db]) == 0
    assert capsys.readouterr().out.startswith("agent=support")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["set", "--user", "ada", "--erase-after", "soon"], "--erase-after 'soon' is not an interval"),
        (["set", "--user", "ada", "--kinds", "turn,gossip"], "kinds[1]='gossip'"),
        (["set", "--user", "ada"], "`set` needs one of --erase-after"),
        (["set", "--erase-after", "90d"], "a scope is required: pass --user, --agent or --run"),
        (["show", "--user", "ada", "--erase-after", "90d"], "`show` changes nothing"),
    ],
    ids=["bad-interval", "bad-kind", "no-setting", "no-scope", "show-with-a-setting"],
)
def test_bad_retention_input_is_one_line_with_status_2(db, capsys, argv, said):
    assert main(["retention", *argv, *db]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dspy-memory retention: ") and said in err
    assert "erase_after=" not in err
    assert main(["retention", "show", *db]) == 0
    assert capsys.readouterr().out.startswith("no retention policy stored")  # nothing was stored


def test_maintain_reports_what_retention_erased(db, clock, capsys):
    ada = ["--user", "ada", *db]
    assert main(["add", "My door code is 4711.", *ada, "--expires-in", "1h"]) == 0
    assert main(["add", "I like tea.", *ada]) == 0
    capsys.readouterr()
    assert main(["maintain", *ada]) == 0
    assert "retention" not in capsys.readouterr().out  # nothing due yet: no line about it
    clock[0] += timedelta(hours=2)
    assert main(["maintain", *ada, "--dry-run"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("retention")]
    assert line.startswith("retention would erase: ") and {"1 memories", "1 episodes"} <= set(
        line[23:].split(", ")
    )
    assert main(["maintain", *ada]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("retention")]
    assert line.startswith("retention erased: ")
    assert {"1 memories", "1 episodes", "1 vectors", "1 keyword_entries"} <= set(line[18:].split(", "))
    assert main(["maintain", *ada, "--json"]) == 0
    assert not any(json.loads(capsys.readouterr().out)["erased"].values())  # erased once
    assert main(["list", *ada]) == 0
    assert [line.split("  ", 2)[2] for line in capsys.readouterr().out.splitlines()] == ["I like tea."]


def test_maintain_json_has_what_a_policy_erased(db, clock, capsys):
    ada = ["--user", "ada", *db]
    assert main(["add", "I like tea.", *ada]) == 0
    assert main(["retention", "set", *ada, "--erase-after", "30d"]) == 0
    capsys.readouterr()
    clock[0] += timedelta(days=31)
    assert main(["maintain", *ada, "--json"]) == 0
    erased = json.loads(capsys.readouterr().out)["erased"]
    assert erased["memories"] == 1 and erased["episodes"] == 1 and erased["vectors"] == 1
