"""A deterministic embedder for tests. NOT semantic: it only sees shared words and spellings."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from dspy_memory.embed.base import BatchedEmbedder

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class HashEmbedder(BatchedEmbedder):
    """Feature hashing of words and character trigrams into `dim` signed buckets.

    Texts that share words get similar vectors, which is enough to test plumbing, ranking and
    persistence without a model. It knows nothing about meaning ("car" and "automobile" are
    unrelated), so it is never chosen unless asked for by name ("test").
    """

    def __init__(self, dim: int = 64, *, batch_size: int = 256, cache_size: int = 10_000) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        if dim < 8 or dim % 8:
            raise ValueError("HashEmbedder dim must be a multiple of 8 (at least 8)")
        self._dim = dim
        self.name = f"test-hash-v1:{dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [word.lower() for word in _WORD.findall(text)]
        features = [(f"w:{word}", 1.0) for word in words]
        for word in words:
            padded = f"^{word}$"
            features.extend((f"c:{padded[i : i + 3]}", 0.3) for i in range(len(padded) - 2))
        return features

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self._dim] += sign * weight
        return out
