"""Pydantic records shared across the package. Validation only; no behaviour."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dspy_memory.errors import ScopeError
from dspy_memory.ops import AppliedOp, FactKind, Rejection
from dspy_memory.util.text import valid_text

# The write program writes FactKind; a `turn` is a message kept as it was said (raw mode).
MemoryKind = Literal[FactKind, "turn"]
MEMORY_KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)

EpisodeSource = Literal["message", "text", "json", "tool_step", "document"]
EPISODE_SOURCES: tuple[EpisodeSource, ...] = get_args(EpisodeSource)

EpisodeStatus = Literal["pending", "done", "failed"]
EventType = Literal["ADD", "UPDATE", "INVALIDATE", "DELETE", "MERGE", "DECAY", "RESTORE"]

# current: true at the reference time and still believed; superseded: its world validity ended
# (invalid_at <= as_of); expired: the system stopped believing this row (expired_at <= known_at);
# archived: current, but forgotten by maintenance (docs/lifecycle.md): searched only on request.
MemoryStatus = Literal["current", "superseded", "expired", "future", "archived"]

_MAX_ID_LEN = 256
# SQLite's integers (and so the JSON numbers it can compare exactly) are signed 64-bit.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Scope(BaseModel):
    """Who a memory belongs to; at least one id is required. When reading (docs/scopes.md),
    user_id is a wall: an omitted user_id matches only memories stored without a user, unless
    `any_user` (wildcard scope mode only); omitted agent_id and run_id match any value."""

    model_config = ConfigDict(frozen=True)

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    # Omitted user_id matches any user (the "wildcard" scope mode only). Never dumped, so a
    # scope's ids can be passed on as keyword arguments without widening it by accident.
    any_user: bool = Field(False, exclude=True)

    @field_validator("user_id", "agent_id", "run_id", mode="before")
    @classmethod
    def _clean(cls, value: Any, info: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ScopeError(f"{info.field_name} must be a string, not {type(value).__name__}")
        text = valid_text(str(value).strip(), info.field_name, error=ScopeError)
        if not text:
            raise ScopeError(f"{info.field_name} must not be empty; pass None to leave it out")
        if len(text) > _MAX_ID_LEN:
            raise ScopeError(f"{info.field_name} is longer than {_MAX_ID_LEN} characters")
        return text

    @model_validator(mode="after")
    def _at_least_one(self) -> Scope:
        if self.user_id is None and self.agent_id is None and self.run_id is None:
            raise ScopeError("a scope is required: pass user_id=, agent_id= or run_id=")
        return self

    @classmethod
    def of(
        cls, user_id: Any = None, agent_id: Any = None, run_id: Any = None, *, any_user: bool = False
    ) -> Scope:
        """Build a scope, raising ScopeError (not a pydantic error) when it is invalid."""
        try:
            return cls(user_id=user_id, agent_id=agent_id, run_id=run_id, any_user=any_user)
        except ValidationError as exc:
            error = exc.errors()[0]
            cause = error.get("ctx", {}).get("error")
            raise ScopeError(str(cause) if cause else error["msg"]) from None


class Episode(BaseModel):
    """Immutable raw input, persisted before any processing: the write-ahead log of memory."""

    id: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    source: EpisodeSource
    role: str | None = None
    name: str | None = None
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    occurred_at: datetime
    ingested_at: datetime
    status: EpisodeStatus = "pending"
    error: str | None = None
    attempts: int = 0
    # Whether an LM is to extract memories from it (else it is kept as a raw `turn` memory).
    infer: bool = False
    # When it is to be erased, with what was made from it (docs/governance.md#retention).
    expires_at: datetime | None = None

    @property
    def scope(self) -> Scope:
        return Scope.of(self.user_id, self.agent_id, self.run_id)


# The most memories one search returns, and the search recipes by name (read/retrieval.py).
MAX_K = 1000
RECIPE_NAMES = ("hybrid", "graph", "dense", "keyword", "rerank")
# What every API key of the service starts with (store/keys.py makes them, the service reads them).
API_KEY_PREFIX = "dm_"
# Below this confidence a memory is shown marked as such (in context, to the agent tools).
LOW_CONFIDENCE = 0.7


class MemoryRecord(BaseModel):
    """One version of a memory. `id` is stable across versions; each change adds a version."""

    id: str
    version: int = 1
    content: str
    kind: MemoryKind = "fact"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    confidence: float = 1.0
    importance: float = 0.5
    strength: float = 1.0
    access_count: int = 0
    last_accessed_at: datetime | None = None
    content_hash: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    created_at: datetime
    expired_at: datetime | None = None
    # The memory that replaced this one when it was invalidated, corrected or merged.
    superseded_by: str | None = None
    status: MemoryStatus = "current"
    # When maintenance archived it (None: active); pinned memories never decay.
    archived_at: datetime | None = None
    pinned: bool = False
    # When it is to be erased (docs/governance.md#retention): from then on no read returns it,
    # and maintenance erases it. Not `expired_at` (system time: a later version replaced it).
    expires_at: datetime | None = None
    # The forgetting curve's R = exp(-dt / S) now (docs/lifecycle.md); None where not computed.
    retention: float | None = None


class Provenance(BaseModel):
    """The episode a memory came from."""

    episode_id: str
    source: EpisodeSource
    role: str | None = None
    name: str | None = None
    content: str
    occurred_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class ScoreDetails(BaseModel):
    """How a hit's score was made; ranks are 1-based, None when a source did not find it."""

    dense_rank: int | None = None
    dense_similarity: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    fused: float = 0.0
    # Graph expansion: 0 to 1, from sharing entities with the top hits (recipe "graph").
    graph: float = 0.0
    # 1 when the memory is true in the window of time the query names, or, for a "when"
    # question, its text says when something happened.
    temporal: float = 0.0
    # The best final score of a top hit said around the same time (said_together_weight).
    said_together: float = 0.0
    # 1 when a source episode's speaker is named in the query (speaker_weight).
    speaker: float = 0.0
    recency: float = 0.0
    importance: float = 0.0
    strength: float = 0.0
    # The forgetting curve's retention at the time of the search (1: just recalled or pinned).
    retention: float = 1.0
    final: float = 0.0
    # Recipe "rerank": the hit's place in the reranker's order (1-based; None: the reranker did
    # not place it and it kept its hybrid place) and the reranker's score (a cross-encoder's;
    # None for the LM, which gives an order). Hits come in rerank order; `final` stays hybrid.
    rerank_rank: int | None = None
    rerank_score: float | None = None


