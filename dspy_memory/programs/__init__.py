"""DSPy programs: every decision an LM makes about memory. No I/O happens here."""

from dspy_memory.programs.answer import (
    AnswerFromMemory,
    AnswerJudge,
    JudgeAnswer,
    MemoryAnswerer,
    QueryRewriter,
    RewriteQuery,
    SearchPlan,
)
from dspy_memory.programs.compact import CompactOp, CompactWriteMemories, CompactWriter
from dspy_memory.programs.consolidate import ConsolidateMemories, MemoryConsolidator
from dspy_memory.programs.context import CompressMemories, MemoryCompressor
from dspy_memory.programs.rerank import MemoryReranker, RerankCandidate, RerankMemories
from dspy_memory.programs.write import (
    ExtractFacts,
    FactExtractor,
    FactReconciler,
    FusedWriter,
    KnownMemory,
    ReconcileFacts,
    Turn,
    TwoStepWriter,
    WriteMemories,
)

__all__ = [
    "AnswerFromMemory",
    "AnswerJudge",
    "JudgeAnswer",
    "MemoryAnswerer",
    "QueryRewriter",
    "RewriteQuery",
    "SearchPlan",
    "CompactOp",
    "CompactWriteMemories",
    "CompactWriter",
    "ConsolidateMemories",
    "MemoryConsolidator",
    "CompressMemories",
    "MemoryCompressor",
    "MemoryReranker",
    "RerankCandidate",
    "RerankMemories",
    "ExtractFacts",
    "FactExtractor",
    "FactReconciler",
    "FusedWriter",
    "KnownMemory",
    "ReconcileFacts",
    "Turn",
    "TwoStepWriter",
    "WriteMemories",
]
