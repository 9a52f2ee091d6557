"""dspy-memory: long-term, time-aware memory for DSPy agents in one SQLite file."""

from dspy_memory.config import MemoryConfig, RetrievalConfig
from dspy_memory.embed import (
    CallableEmbedder,
    Embedder,
    HashEmbedder,
    LocalEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from dspy_memory.errors import (
    DSPyMemoryError,
    EmbedderMismatchError,
    EmbeddingError,
    ExtensionLoadError,
    MemoryNotFoundError,
    SchemaError,
    ScopeError,
)
from dspy_memory.memory import Memory
from dspy_memory.retrieval import RECIPES, Recipe
from dspy_memory.types import (
    AddResult,
    DeleteResult,
    Episode,
    Event,
    Hit,
    MemoryRecord,
    Provenance,
    Scope,
    ScoreDetails,
)

__version__ = "0.1.0"

__all__ = [
    "RECIPES",
    "AddResult",
    "CallableEmbedder",
    "DSPyMemoryError",
    "DeleteResult",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "Episode",
    "Event",
    "ExtensionLoadError",
    "HashEmbedder",
    "Hit",
    "LocalEmbedder",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "MemoryRecord",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "Provenance",
    "Recipe",
    "RetrievalConfig",
    "SchemaError",
    "Scope",
    "ScopeError",
    "ScoreDetails",
    "make_embedder",
]
