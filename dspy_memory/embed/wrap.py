"""Adapt any callable, including a `dspy.Embedder`, to the Embedder protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dspy_memory.embed.base import BatchedEmbedder


class CallableEmbedder(BatchedEmbedder):
    """Wraps `fn(list[str]) -> vectors`. `name` must identify the model: it is recorded in the
    memory file, and a file is refused by an embedder with another name."""

    def __init__(
        self,
        fn: Callable[[list[str]], Any],
        *,
        name: str,
        dim: int | None = None,
        batch_size: int = 64,
        cache_size: int = 10_000,
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        if not callable(fn):
            raise TypeError("CallableEmbedder needs a callable that embeds a list of texts")
        if not name or not isinstance(name, str):
            raise ValueError("CallableEmbedder needs a name that identifies the model")
        self.fn = fn
        self.name = name
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self._run_raw(["dimension probe"])[0])
        return self._dim

    def _run_raw(self, texts: list[str]) -> Any:
        return self.fn(list(texts))

    def _embed_batch(self, texts: list[str]) -> Any:
        return self._run_raw(texts)


def from_dspy_embedder(embedder: Any, *, name: str | None = None, **kwargs: Any) -> CallableEmbedder:
    """Wrap a `dspy.Embedder`. Its model string names it unless `name` is given."""
    model = getattr(embedder, "model", None)
    if name is None:
        if not isinstance(model, str):
            raise ValueError(
                "this dspy.Embedder wraps a callable, so its vectors cannot be named "
                "automatically; pass a name: CallableEmbedder(embedder, name='my-model-v1')"
            )
        name = f"dspy:{model}"
    return CallableEmbedder(embedder, name=name, **kwargs)


def is_embedder(obj: Any) -> bool:
    return all(hasattr(obj, attr) for attr in ("name", "dim", "embed", "embed_query"))