class Hit(BaseModel):
    memory: MemoryRecord
    score: float
    details: ScoreDetails
    provenance: list[Provenance] = Field(default_factory=list)

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content


class Event(BaseModel):
    """One entry of the audit log that `history()` reads."""

    id: int
    memory_id: str
    event: EventType
    version: int | None = None
    old_content: str | None = None
    new_content: str | None = None
    reason: str | None = None
    actor: str = "user"
    episode_id: str | None = None
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


PROFILE_LABEL = "_profile"


class Block(BaseModel):
    """A core-memory block (Letta-style): a labelled text always placed first in context."""

    label: str
    value: str
    char_limit: int
    read_only: bool = False
    description: str | None = None
    version: int = 1
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    created_at: datetime
    updated_at: datetime


class BlockVersion(BaseModel):
    version: int
    value: str
    actor: str
    reason: str | None = None
    created_at: datetime


ContextSection = Literal[
    "blocks", "profile", "facts", "conflicts", "timelines", "episodes", "procedures", "summary"
]


class ContextItem(BaseModel):
    """One piece of memory considered for a context: what it is and what it cost."""

    section: ContextSection
    ref: str  # memory id, episode id, or block label
    text: str
    tokens: int
    reason: str | None = None  # why it was dropped


class Context(BaseModel):
    """Prompt-ready memory for a query, built in priority order within a token budget."""

    text: str
    tokens: int
    budget_tokens: int
    tokenizer: str
    included: list[ContextItem] = Field(default_factory=list)
    dropped: list[ContextItem] = Field(default_factory=list)

    def __str__(self) -> str:
        return self.text


