"""The embedder protocol and the shared batching + content-hash cache."""

from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dspy_memory.errors import EmbeddingError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors of a fixed dimension.

    `name` identifies the model (and anything that changes its vectors); it is recorded in the
    memory file so a file is never searched with vectors from another model.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class BatchedEmbedder(ABC):
    """Base class: subclasses implement `_embed_batch`; this adds batching, an LRU cache keyed by
    content hash, shape and finiteness checks, and normalization."""

    name: str

    def __init__(self, *, batch_size: int = 64, cache_size: int = 10_000) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self.cache_hits = 0

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> Any:
        """Return one vector per text (any array-like of shape (len(texts), dim))."""

    def _query_text(self, text: str) -> str:
        """Models that want an instruction prefix for queries override this."""
        return text

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts; use embed_query() for one text")
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        keys = [text_hash(text) for text in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._cache_lock:
            missing = self._from_cache(keys, out)
        unique = list(missing)
        for start in range(0, len(unique), self.batch_size):
            batch_keys = unique[start : start + self.batch_size]
            batch = [texts[missing[key][0]] for key in batch_keys]
            vectors = self._run(batch)
            with self._cache_lock:
                for key, vector in zip(batch_keys, vectors):
                    for index in missing[key]:
                        out[index] = vector
                    if self.cache_size:
                        self._cache[key] = vector
                        self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    def _from_cache(self, keys: list[str], out: np.ndarray) -> dict[str, list[int]]:
        """Fill `out`'s rows whose key is cached; the rows of each key that is not. The caller
        holds the cache lock."""
        missing: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                out[index] = cached
                self.cache_hits += 1
            else:
                missing.setdefault(key, []).append(index)
        return missing

    def cached(self, texts: list[str]) -> np.ndarray | None:
        """The texts' vectors if every one is cached, else None (nothing counted). A batcher
        asks first, so a caller whose texts are cached does not queue behind the model."""
        if not self.cache_size or not all(isinstance(text, str) for text in texts):
            return None
        keys = [text_hash(text) for text in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._cache_lock:
            if not all(key in self._cache for key in keys):
                return None
            self._from_cache(keys, out)
        return out

    def query_text(self, text: str) -> str:
        """The text a query is embedded as (with the model's query prefix, if it has one)."""
        return self._query_text(text)

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise TypeError(f"a query must be a string, not {type(text).__name__}")
        return self.embed([self.query_text(text)])[0]

    def clear_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    def _run(self, batch: list[str]) -> np.ndarray:
        try:
            with self._model_lock:
                raw = self._embed_batch(batch)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedder {self.name!r} failed: {exc}") from exc
        try:
            vectors = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"embedder {self.name!r} returned something that is not a matrix of numbers: {exc}"
            ) from exc
        if vectors.shape != (len(batch), self.dim):
            raise EmbeddingError(
                f"embedder {self.name!r} returned shape {vectors.shape} for {len(batch)} texts; "
                f"expected ({len(batch)}, {self.dim})"
            )
        if not np.isfinite(vectors).all():
            raise EmbeddingError(f"embedder {self.name!r} returned NaN or infinite values")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)


def forget_cached_content(embedder: Any) -> None:
    """Drop an embedder's cached vectors after an erasure: the cache is keyed by content, so
    none of it may stay in memory. Dropping all of it costs a few re-embeddings and needs no
    list of what was erased."""
    clear = getattr(embedder, "clear_cache", None)
    if clear is not None:
        clear()
