"""Pydantic records shared across the package. Validation only; no behaviour."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dspy_memory.errors import ScopeError

MemoryKind = Literal["fact", "preference", "event", "procedure", "profile", "note", "turn"]
MEMORY_KINDS: tuple[str, ...] = MemoryKind.__args__  # type: ignore[attr-defined]

EpisodeSource = Literal["message", "text", "json", "tool_step", "document"]
EPISODE_SOURCES: tuple[str, ...] = EpisodeSource.__args__  # type: ignore[attr-defined]

EpisodeStatus = Literal["pending", "done", "failed"]
EventType = Literal["ADD", "UPDATE", "INVALIDATE", "DELETE", "MERGE", "DECAY"]

# current: true at the reference time and still believed; superseded: its world validity ended
# (invalid_at <= as_of); expired: the system stopped believing this row (expired_at <= known_at).
MemoryStatus = Literal["current", "superseded", "expired", "future"]

_MAX_ID_LEN = 256


class Scope(BaseModel):
    """Who a memory belongs to. Omitted ids are wildcards when reading; at least one is required."""

    model_config = ConfigDict(frozen=True)

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    @field_validator("user_id", "agent_id", "run_id", mode="before")
    @classmethod
    def _clean(cls, value: Any, info: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ScopeError(f"{info.field_name} must be a string, not {type(value).__name__}")
        text = str(value).strip()
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
    def of(cls, user_id: Any = None, agent_id: Any = None, run_id: Any = None) -> Scope:
        """Build a scope, raising ScopeError (not a pydantic error) when it is invalid."""
        try:
            return cls(user_id=user_id, agent_id=agent_id, run_id=run_id)
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
    status: MemoryStatus = "current"


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
    recency: float = 0.0
    importance: float = 0.0
    strength: float = 0.0
    final: float = 0.0


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


class AddResult(BaseModel):
    """What one `Memory.add` call persisted."""

    episodes: list[Episode]
    memories: list[MemoryRecord]


class DeleteResult(BaseModel):
    """Row counts removed by a purge, per table."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())
