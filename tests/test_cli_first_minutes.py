"""The command line as a new user meets it (issue 11): an LM that is not there fails in seconds,
a failed LM write is a non-zero exit with the command to retry, no tracebacks for Ctrl-C or a
closed pipe, errors in flags, id prefixes, --json and help everywhere, and docs for every option."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from dspy_memory.cli import EXIT_INTERRUPTED, build_parser, main

from .fakes import ollama_server

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def silent_server():
    """Accepts connections and never answers: a hung LM or embedder."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


@pytest.fixture
def no_lm_env(monkeypatch):
    for key in ("DSPY_MEMORY_LM", "DSPY_MEMORY_LM_API_BASE", "OLLAMA_HOST"):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "argv",
    [["demo", "--embedder", "test"], ["add", "I like tea.", "--user", "ada"], ["reprocess"]],
    ids=["demo", "add", "reprocess"],
)
def test_an_ollama_that_is_not_running_fails_fast_with_one_line(tmp_path, no_lm_env, capsys, argv):
    no_lm_env.setenv("DSPY_MEMORY_LM", "ollama_chat/llama3.2")
    no_lm_env.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    if argv[0] != "demo":
        argv = [*argv, "--db", str(tmp_path / "m.db"), "--embedder", "test"]
    started = time.monotonic()
    assert main(argv) == 2
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    assert elapsed < 10
    assert len(err.splitlines()) == 1 and "Ollama is not running at http://127.0.0.1:" in err
    assert "ollama serve" in err
    assert not (tmp_path / "m.db").exists() or argv[0] == "demo"  # nothing stored half-way


def test_an_ollama_without_the_model_says_what_to_pull(tmp_path, no_lm_env, capsys):
    with ollama_server(models=("nomic-embed-text:latest",)) as (url, requests):
        no_lm_env.setenv("OLLAMA_HOST", url)
        code = main(
            ["add", "hi", "--user", "ada", "--lm", "ollama_chat/llama3.2", "--db", str(tmp_path / "m.db")]
        )
    assert code == 2
    assert "Run: ollama pull llama3.2" in capsys.readouterr().err
    assert not any(request["path"] == "/api/chat" for request in requests)


def _broken_chat(messages):
    return "this is not JSON at all"


def test_a_failed_lm_write_exits_3_and_says_how_to_retry(tmp_path, no_lm_env, capsys):
    db = str(tmp_path / "m.db")
    with ollama_server(chat=_broken_chat) as (url, _):
        no_lm_env.setenv("OLLAMA_HOST", url)
        lm = ["--lm", "ollama_chat/llama3.2"]
        assert (
            main(["add", "I moved to Denver.", "--user", "ada", "--db", db, "--embedder", "test", *lm]) == 3
        )
        err = capsys.readouterr().err
        assert (
            "kept as raw turns" in err and f"dspy-memory reprocess --db {db} --lm ollama_chat/llama3.2" in err
        )
        assert main(["reprocess", "--db", db, *lm]) == 3
        assert "failed again" in capsys.readouterr().err
    assert main(["search", "Denver", "--user", "ada", "--db", db]) == 0  # the input was kept
    assert "Denver" in capsys.readouterr().out


def test_the_demo_with_a_failing_lm_stops_without_naming_its_temporary_file(no_lm_env, capsys):
    with ollama_server(chat=_broken_chat) as (url, _):
        no_lm_env.setenv("OLLAMA_HOST", url)
        assert main(["demo", "--embedder", "test", "--lm", "ollama_chat/llama3.2"]) == 2
    captured = capsys.readouterr()
    assert "the LM write failed" in captured.err and "--db PATH" in captured.err
    assert "demo.db" not in captured.err
    assert "4. Cost" not in captured.out  # no report of a tour that did not happen


