"""`dspy_memory.local()`: a fully local set-up against a loopback server speaking Ollama's API."""

from __future__ import annotations

import json
import socket

import dspy
import pytest

import dspy_memory
from dspy_memory import LMUnavailableError, Memory

from .fakes import ollama_server


def write_answer(messages):
    """Answer the fused write signature the way a chat model would (ChatAdapter format)."""
    prompt = messages[-1]["content"]
    assert "[[ ## turns ## ]]" in prompt
    ops = [
        {
            "action": "ADD",
            "content": "Ada lives in Denver.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Denver",
            "valid_at": "2024-03-01",
        }
    ]
    return f"[[ ## ops ## ]]\n{json.dumps(ops)}\n\n[[ ## completed ## ]]"


def test_local_configures_the_lm_and_the_embedder_and_memory_works_end_to_end(db_path):
    with ollama_server(chat=write_answer) as (url, requests):
        models = dspy_memory.local(llm="llama3.2", embed="nomic-embed-text", host=url, configure=False)
        assert models.lm.model == "ollama_chat/llama3.2"
        with Memory(db_path, lm=models.lm, embedder=models.embedder) as memory:
            result = memory.add("Ada: I moved to Denver on March 1st.", user_id="ada", at="2024-03-05")
            assert result.error is None, result.error
            assert [op.content for op in result.ops] == ["Ada lives in Denver."]
            assert result.usage.lm_calls == 1 and result.usage.prompt_tokens == 100
            assert memory.search("Denver", user_id="ada")[0].content == "Ada lives in Denver."
    paths = [request["path"] for request in requests]
    # The chat goes to the OpenAI-compatible route WITH /v1 (see the DSPy notes).
    assert "/api/tags" in paths and "/v1/chat/completions" in paths and "/api/embed" in paths


def test_local_can_configure_dspy(db_path):
    with ollama_server(chat=write_answer) as (url, _):
        previous = dspy.settings.lm
        try:
            models = dspy_memory.local(host=url + "/v1/")
            assert dspy.settings.lm is models.lm
            assert models.host == url
        finally:
            dspy.configure(lm=previous)


def test_a_model_that_is_not_pulled_says_what_to_pull():
    with ollama_server(models=("llama3.2:latest",)) as (url, _):
        with pytest.raises(LMUnavailableError, match="ollama pull nomic-embed-text"):
            dspy_memory.local(llm="llama3.2", embed="nomic-embed-text", host=url, configure=False)
        with pytest.raises(LMUnavailableError, match="ollama pull qwen2.5"):
            dspy_memory.local(llm="qwen2.5", embed=None, host=url, configure=False)


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
        assert lm.model == "ollama_chat/llama3.2" and lm.kwargs["api_base"] == "http://box:11434/v1"
