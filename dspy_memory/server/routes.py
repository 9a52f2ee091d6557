"""The routes of the memory service (docs/server.md): the three seed endpoints with exactly their
request and response shapes, and `/v1/...` for everything else. Every route's scope comes from
the caller's API key (server/auth.py); handlers are plain `def` (FastAPI runs them in its thread
pool; Memory is safe across threads)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request

from dspy_memory.reports import MaintenanceReport
from dspy_memory.server.auth import SCOPE_FIELDS, Caller, ServiceError, authenticate
from dspy_memory.server.models import (
    AddRequest,
    AnswerRequest,
    BlockRequest,
    ContextRequest,
    CreatedKey,
    FeedbackRequest,
    ForgetRequest,
    ForgetResponse,
    KeyInfo,
    KeyRequest,
    MaintainRequest,
    RetrievedMemory,
    RetrieveRequest,
    RetrieveResponse,
    Scoped,
    SearchRequest,
    StoreRequest,
    StoreResponse,
    UpdateRequest,
    key_info,
)
from dspy_memory.types import (
    AddResult,
    Answer,
    Block,
    Context,
    DeleteResult,
    Event,
    FeedbackRecord,
    Hit,
    MemoryRecord,
)


def _memory(request: Request) -> Any:
    return request.app.state.memory


def _owner(caller: Caller, named: dict[str, Any]) -> dict[str, Any]:
    """The scope a by-id call must match; an admin naming no scope reaches any."""
    scope = caller.scope(named)
    if not any(scope.values()):
        if caller.admin:
            return {"all_scopes": True}
        raise ServiceError(403, "scope_denied", "name the scope of the memory")
    return scope


def _query_scope(
    user_id: str | None = Query(None), agent_id: str | None = Query(None), run_id: str | None = Query(None)
) -> dict[str, Any]:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


Auth = Annotated[Caller, Depends(authenticate)]
QueryScope = Annotated[dict[str, Any], Depends(_query_scope)]


def _seed_scope(caller: Caller, metadata: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The seed endpoints put the scope in `metadata` (user_id, ...); the rest is metadata."""
    named = {field: metadata.get(field) for field in SCOPE_FIELDS}
    rest = {key: value for key, value in metadata.items() if key not in SCOPE_FIELDS}
    return caller.scope(named), rest


