"""Ollama through its native chat route, against a loopback server speaking Ollama's API: what
goes over the wire (`format`, `options.num_ctx`), old servers, malformed replies, `local()`."""

from __future__ import annotations

import json
import socket

import dspy
import pytest

import dspy_memory
from dspy_memory import LMUnavailableError, Memory
from dspy_memory.errors import InvalidInputError
from dspy_memory.testing import call_for, oracle_responder
from dspy_memory.util.lm import make_lm

from .fakes import chat_by_signature, ollama_server

TEXT = "Ada: I moved to Denver on March 1st."
FACTS = {
    TEXT: [
        {
            "content": "Ada lives in Denver.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Denver",
            "valid_at": "2024-03-01",
        }
    ]
}
ORACLE = chat_by_signature(oracle_responder(FACTS))


@pytest.fixture(autouse=True)
def no_lm_cache():
    """Every call reaches the server: DSPy's cache keys leave out the base URL, so a reply one
    fake server gave would otherwise answer the next test's request."""
    saved = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    yield
    dspy.cache = saved


def chats(requests):
    return [request["body"] for request in requests if request["path"] == "/api/chat"]


def prompt_output_fields(body):
    """The output fields the prompt of a chat request names (DSPy's "Your output fields are")."""
    return call_for(body["messages"])


def test_local_writes_memories_through_the_native_route_with_num_ctx_and_the_output_schema(db_path):
    with ollama_server(chat=ORACLE) as (url, requests):
        models = dspy_memory.local(llm="llama3.2", embed="nomic-embed-text", host=url, configure=False)
        assert models.lm.model == "ollama_chat/llama3.2"
        with Memory(db_path, lm=models.lm, embedder=models.embedder) as memory:
            result = memory.add(TEXT, user_id="ada", at="2024-03-05")
            assert result.error is None, result.error
            assert [op.content for op in result.ops] == ["Ada lives in Denver."]
            # Usage comes from Ollama's own counts (prompt_eval_count, eval_count).
            assert result.usage.lm_calls == 1 and result.usage.prompt_tokens == 100
            assert memory.search("Denver", user_id="ada")[0].content == "Ada lives in Denver."
    paths = [request["path"] for request in requests]
    assert "/api/tags" in paths and "/api/version" in paths and "/api/embed" in paths
    assert "/v1/chat/completions" not in paths
    [body] = chats(requests)
    assert body["model"] == "llama3.2" and body["stream"] is False
    assert body["options"]["num_ctx"] == 8192
    schema = body["format"]
    wanted = prompt_output_fields(body).output_fields
    assert wanted and sorted(schema["properties"]) == sorted(wanted) == sorted(schema["required"])
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    # The answer is asked for as JSON, the shape `format` forces.
    assert "Respond with a JSON object" in body["messages"][-1]["content"]


def test_num_ctx_is_configurable_in_local_and_make_lm(db_path):
    with ollama_server(chat=ORACLE) as (url, requests):
        models = dspy_memory.local(host=url, configure=False, num_ctx=16384)
        with Memory(db_path, lm=models.lm, embedder="test") as memory:
            assert memory.add(TEXT, user_id="ada").error is None
        with Memory(
            db_path, lm=make_lm("ollama_chat/llama3.2", url, num_ctx=4096), embedder="test"
        ) as memory:
            assert memory.add("Ada: I like tea.", user_id="ada").error is None
    assert [body["options"]["num_ctx"] for body in chats(requests)] == [16384, 4096]
    for wrong in (100, 8192.0, "8192", True):
        with pytest.raises(InvalidInputError, match="num_ctx"):
            make_lm("ollama_chat/llama3.2", url, num_ctx=wrong)


def test_an_ollama_before_0_5_is_asked_for_json_mode(db_path):
    with ollama_server(chat=ORACLE, version="0.4.7") as (url, requests):
        models = dspy_memory.local(host=url, configure=False)
        with Memory(db_path, lm=models.lm, embedder="test") as memory:
            result = memory.add(TEXT, user_id="ada")
    assert result.error is None and [op.content for op in result.ops] == ["Ada lives in Denver."]
    [body] = chats(requests)
    assert body["format"] == "json" and body["options"]["num_ctx"] == 8192


def test_a_server_that_refuses_the_schema_is_asked_again_in_json_mode_and_remembered(db_path, caplog):
    # No /api/version to go by: the schema is tried, refused (HTTP 400), and JSON mode used.
    with ollama_server(chat=ORACLE, version="0.4.7", reports_version=False) as (url, requests):
        with Memory(db_path, lm=make_lm("ollama_chat/llama3.2", url), embedder="test") as memory:
            first = memory.add(TEXT, user_id="ada")
            second = memory.add("Ada: I like tea.", user_id="ada")
    assert first.error is None and second.error is None
    assert [op.content for op in first.ops] == ["Ada lives in Denver."]
    formats = [body["format"] for body in chats(requests)]
    assert isinstance(formats[0], dict) and formats[1:] == ["json", "json"]
    assert "refused a JSON schema" in caplog.text


