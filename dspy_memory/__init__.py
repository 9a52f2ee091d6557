"""dspy-memory: long-term, time-aware memory for DSPy agents in one SQLite file."""

from dspy_memory.agent.tool_card import MemoryTool
from dspy_memory.config import LifecycleConfig, LifecycleSettings, MemoryConfig, RetrievalConfig, WriteConfig
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
    BackupError,
    BlockError,
    ConfigError,
    DSPyMemoryError,
    EmbedderMismatchError,
    EmbeddingError,
    ExtensionLoadError,
    InvalidInputError,
    LMUnavailableError,
    MemoryClosedError,
    MemoryFileError,
    MemoryNotFoundError,
    ReadOnlyError,
    RerankerUnavailableError,
    SchemaError,
    ScopeError,
    StorageError,
    StorageFullError,
    VerificationError,
    WriteConflictError,
    WriteProgramError,
)
from dspy_memory.graph import GraphLink, MemoryGraph
from dspy_memory.memory import Memory
from dspy_memory.ops import AppliedOp, ClusterMemory, ConsolidationOp, Fact, Op, Rejection
from dspy_memory.read.retrieval import RECIPES, Recipe
from dspy_memory.reports import BackupManifest, FileCheck, MaintenanceReport
from dspy_memory.retention_settings import RetentionSettings
from dspy_memory.types import (
    AddResult,
    Block,
    BlockVersion,
    Context,
    ContextItem,
    DeleteResult,
    Entity,
    Episode,
    Event,
    FeedbackRecord,
    Hit,
    LMUsage,
    MemoryRecord,
    Provenance,
    Scope,
    ScoreDetails,
)
from dspy_memory.util.lm import LocalModels, local, make_lm

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # MemoryReAct subclasses dspy.Module; importing DSPy costs ~1 s, so only when asked for.
    if name == "MemoryReAct":
        from dspy_memory.agent.react import MemoryReAct

        return MemoryReAct
    raise AttributeError(f"module 'dspy_memory' has no attribute {name!r}")


__all__ = [
    "RECIPES",
    "AddResult",
    "BackupError",
    "BackupManifest",
    "FileCheck",
    "VerificationError",
    "AppliedOp",
    "Block",
    "BlockError",
    "ConfigError",
    "BlockVersion",
    "CallableEmbedder",
    "ClusterMemory",
    "ConsolidationOp",
    "Context",
    "ContextItem",
    "DSPyMemoryError",
    "DeleteResult",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "Entity",
    "MemoryGraph",
    "GraphLink",
    "Episode",
    "Event",
    "ExtensionLoadError",
    "FeedbackRecord",
    "InvalidInputError",
    "Fact",
    "HashEmbedder",
    "Hit",
    "LMUnavailableError",
    "RerankerUnavailableError",
    "MemoryClosedError",
    "MemoryFileError",
    "LMUsage",
    "LifecycleConfig",
    "LifecycleSettings",
    "RetentionSettings",
    "MaintenanceReport",
    "LocalEmbedder",
    "LocalModels",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "MemoryReAct",
    "MemoryRecord",
    "MemoryTool",
    "OllamaEmbedder",
    "Op",
    "OpenAIEmbedder",
    "Provenance",
    "Recipe",
    "Rejection",
    "RetrievalConfig",
    "ReadOnlyError",
    "SchemaError",
    "Scope",
    "ScopeError",
    "StorageError",
    "StorageFullError",
    "WriteConflictError",
    "ScoreDetails",
    "WriteConfig",
    "WriteProgramError",
    "local",
    "make_lm",
    "make_embedder",
]