def test_the_demo_with_a_kept_file_names_it_in_the_retry_command(tmp_path, no_lm_env, capsys):
    db = str(tmp_path / "demo.db")
    with ollama_server(chat=_broken_chat) as (url, _):
        no_lm_env.setenv("OLLAMA_HOST", url)
        assert main(["demo", "--embedder", "test", "--lm", "ollama_chat/llama3.2", "--db", db]) == 2
    assert f"dspy-memory reprocess --db {db} --lm ollama_chat/llama3.2" in capsys.readouterr().err


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DSPY_MEMORY_LM", None)
    return subprocess.Popen(
        [sys.executable, "-m", "dspy_memory.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, **kwargs.pop("env", {})},
        **kwargs,
    )


def test_ctrl_c_exits_130_without_a_traceback(tmp_path):
    with silent_server() as (url, accepted):
        process = _cli(
            "search",
            "x",
            "--user",
            "ada",
            "--db",
            str(tmp_path / "m.db"),
            "--embedder",
            "ollama:nomic-embed-text",
            env={"OLLAMA_HOST": url},
            # As from a terminal: a shell starts background jobs (`cmd &`, nohup) with SIGINT
            # ignored, and Python then never turns Ctrl-C into KeyboardInterrupt.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 60
        while not accepted and time.monotonic() < deadline:  # it is now waiting for the embedder
            time.sleep(0.05)
        assert accepted, "the command never reached the embedder"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == EXIT_INTERRUPTED == 130
    assert "Traceback" not in err and "interrupted" in err


def test_a_closed_pipe_prints_no_traceback(tmp_path):
    db = str(tmp_path / "m.db")
    assert main(["add", "seed", "--user", "ada", "--db", db, "--embedder", "test", "--raw"]) == 0
    from dspy_memory import Memory

    with Memory(db) as memory:
        memory.add(
            [f"memory number {i} with some words to fill the line" for i in range(3000)], user_id="ada"
        )
    for args in (["list", "--user", "ada", "--limit", "3000"], ["stats"]):
        process = _cli(*args, "--db", db)
        process.stdout.readline()
        process.stdout.close()  # the reader goes away, as `| head -1` does
        err = process.stderr.read()
        process.wait(timeout=60)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
        assert process.returncode in (0, 141)


def test_errors_name_flags_not_python_arguments(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    assert main(["add", "hi", "--user", "ada", "--db", db, "--embedder", "test"]) == 0
    capsys.readouterr()
    assert main(["get", "0" * 36, "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--user" in err and "--all-scopes" in err
    assert "user_id=" not in err and "all_scopes=" not in err
    assert main(["timeline", "--user", "ada", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--subject" in err and "subject=" not in err


def test_id_prefixes_work_wherever_ids_do(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    ada = ["--user", "ada", "--db", db]
    assert main(["add", "I moved to Denver.", *ada, "--embedder", "test"]) == 0
    memory_id = capsys.readouterr().out.split()[0]
    short = memory_id[:8]
    assert main(["get", short, *ada]) == 0 and memory_id in capsys.readouterr().out
    assert main(["update", short, "I moved to Boulder.", *ada]) == 0
    assert capsys.readouterr().out.startswith(f"{memory_id}  v2")
    assert main(["history", short, *ada, "--json"]) == 0
    assert [event["event"] for event in json.loads(capsys.readouterr().out)] == ["ADD", "UPDATE"]
    assert main(["get", short, "--user", "bob", "--db", db]) == 1  # a prefix does not cross a wall
    capsys.readouterr()
    assert main(["delete", short, *ada]) == 0
    assert "deleted" in capsys.readouterr().out
    assert main(["get", short, *ada]) == 1


def test_an_ambiguous_prefix_lists_the_candidates(db_path):
    from dspy_memory import InvalidInputError, Memory
    from dspy_memory.store.writes import NewMemory

    with Memory(db_path, embedder="test") as memory:
        vector = memory.embedder.embed(["x"])[0]
        items = [
            NewMemory(
                id=f"abcdef12-0000-0000-0000-00000000000{i}",
                content=f"fact {i}",
                content_hash=f"h{i}",
                embedding=vector,
                user_id="ada",
            )
            for i in range(2)
        ]
        memory.store.insert_memories(items, actor="user")
        with pytest.raises(InvalidInputError, match="matches several memories.*abcdef12-0000"):
            memory.get("abcdef12", user_id="ada")
        assert memory.get("abcdef12-0000-0000-0000-000000000001", user_id="ada").content == "fact 1"


def test_json_everywhere_it_is_offered(tmp_path, capsys, no_lm_env):
    db = str(tmp_path / "m.db")
    base = ["--db", db, "--json"]
    ada = ["--user", "ada", *base]
    assert main(["add", "I moved to Denver.", *ada, "--embedder", "test", "--at", "2024-05-02"]) == 0
    memory_id = json.loads(capsys.readouterr().out)["memories"][0]["id"]
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "I like tea.", "at": "2024-05-03"}) + "\n")
    runs = [
        ["ingest", str(chat), *ada, "--quiet"],
        ["search", "Denver", *ada],
        ["list", *ada],
        ["get", memory_id, *ada],
        ["history", memory_id, *ada],
        ["timeline", "--subject", "Ada", *ada],
        ["context", "where", *ada],
        ["stats", *base],
        ["migrate", "--from", db, "--to", str(tmp_path / "copy.db"), "--json"],
        ["check", *base],
        ["reprocess", *base],
        ["keys", "list", *base],
        ["maintain", *ada],
        ["retention", "set", *ada, "--erase-after", "90d"],
        ["retention", "show", *ada],
        ["retention", "show", *base],
        ["pin", memory_id, *ada],
        ["restore", memory_id, *ada],
        ["update", memory_id, "I moved to Boulder.", *ada],
        ["feedback", "list", *ada],
        ["export", *ada, "-o", str(tmp_path / "ada.jsonl.gz")],
        [
            "import",
            "--db",
            str(tmp_path / "imported.db"),
            "--embedder",
            "test",
            str(tmp_path / "ada.jsonl.gz"),
            "--json",
        ],
        ["backup", *base, str(tmp_path / "m.bak")],
        ["verify", str(tmp_path / "m.bak"), "--json"],
        ["restore-backup", str(tmp_path / "m.bak"), "--db", str(tmp_path / "restored.db"), "--json"],
        ["audit", *base],
        ["audit", "verify", *base],
        ["delete", memory_id, *ada],
        ["delete-scope", *ada],
    ]
    offered = {name for name, p in _subparsers().items() if "--json" in p._option_string_actions}
    # serve prints uvicorn's log, mcp speaks the protocol on stdout: neither prints a result.
    # encrypt, decrypt and rekey need SQLCipher's SQLite library, which this process cannot
    # load: their --json is tested in the sqlcipher3 process (tests/test_backup_encrypted.py).
    exempt = {"add", "doctor", "demo", "serve", "mcp", "encrypt", "decrypt", "rekey"}
    assert offered - {run[0] for run in runs} <= exempt
    for argv in runs:
        assert main(argv) == 0, argv
        json.loads(capsys.readouterr().out)  # the whole of stdout is JSON


def test_without_json_the_output_is_for_people(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    assert main(["add", "I moved to Denver.", "--user", "ada", "--db", db, "--embedder", "test"]) == 0
    memory_id = capsys.readouterr().out.split()[0]
    assert main(["stats", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "current memories: 1" in out and not out.lstrip().startswith("{")
    assert main(["delete", memory_id, "--user", "ada", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"deleted {memory_id}:") and "{" not in out


def test_timeline_of_a_raw_file_says_why_it_is_empty(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    assert main(["add", "I moved to Denver.", "--user", "ada", "--db", db, "--embedder", "test"]) == 0
    capsys.readouterr()
    assert main(["timeline", "--subject", "Ada", "--user", "ada", "--db", db]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "raw turns" in captured.err and "dspy-memory list" in captured.err


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_has_help_text():
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in _subparsers().items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


def _sections() -> dict[str, str]:
    text = DOCS.read_text()
    parts = re.split(r"^## `dspy-memory ([a-z-]+)`", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_command_and_option_is_documented_in_docs_cli():
    sections = _sections()
    undocumented = []
    for name, parser in _subparsers().items():
        if name not in sections:
            undocumented.append(name)
            continue
        shared = ("--db", "--embedder", "--json", "--user", "--agent", "--run", "-h", "--help")
        shared += ("--user-id", "--agent-id", "--run-id")
        for action in parser._actions:
            for option in action.option_strings:
                # The options every command shares are documented once, at the top.
                if option not in shared and not re.search(
                    rf"(?<![\w-]){re.escape(option)}(?![\w-])", sections[name]
                ):
                    undocumented.append(f"{name} {option}")
    assert undocumented == []


def test_exit_codes_are_documented():
    text = DOCS.read_text()
    for code in ("0", "1", "2", "3", "130", "141"):
        assert re.search(rf"\| `?{code}`? \|", text), code


def test_eval_help_names_the_whole_command(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "reconcile", "--help"])
    assert capsys.readouterr().out.startswith("usage: dspy-memory eval reconcile")
