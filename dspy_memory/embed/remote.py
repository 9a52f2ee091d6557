"""Embedders served by Ollama or an OpenAI-compatible API."""

from __future__ import annotations

from typing import Any

from dspy_memory.embed.base import BatchedEmbedder
from dspy_memory.errors import EmbeddingError

OLLAMA_DIMS = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
    "bge-m3": 1024,
}
OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class _ProbedDim:
    """Dimension from a table of known models, else from embedding one probe text."""

    _dim: int | None

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError  # the embedder it is mixed into has it

    @property
    def dim(self) -> int:
        if self._dim is None:
            vectors = self._embed_batch(["dimension probe"])
            self._dim = len(vectors[0])
        return self._dim


class OllamaEmbedder(_ProbedDim, BatchedEmbedder):
    """An Ollama embedding model through the `ollama` client (`/api/embed`)."""

    def __init__(
        self,
        model: str = "nomic-embed-text",
        *,
        host: str | None = None,
        batch_size: int = 64,
        cache_size: int = 10_000,
        query_prefix: str = "",
        document_prefix: str = "",
        client: Any = None,
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self.model = model
        self.host = host
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        suffix = "".join(
            f"|{key}={value}"
            for key, value in (("query_prefix", query_prefix), ("document_prefix", document_prefix))
            if value
        )
        self.name = f"ollama:{model}{suffix}"
        self._dim = OLLAMA_DIMS.get(model.removesuffix(":latest"))
        self._client = client

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import ollama
            except ImportError:
                raise EmbeddingError(
                    "the Ollama embedder needs the ollama client: pip install 'dspy-memory[ollama]'"
                ) from None
            self._client = ollama.Client(host=self.host)
        return self._client

    def _query_text(self, text: str) -> str:
        return self.query_prefix + text

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        inputs = [self.document_prefix + text for text in texts] if self.document_prefix else texts
        try:
            response = self._get_client().embed(model=self.model, input=inputs)
        except EmbeddingError:
            raise
        except Exception as exc:
            where = self.host or "http://localhost:11434"
            raise EmbeddingError(
                f"Ollama at {where} could not embed with {self.model!r}: {exc}. Is `ollama serve` "
                f"running, and was the model pulled (`ollama pull {self.model}`)?"
            ) from exc
        return list(response["embeddings"])


class OpenAIEmbedder(_ProbedDim, BatchedEmbedder):
    """OpenAI embeddings (or any OpenAI-compatible server via `base_url`)."""

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 256,
        cache_size: int = 10_000,
        client: Any = None,
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self.model = model
        self.dimensions = dimensions
        self.api_key = api_key
        self.base_url = base_url
        self.name = f"openai:{model}" + (f"|dimensions={dimensions}" if dimensions else "")
        self._dim = dimensions or (OPENAI_DIMS.get(model) if base_url is None else None)
        self._client = client

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError:
                raise EmbeddingError(
                    "the OpenAI embedder needs the openai client: pip install 'dspy-memory[openai]'"
                ) from None
            self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url)
        return self._client

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions:
            kwargs["dimensions"] = self.dimensions
        try:
            response = self._get_client().embeddings.create(**kwargs)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"OpenAI embeddings with {self.model!r} failed: {exc}") from exc
        data = sorted(response.data, key=lambda item: item.index)
        return [item.embedding for item in data]
