"""Embedders behind one small protocol, and `make_embedder` to build one from a spec."""

from __future__ import annotations

import sys
from typing import Any

from dspy_memory.embed.base import BatchedEmbedder, Embedder, forget_cached_content, text_hash
from dspy_memory.embed.batching import MicroBatcher
from dspy_memory.embed.hashing import HashEmbedder
from dspy_memory.embed.local import MINILM, LocalEmbedder
from dspy_memory.embed.remote import OllamaEmbedder, OpenAIEmbedder
from dspy_memory.embed.wrap import CallableEmbedder, from_dspy_embedder, is_embedder
from dspy_memory.errors import ConfigError, EmbedderMismatchError
from dspy_memory.util.text import shown

SPECS = (
    "local",
    "local:<sentence-transformers model>",
    "ollama:<model>",
    "openai:<model>",
    "test[:<dim>] (deterministic, NOT semantic)",
)
TEST_KINDS = ("test", "hash")
KINDS = ("local", "ollama", "openai", *TEST_KINDS)


def _parts(spec: str) -> tuple[str, str]:
    kind, _, model = spec.partition(":")
    return kind.strip().lower(), model.strip()


def spec_problem(spec: str) -> str | None:
    """Why the spec string names no embedder, or None when it names one (whether that one can
    be loaded here is found out when it is built)."""
    kind, model = _parts(spec)
    if kind not in KINDS:
        return f"unknown embedder; use one of: {', '.join(SPECS)}"
    if kind in TEST_KINDS and model:
        if not model.isdigit():
            return "the test embedder's dimension is a whole number, as in 'test:64'"
        try:  # HashEmbedder's own rule for its dimension; building one costs nothing
            HashEmbedder(int(model), cache_size=0)
        except ValueError as exc:
            return str(exc)
    return None


def check_spec(spec: str) -> None:
    """A ConfigError when the spec string names no embedder (see `spec_problem`)."""
    problem = spec_problem(spec)
    if problem is not None:
        raise ConfigError(f"bad setting embedder={shown(spec)}: {problem}", settings=["embedder"])


def make_embedder(
    spec: Any = "local",
    *,
    batch_size: int = 64,
    cache_size: int = 10_000,
    local_backend: str | None = None,
    batch_wait_ms: float = 2.0,
) -> Embedder:
    """Build an embedder from a spec string, an Embedder, or a `dspy.Embedder`.

    Never falls back silently: if the requested embedder cannot be built, the error says why.
    The deterministic test embedder is used only when asked for by name ("test"). Models
    ("local", "ollama", "openai") come behind a MicroBatcher: concurrent callers' texts go
    through the model together, up to `batch_size` texts, a leader waiting up to
    `batch_wait_ms` for company under load (embed/batching.py).
    """
    if is_embedder(spec):
        return spec
    # A dspy.Embedder can only exist once dspy is imported; importing it here would cost ~1 s.
    dspy = sys.modules.get("dspy")
    if dspy is not None and isinstance(spec, dspy.Embedder):
        return from_dspy_embedder(spec, batch_size=batch_size, cache_size=cache_size)
    if callable(spec):
        raise TypeError(
            "a plain callable cannot name its vectors; wrap it: CallableEmbedder(fn, name='my-model-v1')"
        )
    if not isinstance(spec, str):
        raise TypeError(f"embedder must be a spec string or an Embedder, not {type(spec).__name__}")
    check_spec(spec)
    kind, model = _parts(spec)

    def batched(model: Embedder) -> MicroBatcher:
        return MicroBatcher(model, wait_ms=batch_wait_ms, max_batch=batch_size)

    if kind == "local":
        return batched(
            LocalEmbedder(
                model or MINILM, backend=local_backend, batch_size=batch_size, cache_size=cache_size
            )
        )
    if kind == "ollama":
        return batched(
            OllamaEmbedder(model or "nomic-embed-text", batch_size=batch_size, cache_size=cache_size)
        )
    if kind == "openai":
        return batched(
            OpenAIEmbedder(model or "text-embedding-3-small", batch_size=batch_size, cache_size=cache_size)
        )
    # check_spec refused anything else: a hash test embedder (it costs the same alone or batched).
    return HashEmbedder(int(model) if model else 64, batch_size=batch_size, cache_size=cache_size)


def spec_for_recorded(name: str) -> str | None:
    """The spec that rebuilds an embedder from the name recorded in a file, when there is one."""
    if "|" in name:
        return None
    if name.startswith(("local:", "ollama:", "openai:")):
        return name
    if name.startswith("test-hash-v1:"):
        return "test:" + name.rsplit(":", 1)[1]
    return None


def reopen_advice(recorded: str) -> str:
    """How to open a file built with the embedder named `recorded`: advice that works as given."""
    spec = spec_for_recorded(recorded)
    if spec is None:
        return (
            f"It was built with a custom embedder ({recorded!r}), which cannot be rebuilt from its "
            "name: pass the same embedder object (an Embedder whose name is "
            f"{recorded!r}), or use a new file for the new embedder."
        )
    return (
        "Leave embedder= out to open it with the embedder it was built with, or pass "
        f"embedder={spec!r}; or use a new file for the new embedder."
    )


def choose_embedder(given: Any, configured: str | None, recorded: str | None, *, path: str) -> Any:
    """The embedder to open a file with: the one given, else the configured spec, else the one
    the file was built with, else the local model."""
    if given is not None:
        return given
    if configured is not None:
        return configured
    if recorded is not None:
        spec = spec_for_recorded(recorded)
        if spec is None:
            raise EmbedderMismatchError(
                f"{path} was built with embedder {recorded!r}. {reopen_advice(recorded)}", recorded=recorded
            )
        return spec
    return "local"


__all__ = [
    "forget_cached_content",
    "choose_embedder",
    "BatchedEmbedder",
    "check_spec",
    "CallableEmbedder",
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "MicroBatcher",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "from_dspy_embedder",
    "make_embedder",
    "reopen_advice",
    "spec_problem",
    "text_hash",
]
