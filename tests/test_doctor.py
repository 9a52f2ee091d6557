"""`dspy-memory doctor` against a loopback server speaking Ollama's API."""

from __future__ import annotations

import json
import socket

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.testing import call_for

from .fakes import ollama_server


@pytest.fixture(autouse=True)
def no_lm_cache(monkeypatch):
    saved = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    for name in ("DSPY_MEMORY_LM", "DSPY_MEMORY_LM_API_BASE", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    yield
    dspy.cache = saved


def by_schema(body):
    """A model that fills the schema `format` asks for (numbers 6, text MEMORY), or in JSON mode
    the output fields the prompt names (with "6", which fits either type)."""
    if isinstance(body.get("format"), dict):
        properties = body["format"]["properties"]
        return json.dumps(
            {name: 6 if spec["type"] == "integer" else "MEMORY" for name, spec in properties.items()}
        )
    return json.dumps({name: "6" for name in call_for(body["messages"]).output_fields})


def doctor(capsys, *args):
    code = main(["doctor", *args])
    lines = capsys.readouterr().out.splitlines()
    return code, {line.split()[1]: line for line in lines}


def test_a_ready_machine_is_all_ok(capsys):
    with ollama_server(reply_to=by_schema) as (url, requests):
        code, lines = doctor(capsys, "--host", url)
    assert code == 0
    for name in ("sqlite", "sqlite-vec", "ollama", "models", "context", "lm"):
        assert lines[name].startswith("ok "), lines[name]
    assert "sqlean" in lines["sqlite"] and "0.6.2" in lines["ollama"]
    assert "window 8192 tokens" in lines["context"] and "format=schema" in lines["lm"]
    assert lines["embedder"].startswith("skip")  # not loaded unless asked
    [probe] = [r["body"] for r in requests if r["path"] == "/api/chat"]
    assert probe["options"]["num_ctx"] == 8192
    assert sorted(probe["format"]["properties"]) == ["letters", "uppercase"]


def test_the_lm_and_its_host_come_from_the_environment_as_for_the_write_path(capsys, monkeypatch):
    with ollama_server(models=("qwen2.5:7b",), reply_to=by_schema) as (url, requests):
        monkeypatch.setenv("DSPY_MEMORY_LM", "ollama_chat/qwen2.5:7b")
        monkeypatch.setenv("DSPY_MEMORY_LM_API_BASE", f"{url}/v1")
        code, lines = doctor(capsys)
    assert code == 0 and url in lines["ollama"] and "qwen2.5:7b" in lines["lm"]
    assert [r["body"]["model"] for r in requests if r["path"] == "/api/chat"] == ["qwen2.5:7b"]


def test_ollama_down_fails_with_how_to_start_it(capsys):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, lines = doctor(capsys, "--host", f"127.0.0.1:{port}", "--timeout", "2")
    assert code == 1
    assert lines["ollama"].startswith("fail") and "fix: start Ollama: ollama serve" in lines["ollama"]
    assert all(lines[name].startswith("skip") for name in ("models", "context", "lm"))


def test_a_model_not_pulled_fails_with_the_pull_command(capsys):
    with ollama_server(models=("llama3.2:latest",), reply_to=by_schema) as (url, _):
        code, lines = doctor(
            capsys, "--host", url, "--lm", "ollama_chat/qwen2.5:7b", "--embedder", "ollama:bge-m3"
        )
        assert code == 1
        assert lines["models"].startswith("fail")
        assert "fix: ollama pull qwen2.5:7b && ollama pull bge-m3" in lines["models"]
        assert lines["context"].startswith("skip") and lines["lm"].startswith("skip")
        assert lines["embedder"].startswith("fail")
        # The chat model is there, only the embedder is missing: the LM is still checked.
        code, lines = doctor(capsys, "--host", url, "--embedder", "ollama:nomic-embed-text")
    assert code == 1 and "fix: ollama pull nomic-embed-text" in lines["models"]
    assert lines["context"].startswith("ok") and lines["lm"].startswith("ok")
    with ollama_server(reply_to=by_schema) as (url, _):
        code, lines = doctor(capsys, "--host", url, "--embedder", "ollama:nomic-embed-text", "--no-probe")
    assert code == 0 and lines["embedder"].startswith("ok") and "768 dimensions" in lines["embedder"]


@pytest.mark.parametrize(
    "reply", ["I think the word has six letters.", '{"letters": 6, "uppercase": "MEM', '{"count": 6}']
)
def test_a_malformed_probe_answer_fails_the_lm_check(capsys, reply):
    with ollama_server(reply_to=lambda body: reply) as (url, _):
        code, lines = doctor(capsys, "--host", url)
    assert code == 1
    assert lines["lm"].startswith("fail") and "AdapterParseError" in lines["lm"]
    assert "fix: use a model that follows formats better" in lines["lm"]
    assert lines["ollama"].startswith("ok") and lines["models"].startswith("ok")


def test_small_windows_and_old_servers_are_warnings(capsys):
    with ollama_server(reply_to=by_schema, context_length=4096, version="0.4.7") as (url, requests):
        code, lines = doctor(capsys, "--host", url)
        assert code == 0  # warnings do not fail
        assert lines["ollama"].startswith("warn") and "upgrade Ollama to 0.5.0" in lines["ollama"]
        assert lines["context"].startswith("warn") and "trained for 4096 tokens" in lines["context"]
        assert "fix: --num-ctx 4096" in lines["context"]
        assert lines["lm"].startswith("ok") and "format=json" in lines["lm"]
    with ollama_server(reply_to=by_schema) as (url, _):
        code, lines = doctor(capsys, "--host", url, "--num-ctx", "4096", "--no-probe")
    assert code == 0 and lines["context"].startswith("warn")
    assert (
        "6000 tokens (write.max_prompt_tokens)" in lines["context"] and "num_ctx >= 7024" in lines["context"]
    )
    assert lines["lm"].startswith("skip")
    assert [r["body"]["format"] for r in requests if r["path"] == "/api/chat"] == ["json"]


def test_the_embedder_is_checked_against_the_file(capsys, tmp_path):
    db = str(tmp_path / "memory.db")
    with Memory(db, embedder="test:64") as memory:
        memory.add("Ada lives in Denver.", user_id="ada", infer=False)
    code, lines = doctor(capsys, "--db", db, "--lm", "openai/gpt-4o-mini", "--no-probe")
    assert code == 0 and lines["embedder"].startswith("ok") and "64 dimensions, matches" in lines["embedder"]
    assert lines["ollama"].startswith("skip")  # nothing here uses Ollama
    code, lines = doctor(
        capsys, "--db", db, "--embedder", "test:32", "--lm", "openai/gpt-4o-mini", "--no-probe"
    )
    assert code == 1 and lines["embedder"].startswith("fail")
    assert "fix: open it with the embedder it was built with: --embedder test:64" in lines["embedder"]


def test_json_output(capsys):
    with ollama_server(reply_to=by_schema) as (url, _):
        assert main(["doctor", "--host", url, "--no-probe", "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)
    assert [check["name"] for check in checks] == [
        "sqlite-vec",
        "sqlite",
        "encryption",
        "embedder",
        "ollama",
        "models",
        "context",
        "lm",
    ]
    assert {check["status"] for check in checks} == {"ok", "skip"}
