"""Request and response bodies of the memory service (server/app.py): the seed endpoints'
shapes exactly, and the /v1 bodies; answers are the records of types.py."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dspy_memory.server.auth import SCOPE_FIELDS


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StoreRequest(_Body):
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class StoreResponse(BaseModel):
    memory_id: str
    status: str = "stored"


class RetrieveRequest(_Body):
    query: str
    top_k: int = 5
    metadata: dict[str, Any] = Field(default_factory=dict)


class RetrievedMemory(BaseModel):
    memory_id: str
    content: str
    timestamp: str
    score: float


class RetrieveResponse(BaseModel):
    memories: list[RetrievedMemory]


class ForgetRequest(_Body):
    memory_id: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ForgetResponse(BaseModel):
    status: str = "deleted"
    memory_id: str


class Scoped(_Body):
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def ids(self) -> dict[str, Any]:
        return {field: getattr(self, field) for field in SCOPE_FIELDS}


class AddRequest(Scoped):
    messages: Any
    metadata: dict[str, Any] | None = None
    at: str | None = None
    infer: bool | None = None
    background: bool = False


class UpdateRequest(Scoped):
    content: str
    reason: str | None = None


class FeedbackRequest(Scoped):
    memory_id: str
    verdict: str  # wrong, outdated, irrelevant, useful
    note: str | None = None


class SearchRequest(Scoped):
    query: str
    k: int = 10
    recipe: str = "hybrid"
    as_of: str | None = None
    known_at: str | None = None
    kinds: list[str] | None = None
    filters: dict[str, Any] | None = None
    include_archived: bool = False


class ContextRequest(Scoped):
    query: str
    budget_tokens: int = 1500
    as_of: str | None = None


class AnswerRequest(Scoped):
    question: str
    budget_tokens: int = 1500
    as_of: str | None = None
    rewrite: bool = False


class BlockRequest(Scoped):
    value: str
    char_limit: int | None = None
    description: str | None = None


class MaintainRequest(Scoped):
    consolidate: bool = False
    dry_run: bool = False


class KeyRequest(Scoped):
    admin: bool = False
    name: str | None = None


class KeyInfo(BaseModel):
    id: str
    name: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    admin: bool
    created_at: str
    revoked_at: str | None


class CreatedKey(KeyInfo):
    key: str  # shown once; only its hash is stored


def key_info(key: Any) -> dict[str, Any]:
    ids = key.scope.model_dump() if key.scope is not None else dict.fromkeys(SCOPE_FIELDS)
    return dict(
        id=key.id, name=key.name, admin=key.admin, created_at=key.created_at, revoked_at=key.revoked_at, **ids
    )
