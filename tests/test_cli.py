import json
import re
from pathlib import Path

import pytest

from dspy_memory.cli import build_parser, main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(action.choices)


def test_every_command_is_documented():
    documented = set(re.findall(r"^## `dspy-memory ([a-z-]+)`", DOCS.read_text(), flags=re.M))
    assert set(subcommands()) == documented


def test_add_search_update_history_delete(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    base = ["--db", db, "--embedder", "test"]
    assert main(["add", "I moved to Denver.", "--user", "ada", "--at", "2024-05-02", *base]) == 0
    memory_id = capsys.readouterr().out.split()[0]
    assert main(["search", "Denver", "--user", "ada", "--json", *base]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["memory"]["id"] == memory_id and hit["memory"]["valid_at"].startswith("2024-05-02")
    ada = ["--user", "ada", "--db", db]
    assert main(["update", memory_id, "I moved to Boulder.", "--reason", "wrong city", *ada]) == 0
    capsys.readouterr()
    assert main(["history", memory_id, *ada]) == 0
    out = capsys.readouterr().out
    assert "ADD" in out and "UPDATE" in out and "wrong city" in out
    assert main(["list", "--user", "ada", "--db", db]) == 0
    assert "Boulder" in capsys.readouterr().out
    assert main(["get", memory_id, *ada, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 2
    assert main(["context", "where does ada live", "--user", "ada", "--budget", "200", "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "## Recent conversation" in out and "/200 tokens" in err
    assert main(["stats", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tables"]["memories"] == 2
    assert main(["delete-scope", "--user", "ada", "--db", db]) == 0
    capsys.readouterr()
    assert main(["get", memory_id, "--all-scopes", "--db", db]) == 1


def test_errors_are_short_messages_not_tracebacks(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    assert main(["search", "x", "--db", db, "--embedder", "test"]) == 2
    assert "scope is required" in capsys.readouterr().err
    assert main(["search", "x", "--user", "a", "--db", db, "--embedder", "test:128"]) == 2
    err = capsys.readouterr().err
    assert "Leave --embedder out" in err and "--embedder test:64" in err


def test_demo_runs_offline_with_the_test_embedder(monkeypatch, capsys):
    monkeypatch.delenv("DSPY_MEMORY_LM", raising=False)
    assert main(["demo", "--embedder", "test"]) == 0
    out = capsys.readouterr().out
    for step in (
        "1. Remembered",
        "2. search",
        "3. Time travel",
        "4. A correction",
        "5. search(",
        "6. The file",
    ):
        assert step in out


def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit):
        main(["frobnicate"])


def test_eval_and_optimize_run_the_repository_evals(tmp_path, capsys):
    out = ["--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")]
    assert main(["eval", "reconcile", "--limit", "3", *out]) == 0
    assert "op exact" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["optimize", "--help"])
    assert "--optimizer" in capsys.readouterr().out


def test_check_reports_a_broken_invariant_with_exit_1(tmp_path, capsys):
    import sqlean

    db = str(tmp_path / "cli.db")
    assert main(["add", "I moved to Denver.", "--user", "ada", "--db", db, "--embedder", "test"]) == 0
    assert main(["check", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["ok"] is True
    conn = sqlean.connect(db)
    with conn:  # a memory row whose keyword entry is gone: the indexes no longer agree
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
    conn.close()
    assert main(["check", "--db", db, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["index_mismatch"] is True
    assert report["rows"]["keyword_entries"] == 0 and report["rows"]["memories"] == 1