def add_routes(app: FastAPI) -> None:  # noqa: C901 - one flat list of small routes reads best
    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz(request: Request) -> dict[str, str]:
        _memory(request).store.check_open()
        return {"status": "ready"}

    # -- the seed endpoints -----------------------------------------------------------------

    @app.post("/store_memory", response_model=StoreResponse)
    def store_memory(body: StoreRequest, request: Request, caller: Auth) -> StoreResponse:
        scope, metadata = _seed_scope(caller, body.metadata)
        result = _memory(request).add(body.content, metadata=metadata or None, **scope)
        ids = [record.id for record in result.memories] or [op.memory_id for op in result.ops]
        if not ids:
            raise ServiceError(500, "not_stored", "the content was kept as an episode but no memory holds it")
        return StoreResponse(memory_id=ids[0])

    @app.post("/retrieve_memory", response_model=RetrieveResponse)
    def retrieve_memory(body: RetrieveRequest, request: Request, caller: Auth) -> RetrieveResponse:
        scope, filters = _seed_scope(caller, body.metadata)
        hits = _memory(request).search(body.query, k=body.top_k, filters=filters or None, **scope)
        return RetrieveResponse(
            memories=[
                RetrievedMemory(
                    memory_id=hit.id,
                    content=hit.content,
                    timestamp=(hit.memory.valid_at or hit.memory.created_at).isoformat(),
                    score=hit.score,
                )
                for hit in hits
            ]
        )

    @app.post("/forget_memory", response_model=ForgetResponse)
    def forget_memory(body: ForgetRequest, request: Request, caller: Auth) -> ForgetResponse:
        scope, _ = _seed_scope(caller, body.metadata)
        _memory(request).delete(body.memory_id, **_owner(caller, scope))
        return ForgetResponse(memory_id=body.memory_id)

    # -- /v1 ---------------------------------------------------------------------------------

    @app.post("/v1/memories")
    def add(body: AddRequest, request: Request, caller: Auth) -> AddResult:
        options = dict(metadata=body.metadata, at=body.at, infer=body.infer, background=body.background)
        return _memory(request).add(body.messages, **options, **caller.scope(body.ids()))

    @app.get("/v1/memories")
    def list_memories(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        kinds: Annotated[list[str] | None, Query()] = None,
        as_of: str | None = None,
        known_at: str | None = None,
        limit: int = 100,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[MemoryRecord]:
        options = dict(
            as_of=as_of, known_at=known_at, limit=limit, offset=offset, include_archived=include_archived
        )
        return _memory(request).get_all(kinds=kinds, **options, **caller.scope(scope))

    @app.get("/v1/memories/{memory_id}")
    def get(memory_id: str, request: Request, caller: Auth, scope: QueryScope) -> MemoryRecord:
        record = _memory(request).get(memory_id, **_owner(caller, scope))
        if record is None:
            raise ServiceError(404, "memory_not_found", f"no memory with id {memory_id!r}")
        return record

    @app.patch("/v1/memories/{memory_id}")
    def update(memory_id: str, body: UpdateRequest, request: Request, caller: Auth) -> MemoryRecord:
        return _memory(request).update(
            memory_id, body.content, reason=body.reason, **_owner(caller, body.ids())
        )

    @app.delete("/v1/memories/{memory_id}")
    def delete(memory_id: str, request: Request, caller: Auth, scope: QueryScope) -> DeleteResult:
        return _memory(request).delete(memory_id, **_owner(caller, scope))

    @app.get("/v1/memories/{memory_id}/history")
    def history(memory_id: str, request: Request, caller: Auth, scope: QueryScope) -> list[Event]:
        return _memory(request).history(memory_id, **_owner(caller, scope))

    @app.post("/v1/memories/{memory_id}/restore")
    def restore(memory_id: str, body: Scoped, request: Request, caller: Auth) -> MemoryRecord:
        return _memory(request).restore(memory_id, **_owner(caller, body.ids()))

    @app.post("/v1/memories/{memory_id}/pin")
    def pin(
        memory_id: str, body: Scoped, request: Request, caller: Auth, pinned: bool = True
    ) -> MemoryRecord:
        return _memory(request).pin(memory_id, pinned, **_owner(caller, body.ids()))

    @app.post("/v1/feedback", status_code=201)
    def feedback(body: FeedbackRequest, request: Request, caller: Auth) -> FeedbackRecord:
        return _memory(request).feedback(
            body.memory_id, body.verdict, note=body.note, **_owner(caller, body.ids())
        )

    @app.get("/v1/feedback")
    def list_feedback(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        memory_id: str | None = None,
        source: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[FeedbackRecord]:
        options = dict(memory_id=memory_id, source=source, limit=limit, offset=offset)
        return _memory(request).feedback_records(**options, **caller.scope(scope))

    @app.post("/v1/search")
    def search(body: SearchRequest, request: Request, caller: Auth) -> list[Hit]:
        options = body.model_dump(exclude={*SCOPE_FIELDS, "query"})
        return _memory(request).search(body.query, **options, **caller.scope(body.ids()))

    @app.get("/v1/timeline")
    def timeline(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        subject: str | None = None,
        predicate: str | None = None,
        known_at: str | None = None,
    ) -> list[MemoryRecord]:
        options = dict(subject=subject, predicate=predicate, known_at=known_at)
        return _memory(request).timeline(**options, **caller.scope(scope))

    @app.get("/v1/graph")
    def graph(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        entity: str | None = None,
        memory_id: str | None = None,
        depth: int = 1,
        limit: int = 500,
    ) -> dict[str, Any]:
        options = dict(entity=entity, memory_id=memory_id, depth=depth, limit=limit)
        return _memory(request).graph(**options, **caller.scope(scope)).to_json()

    @app.post("/v1/context")
    def context(body: ContextRequest, request: Request, caller: Auth) -> Context:
        options = dict(budget_tokens=body.budget_tokens, as_of=body.as_of)
        return _memory(request).context(body.query, **options, **caller.scope(body.ids()))

    @app.post("/v1/answer")
    def answer(body: AnswerRequest, request: Request, caller: Auth) -> Answer:
        options = dict(budget_tokens=body.budget_tokens, as_of=body.as_of, rewrite=body.rewrite)
        return _memory(request).answer(body.question, **options, **caller.scope(body.ids()))

    @app.get("/v1/blocks")
    def blocks(request: Request, caller: Auth, scope: QueryScope) -> list[Block]:
        return _memory(request).blocks.list(**caller.scope(scope))

    @app.put("/v1/blocks/{label}")
    def set_block(label: str, body: BlockRequest, request: Request, caller: Auth) -> Block:
        options = body.model_dump(exclude={*SCOPE_FIELDS, "value"}, exclude_none=True)
        return _memory(request).blocks.set(label, body.value, **options, **caller.scope(body.ids()))

    @app.get("/v1/profile")
    def profile(request: Request, caller: Auth, scope: QueryScope) -> Any:
        document = _memory(request).profile(**caller.scope(scope))
        return None if document is None else document.model_dump(mode="json")

    @app.delete("/v1/scope")
    def delete_scope(request: Request, caller: Auth, scope: QueryScope) -> DeleteResult:
        return _memory(request).delete_scope(**caller.scope(scope))

    @app.post("/v1/maintain")
    def maintain(body: MaintainRequest, request: Request, caller: Auth) -> MaintenanceReport:
        scope = caller.scope(body.ids())
        if not any(scope.values()):
            caller.require_admin()
            scope = {"all_scopes": True}
        return _memory(request).maintain(consolidate=body.consolidate, dry_run=body.dry_run, **scope)

    @app.post("/v1/reprocess")
    def reprocess(request: Request, caller: Auth, limit: int = 1000) -> list[AddResult]:
        caller.require_admin()  # it works on the whole file
        return _memory(request).reprocess(limit=limit)

    @app.get("/v1/stats")
    def stats(request: Request, caller: Auth) -> dict[str, Any]:
        caller.require_admin()  # counts of the whole file
        memory = _memory(request)
        reports = [report.model_dump(mode="json") for report in memory.maintenance_reports()]
        return {**memory.stats(), "maintenance": reports[-10:]}

    @app.post("/v1/keys", status_code=201)
    def create_key(body: KeyRequest, request: Request, caller: Auth) -> CreatedKey:
        caller.require_admin()
        from dspy_memory.types import Scope

        ids = body.ids()
        scope = Scope.of(**ids) if any(ids.values()) else None
        key, token = _memory(request).store.keys.create(scope, admin=body.admin, name=body.name)
        return CreatedKey(key=token, **key_info(key))

    @app.get("/v1/keys")
    def list_keys(request: Request, caller: Auth) -> list[KeyInfo]:
        caller.require_admin()
        return [KeyInfo(**key_info(key)) for key in _memory(request).store.keys.list()]

    @app.delete("/v1/keys/{key_id}")
    def revoke_key(key_id: str, request: Request, caller: Auth) -> dict[str, Any]:
        caller.require_admin()
        if not _memory(request).store.keys.revoke(key_id):
            raise ServiceError(404, "key_not_found", f"no live key {key_id!r}")
        return {"status": "revoked", "id": key_id}