class Entity(BaseModel):
    """A named thing in a scope (a person, place, organization, ...), de-duplicated by name."""

    id: str
    name: str
    type: str | None = None
    summary: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    created_at: datetime


# The write programs, and the modes a write runs in ("raw": no LM, each message kept as said).
ProgramMode = Literal["fused", "two_step", "compact"]
WriteMode = Literal["raw", ProgramMode]


class LMUsage(BaseModel):
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: LMUsage) -> LMUsage:
        return LMUsage(
            lm_calls=self.lm_calls + other.lm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Answer(BaseModel):
    """What `Memory.answer` found: the answer, the context it was given, and what it cost."""

    answer: str
    context: Context
    queries: list[str]
    as_of: str | None = None
    usage: LMUsage = Field(default_factory=LMUsage)


class AddResult(BaseModel):
    """What one `Memory.add` call (or one background batch) persisted, decided and cost."""

    episodes: list[Episode]
    memories: list[MemoryRecord] = Field(default_factory=list)
    mode: WriteMode = "raw"
    ops: list[AppliedOp] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    usage: LMUsage = Field(default_factory=LMUsage)
    # Set when the write program failed: the episodes are kept (status "failed") and their raw
    # text is searchable as `turn` memories; `Memory.reprocess()` retries them.
    error: str | None = None
    # True when add(background=True) queued the episodes; `Memory.flush()` processes them.
    queued: bool = False

    @classmethod
    def merged(cls, results: Sequence[AddResult], mode: WriteMode) -> AddResult:
        """One result for several batches of one input."""
        errors = [result.error for result in results if result.error]
        return cls(
            episodes=[episode for result in results for episode in result.episodes],
            memories=[memory for result in results for memory in result.memories],
            mode=mode,
            ops=[op for result in results for op in result.ops],
            rejected=[rejection for result in results for rejection in result.rejected],
            usage=sum((result.usage for result in results), LMUsage()),
            error="; ".join(dict.fromkeys(errors)) or None,
        )


# Where feedback comes from (docs/feedback.md): a correction (update), a verdict (feedback()), a
# restore after archiving, an operation validation refused, a request to forget carried out.
FeedbackSource = Literal["correction", "verdict", "restore", "refused", "forget"]
FEEDBACK_SOURCES: tuple[FeedbackSource, ...] = get_args(FeedbackSource)
FeedbackVerdict = Literal["wrong", "outdated", "irrelevant", "useful"]
FEEDBACK_VERDICTS: tuple[FeedbackVerdict, ...] = get_args(FeedbackVerdict)


class FeedbackRecord(BaseModel):
    """One labelled example of what the write program got wrong (or right), kept in the file
    with the scope of what it is about (docs/feedback.md). `memory_version` is the version
    judged; `write_run_id` and `op_index` name the write-program run and the operation it
    proposed that made that version (or, for "refused" and "forget", the operation itself);
    None when no LM run made it. `note` is the person's words (update's reason, feedback's
    note) or the validator's reason; `expected` what the person says was right."""

    id: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    source: FeedbackSource
    verdict: FeedbackVerdict | None = None
    memory_id: str | None = None
    memory_version: int | None = None
    write_run_id: str | None = None
    op_index: int | None = None
    note: str | None = None
    expected: dict[str, Any] = Field(default_factory=dict)
    actor: str
    created_at: datetime


class DeleteResult(BaseModel):
    """Row counts removed by a purge, per table."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())