MALFORMED = {
    "not JSON": "Sure! Ada lives in Denver now.",
    "truncated JSON": '{"ops": [{"action": "ADD", "content": "Ada lives in Den',
    "wrong fields": json.dumps({"operations": [{"action": "ADD", "content": "Ada lives in Denver."}]}),
    "wrong types": json.dumps({"ops": "ADD Ada lives in Denver"}),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_reply_fails_cleanly_and_keeps_the_input(db_path, kind):
    with ollama_server(reply_to=lambda body: MALFORMED[kind]) as (url, requests):
        models = dspy_memory.local(host=url, configure=False)
        with Memory(db_path, lm=models.lm, embedder="test") as memory:
            result = memory.add(TEXT, user_id="ada")  # must not raise
            [episode] = result.episodes
            assert result.error and "AdapterParseError" in result.error and episode.status == "failed"
            assert episode.error and not result.ops
            assert [m.kind for m in result.memories] == ["turn"]
            assert memory.search("Denver", user_id="ada")[0].content == TEXT
    # Every attempt went to Ollama with the schema; none produced a memory from the fragment.
    assert len(chats(requests)) == 2 and all(isinstance(body["format"], dict) for body in chats(requests))


def test_model_strings_get_the_native_route_and_honour_ollama_host(db_path, monkeypatch):
    with ollama_server(chat=ORACLE) as (url, requests):
        monkeypatch.setenv("OLLAMA_HOST", url.removeprefix("http://"))  # as `ollama` reads it
        for model in ("ollama_chat/llama3.2", "ollama/llama3.2"):
            lm = make_lm(model)
            assert lm.model == "ollama_chat/llama3.2" and lm.kwargs["api_base"] == url
        with Memory(db_path, lm="ollama/llama3.2", embedder="test") as memory:
            assert memory.add(TEXT, user_id="ada").error is None
    [body] = chats(requests)
    assert body["options"]["num_ctx"] == 8192 and isinstance(body["format"], dict)


def test_local_can_configure_dspy():
    with ollama_server(chat=ORACLE) as (url, _):
        previous = dspy.settings.lm
        try:
            models = dspy_memory.local(host=url + "/v1/")
            assert dspy.settings.lm is models.lm
            assert models.host == url and models.lm.kwargs["api_base"] == url
        finally:
            dspy.configure(lm=previous)


def test_a_model_that_is_not_pulled_says_what_to_pull():
    with ollama_server(models=("llama3.2:latest",)) as (url, _):
        with pytest.raises(LMUnavailableError, match="ollama pull nomic-embed-text"):
            dspy_memory.local(llm="llama3.2", embed="nomic-embed-text", host=url, configure=False)
        with pytest.raises(LMUnavailableError, match="ollama pull qwen2.5"):
            dspy_memory.local(llm="ollama_chat/qwen2.5", embed=None, host=url, configure=False)


def test_ollama_not_running_says_how_to_start_it():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LMUnavailableError, match="ollama serve"):
        dspy_memory.local(host=f"http://127.0.0.1:{port}", configure=False, timeout=2)


def test_lm_strings_for_hosted_models_are_accepted(db_path):
    # OpenAI and Anthropic go through DSPy's own client; building the LM needs no network.
    for model in ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest", "ollama_chat/llama3.2"):
        with Memory(db_path, embedder="test", lm=model) as memory:
            assert memory._lm_for(None).model == model


def test_the_lm_can_come_from_the_environment(db_path):
    from dspy_memory import MemoryConfig

    config = MemoryConfig.from_env(
        {"DSPY_MEMORY_LM": "ollama_chat/llama3.2", "DSPY_MEMORY_LM_API_BASE": "http://box:11434/v1"},
        path=db_path,
        embedder="test",
    )
    with Memory(config) as memory:
        lm = memory._lm_for(None)
        # A base URL written for the OpenAI-compatible route still reaches the native one.
        assert lm.model == "ollama_chat/llama3.2" and lm.kwargs["api_base"] == "http://box:11434"
        assert lm.engine == "litellm" and lm.kwargs["num_ctx"] == 8192


def test_the_context_window_can_come_from_the_environment(db_path, monkeypatch, capsys):
    from dspy_memory import MemoryConfig
    from dspy_memory.cli import main

    with ollama_server(chat=ORACLE) as (url, requests):
        environ = {"DSPY_MEMORY_LM": "ollama_chat/llama3.2", "DSPY_MEMORY_LM_API_BASE": url}
        config = MemoryConfig.from_env(
            {**environ, "DSPY_MEMORY_LM_NUM_CTX": "4096"}, path=db_path, embedder="test"
        )
        with Memory(config) as memory:
            assert memory.add(TEXT, user_id="ada").error is None
        for key, value in {**environ, "DSPY_MEMORY_LM_NUM_CTX": "16384"}.items():
            monkeypatch.setenv(key, value)
        assert (
            main(["add", "--db", str(db_path), "--embedder", "test", "--user", "ada", "Ada: I like tea."])
            == 0
        )
    assert [body["options"]["num_ctx"] for body in chats(requests)] == [4096, 16384]
    with pytest.raises(ValueError, match="lm_num_ctx"):
        MemoryConfig.from_env({"DSPY_MEMORY_LM_NUM_CTX": "100"})


def test_an_ollama_lm_on_the_openai_compatible_route_is_named_once(db_path, caplog):
    import dspy

    lm = dspy.LM("ollama_chat/llama3.2", api_base="http://localhost:11434/v1", cache=False)
    with Memory(db_path, embedder="test", lm=lm) as memory, caplog.at_level("WARNING", "dspy_memory"):
        memory._lm_for(None)
        memory._lm_for(None)
        native = make_lm("ollama_chat/llama3.2", "http://localhost:11434")
        with dspy.context(lm=native), Memory(db_path, embedder="test") as configured:
            assert configured._lm_for(None) is native  # the native route: nothing to say
    warnings = [r.getMessage() for r in caplog.records if "OpenAI-compatible" in r.getMessage()]
    assert len(warnings) == 1 and "dspy_memory.make_lm('ollama_chat/llama3.2')" in warnings[0]
