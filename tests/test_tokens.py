"""Token counts are cl100k_base's, offline, from declared dependencies (not another package's folder)."""

from __future__ import annotations

import socket

from dspy_memory.util import tokens


def test_counts_are_cl100k_base_without_a_network(monkeypatch, tmp_path):
    def no_network(*args, **kwargs):
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: nothing to reuse
    tokens._encoder.cache_clear()
    try:
        assert tokens.tokenizer_name() == "cl100k_base"
        # Counts published for cl100k_base (OpenAI's cookbook: "tiktoken is great!" is 6).
        assert tokens.count_tokens("tiktoken is great!") == 6
        assert tokens.count_tokens("hello world") == 2
        # A special token's text is counted as text (cl100k_base would make it one token), not refused.
        assert tokens.count_tokens("<|endoftext|>") > 1
    finally:
        tokens._encoder.cache_clear()


def test_without_tiktoken_an_estimate_is_used(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_tiktoken(name, *args, **kwargs):
        if name == "tiktoken" or name.startswith("tiktoken."):
            raise ImportError("no tiktoken here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_tiktoken)
    tokens._encoder.cache_clear()
    try:
        assert tokens.tokenizer_name() == "estimate"
        assert tokens.count_tokens("Ada lives in Denver.") == int(5 * 1.1)
    finally:
        monkeypatch.undo()
        tokens._encoder.cache_clear()
