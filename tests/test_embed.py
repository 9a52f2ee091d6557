import builtins

import numpy as np
import pytest

from dspy_memory import EmbeddingError, Memory
from dspy_memory.embed import (
    CallableEmbedder,
    HashEmbedder,
    LocalEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from tests.fakes import embedding_server


def test_hash_embedder_is_deterministic_normalized_and_word_sensitive():
    a, b = HashEmbedder(64), HashEmbedder(64)
    vectors = a.embed(["Ada moved to Denver", "Ada moved to Denver", "quarterly tax forms"])
    assert np.allclose(
        vectors, b.embed(["Ada moved to Denver", "Ada moved to Denver", "quarterly tax forms"])
    )
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.99
    assert vectors[0] @ vectors[2] < 0.5


def test_the_test_embedder_is_never_chosen_silently(monkeypatch):
    assert make_embedder("local").name.startswith("local:")
    assert make_embedder("test").name.startswith("test-hash")
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("magic")
    # A model that needs sentence-transformers fails loudly without it instead of falling back.
    real_import = builtins.__import__

    def no_sentence_transformers(name, *args, **kwargs):
        if name.startswith("sentence_transformers"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sentence_transformers)
    with pytest.raises(EmbeddingError, match=r"dspy-memory\[sentence-transformers\]"):
        LocalEmbedder("BAAI/bge-small-en-v1.5").embed(["hello"])
    with pytest.raises(EmbeddingError, match=r"dspy-memory\[sentence-transformers\]"):
        LocalEmbedder(backend="sentence-transformers").embed(["hello"])


def test_cache_by_content_hash_and_batching():
    calls = []

    def fn(texts):
        calls.append(list(texts))
        return HashEmbedder(16, cache_size=0).embed(texts)

    embedder = CallableEmbedder(fn, name="counting", dim=16, batch_size=2)
    first = embedder.embed(["a", "b", "c", "a"])
    assert [len(batch) for batch in calls] == [2, 1]  # "a" embedded once, batches of 2
    second = embedder.embed(["c", "b"])
    assert len(calls) == 2 and embedder.cache_hits == 2
    assert np.allclose(first[2], second[0])
    embedder.clear_cache()
    embedder.embed(["c"])
    assert calls[-1] == ["c"]


@pytest.mark.parametrize(
    "output, message",
    [
        (lambda texts: [[1.0, 2.0]] * len(texts), "shape"),
        (lambda texts: [[float("nan")] * 4] * len(texts), "NaN"),
        (lambda texts: [["x"] * 4] * len(texts), "not a matrix"),
        (lambda texts: [[1.0] * 4], "shape"),
    ],
)
def test_malformed_vectors_raise_embedding_errors(output, message):
    embedder = CallableEmbedder(output, name="broken", dim=4)
    with pytest.raises(EmbeddingError, match=message):
        embedder.embed(["one", "two"])


def test_a_plain_callable_must_be_named():
    with pytest.raises(TypeError, match="CallableEmbedder"):
        make_embedder(lambda texts: texts)


def test_dspy_embedder_is_wrapped_with_its_model_name():
    dspy = pytest.importorskip("dspy")
    wrapped = make_embedder(dspy.Embedder("openai/text-embedding-3-small"))
    assert wrapped.name == "dspy:openai/text-embedding-3-small"
    with pytest.raises(ValueError, match="pass a name"):
        make_embedder(dspy.Embedder(lambda texts: HashEmbedder(8).embed(texts), caching=False))
    named = CallableEmbedder(
        dspy.Embedder(lambda texts: HashEmbedder(8, cache_size=0).embed(texts), caching=False), name="mine"
    )
    assert named.dim == 8 and named.embed(["x"]).shape == (1, 8)


def test_ollama_embedder_against_a_loopback_server(tmp_path):
    pytest.importorskip("ollama")
    with embedding_server("ollama", dim=32) as (url, requests):
        embedder = OllamaEmbedder("nomic-embed-text:v1.5", host=url, query_prefix="search_query: ")
        assert embedder.dim == 32  # unknown tag: probed
        with Memory(str(tmp_path / "o.db"), embedder=embedder) as memory:
            memory.add("Ada moved to Denver", user_id="ada")
            assert memory.search("Denver", user_id="ada")[0].content == "Ada moved to Denver"
        assert requests[-1]["path"] == "/api/embed"
        assert requests[-1]["body"]["input"] == ["search_query: Denver"]
        assert embedder.name == "ollama:nomic-embed-text:v1.5|query_prefix=search_query: "


def test_ollama_down_or_broken_is_a_clear_error():
    pytest.importorskip("ollama")
    with embedding_server("ollama", dim=32, behaviour="error") as (url, _):
        with pytest.raises(EmbeddingError, match="ollama pull"):
            OllamaEmbedder("all-minilm", host=url).embed(["x"])
    with embedding_server("ollama", dim=32, behaviour="wrong-dim") as (url, _):
        embedder = OllamaEmbedder("mystery", host=url)
        embedder._dim = 32
        with pytest.raises(EmbeddingError, match="shape"):
            embedder.embed(["x"])


def test_openai_embedder_against_a_loopback_server():
    pytest.importorskip("openai")
    with embedding_server("openai", dim=24) as (url, requests):
        embedder = OpenAIEmbedder(
            "text-embedding-3-small", dimensions=24, api_key="sk-test", base_url=f"{url}/v1"
        )
        vectors = embedder.embed(["first", "second"])
        assert vectors.shape == (2, 24)
        # The server answers out of order; vectors follow their index.
        assert np.allclose(vectors[0], HashEmbedder(24).embed(["first"])[0], atol=1e-6)
        assert requests[0]["body"]["dimensions"] == 24
        assert requests[0]["auth"] == "Bearer sk-test"
        assert embedder.name == "openai:text-embedding-3-small|dimensions=24"
    with embedding_server("openai", dim=24, behaviour="not-numbers") as (url, _):
        with pytest.raises(EmbeddingError):
            OpenAIEmbedder("text-embedding-3-small", dimensions=24, api_key="k", base_url=f"{url}/v1").embed(
                ["x"]
            )
