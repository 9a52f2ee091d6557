"""`dspy-memory demo` with an LM: the full write path on the shipped conversation."""

from __future__ import annotations

import io
import json

from dspy_memory.cli import main
from dspy_memory.demo import demo_facts, run_demo
from dspy_memory.testing import oracle_write_lm

from .fakes import ollama_server


def test_demo_with_an_lm_shows_operations_costs_and_timelines():
    out = io.StringIO()
    summary = run_demo(embedder="test", lm=oracle_write_lm(demo_facts()), out=out)
    text = out.getvalue()
    assert summary["mode"] == "lm" and summary["totals"]["lm_calls"] == 4  # one per session
    assert summary["totals"]["episodes"] == 19 and summary["totals"]["prompt_tokens"] > 19 * 100
    assert [old for old, _ in summary["changed"]] == [
        "Ada works as an ICU nurse at Boston General.",
        "Ada works night shifts.",
        "Ada lives in a small apartment in Somerville, just outside Boston.",
    ]
    assert "Denver" in summary["changed"][2][1]
    for step in ("1. Each session", "INVALIDATE", "2. Facts that changed", "3. search(", "4. Cost"):
        assert step in text
    assert "2024-01-08 .. 2024-04-18  Ada lives in a small apartment in Somerville" in text
    assert "5. memory.context(" in text and summary["context_tokens"] <= 400
    assert summary["context"].startswith("## Core memory\n<persona>")


def test_without_an_lm_the_demo_says_how_to_enable_one(monkeypatch, capsys):
    monkeypatch.delenv("DSPY_MEMORY_LM", raising=False)
    assert main(["demo", "--embedder", "test"]) == 0
    out = capsys.readouterr().out
    assert "DSPY_MEMORY_LM=ollama_chat/llama3.2 dspy-memory demo" in out and "raw mode" in out


def test_the_demo_lm_is_configured_by_environment_variables(monkeypatch, capsys):
    def chat(messages):
        ops = [{"action": "ADD", "content": "Ada is a nurse.", "subject": "Ada"}]
        return json.dumps({"ops": ops})  # Ollama's native route answers in JSON (schema output)

    with ollama_server(chat=chat) as (url, requests):
        monkeypatch.setenv("DSPY_MEMORY_LM", "ollama_chat/llama3.2")
        monkeypatch.setenv("DSPY_MEMORY_LM_API_BASE", f"{url}/v1")
        assert main(["demo", "--embedder", "test"]) == 0
    out = capsys.readouterr().out
    assert "LM write path with ollama_chat/llama3.2" in out
    assert sum(request["path"] == "/api/chat" for request in requests) == 4
    # The same content four times: added once, then confirmed (NOOP) three times, never duplicated.
    assert out.count("ADD        Ada is a nurse.") == 1 and out.count("NOOP       Ada is a nurse.") == 3
