"""The routes of the memory service (docs/server.md): the three seed endpoints with exactly their
request and response shapes, and `/v1/...` for everything else. Every route's scope comes from
the caller's API key (server/auth.py). Routes that may call an LM (adds, answers, maintenance,
reprocessing) are `async` and await Memory's awaitable forms: the LM's requests are awaited on the
event loop, the store work runs in the Memory's workers (docs/async.md); the others are plain
`def`, run in FastAPI's thread pool (Memory is safe across threads). Each route declares the errors it may answer
(server/contract.py) and, through its parameters and bodies (server/models.py), every rule on
its input that a schema can say."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request

from dspy_memory.errors import MemoryClosedError
from dspy_memory.reports import MaintenanceReport
from dspy_memory.server.auth import Caller, ServiceError, authenticate
from dspy_memory.server.contract import (
    ADDED_MEMORY,
    ADMIN_NOTE,
    ADMIN_ONLY,
    GRAPH_FOCUS,
    KEYED,
    TIMELINE_FACT,
    errors,
    links,
)
from dspy_memory.server.key_record import SCOPE_FIELDS, key_record
from dspy_memory.server.models import (
    BLOCK_LABEL_PATTERN,
    KEY_ID_PATTERN,
    MEMORY_ID_PATTERN,
    AddRequest,
    AnswerRequest,
    BlockRequest,
    ContextRequest,
    CreatedKey,
    FeedbackRequest,
    FeedbackSource,
    ForgetRequest,
    ForgetResponse,
    KeyInfo,
    KeyRequest,
    Kind,
    Limit,
    MaintainRequest,
    MemoryId,
    Offset,
    RetrievedMemory,
    RetrieveRequest,
    RetrieveResponse,
    Scoped,
    ScopeId,
    SearchRequest,
    StoreRequest,
    StoreResponse,
    Text,
    UpdateRequest,
)
from dspy_memory.server.time_fields import When
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

if TYPE_CHECKING:
    from dspy_memory.memory import Memory


def _memory(request: Request) -> Memory:
    memory: Memory = request.app.state.memory
    return memory


def _owner(caller: Caller, named: dict[str, Any]) -> dict[str, Any]:
    """The scope a by-id call must match; an admin naming no scope reaches any."""
    scope = caller.scope(named)
    if not any(scope.values()):
        if caller.admin:
            return {"all_scopes": True}
        raise ServiceError(403, "scope_denied", "name the scope of the memory")
    return scope


def _query_scope(
    user_id: Annotated[ScopeId | None, Query()] = None,
    agent_id: Annotated[ScopeId | None, Query()] = None,
    run_id: Annotated[ScopeId | None, Query()] = None,
) -> dict[str, Any]:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


Auth = Annotated[Caller, Depends(authenticate)]
QueryScope = Annotated[dict[str, Any], Depends(_query_scope)]
PathMemoryId = Annotated[
    str,
    Path(pattern=MEMORY_ID_PATTERN, description="a memory's id, or a unique prefix of at least 8 characters"),
]


def _seed_scope(caller: Caller, named: dict[str, Any]) -> dict[str, Any]:
    """The seed endpoints put the scope in `metadata` (user_id, ...); the rest is metadata."""
    return caller.acting_scope(named)


def add_routes(app: FastAPI) -> None:  # noqa: C901 - one flat list of small routes reads best
    @app.get("/healthz", responses=errors(500))
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", responses=errors(500, 503))
    def readyz(request: Request) -> dict[str, str]:
        if _memory(request).closed:
            raise MemoryClosedError("the memory file is closed; restart the service")
        return {"status": "ready"}

    # -- the seed endpoints -----------------------------------------------------------------

    @app.post("/store_memory", response_model=StoreResponse, responses=errors(*KEYED, 400, 409, 502))
    async def store_memory(body: StoreRequest, request: Request, caller: Auth) -> StoreResponse:
        named, metadata = body.metadata.split()
        scope = _seed_scope(caller, named)
        result = await _memory(request).aadd(body.content, metadata=metadata or None, **scope)
        ids = [record.id for record in result.memories] or [op.memory_id for op in result.ops]
        if not ids:
            raise ServiceError(500, "not_stored", "the content was kept as an episode but no memory holds it")
        return StoreResponse(memory_id=ids[0])

    @app.post("/retrieve_memory", response_model=RetrieveResponse, responses=errors(*KEYED, 400))
    def retrieve_memory(body: RetrieveRequest, request: Request, caller: Auth) -> RetrieveResponse:
        named, filters = body.metadata.split()
        scope = _seed_scope(caller, named)
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

    @app.post("/forget_memory", response_model=ForgetResponse, responses=errors(*KEYED, 400, 404))
    def forget_memory(body: ForgetRequest, request: Request, caller: Auth) -> ForgetResponse:
        named, _ = body.metadata.split()
        _memory(request).delete(body.memory_id, **_owner(caller, named))
        return ForgetResponse(memory_id=body.memory_id)

    # -- /v1 ---------------------------------------------------------------------------------

    memory_links = links(
        get_memory=ADDED_MEMORY,
        update_memory=ADDED_MEMORY,
        memory_history=ADDED_MEMORY,
        pin_memory=ADDED_MEMORY,
        restore_memory=ADDED_MEMORY,
        delete_memory=ADDED_MEMORY,
    )

    @app.post("/v1/memories", responses=errors(*KEYED, 400, 409, 502), openapi_extra=memory_links)
    async def add_memories(body: AddRequest, request: Request, caller: Auth) -> AddResult:
        messages = body.model_dump(mode="json", exclude_none=True)["messages"]
        return await _memory(request).aadd(
            messages,
            metadata=body.metadata,
            at=body.at,
            infer=body.infer,
            background=body.background,
            expires_at=body.expires_at,
            expires_in=body.expires_in,
            **caller.acting_scope(body.ids()),
        )

    @app.get("/v1/memories", responses=errors(*KEYED))
    def list_memories(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        kinds: Annotated[list[Kind] | None, Query()] = None,
        as_of: Annotated[When | None, Query()] = None,
        known_at: Annotated[When | None, Query()] = None,
        limit: Annotated[Limit, Query()] = 100,
        offset: Annotated[Offset, Query()] = 0,
        include_archived: bool = False,
    ) -> list[MemoryRecord]:
        return _memory(request).get_all(
            kinds=kinds,
            as_of=as_of,
            known_at=known_at,
            limit=limit,
            offset=offset,
            include_archived=include_archived,
            **caller.acting_scope(scope),
        )

    @app.get("/v1/memories/{memory_id}", responses=errors(*KEYED, 404))
    def get_memory(
        memory_id: PathMemoryId, request: Request, caller: Auth, scope: QueryScope
    ) -> MemoryRecord:
        record = _memory(request).get(memory_id, **_owner(caller, scope))
        if record is None:
            raise ServiceError(404, "memory_not_found", f"no memory with id {memory_id!r}")
        return record

    @app.patch("/v1/memories/{memory_id}", responses=errors(*KEYED, 400, 404, 409))
    def update_memory(
        memory_id: PathMemoryId, body: UpdateRequest, request: Request, caller: Auth
    ) -> MemoryRecord:
        owner = _owner(caller, body.ids())
        return _memory(request).update(memory_id, body.content, reason=body.reason, **owner)

    @app.delete("/v1/memories/{memory_id}", responses=errors(*KEYED, 404))
    def delete_memory(
        memory_id: PathMemoryId, request: Request, caller: Auth, scope: QueryScope
    ) -> DeleteResult:
        return _memory(request).delete(memory_id, **_owner(caller, scope))

    @app.get("/v1/memories/{memory_id}/history", responses=errors(*KEYED, 404))
    def memory_history(
        memory_id: PathMemoryId, request: Request, caller: Auth, scope: QueryScope
    ) -> list[Event]:
        return _memory(request).history(memory_id, **_owner(caller, scope))

    @app.post("/v1/memories/{memory_id}/restore", responses=errors(*KEYED, 400, 404, 409))
    def restore_memory(memory_id: PathMemoryId, body: Scoped, request: Request, caller: Auth) -> MemoryRecord:
        return _memory(request).restore(memory_id, **_owner(caller, body.ids()))

    @app.post("/v1/memories/{memory_id}/pin", responses=errors(*KEYED, 400, 404, 409))
    def pin_memory(
        memory_id: PathMemoryId, body: Scoped, request: Request, caller: Auth, pinned: bool = True
    ) -> MemoryRecord:
        return _memory(request).pin(memory_id, pinned, **_owner(caller, body.ids()))

    @app.post("/v1/feedback", status_code=201, responses=errors(*KEYED, 400, 404))
    def give_feedback(body: FeedbackRequest, request: Request, caller: Auth) -> FeedbackRecord:
        return _memory(request).feedback(
            body.memory_id, body.verdict, note=body.note, **_owner(caller, body.ids())
        )

    @app.get("/v1/feedback", responses=errors(*KEYED))
    def list_feedback(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        memory_id: Annotated[MemoryId | None, Query()] = None,
        source: Annotated[FeedbackSource | None, Query()] = None,
        limit: Annotated[Limit, Query()] = 100,
        offset: Annotated[Offset, Query()] = 0,
    ) -> list[FeedbackRecord]:
        return _memory(request).feedback_records(
            memory_id=memory_id, source=source, limit=limit, offset=offset, **caller.acting_scope(scope)
        )

    @app.post("/v1/search", responses=errors(*KEYED, 400))
    def search(body: SearchRequest, request: Request, caller: Auth) -> list[Hit]:
        options = body.model_dump(exclude={*SCOPE_FIELDS, "query"})
        return _memory(request).search(body.query, **options, **caller.acting_scope(body.ids()))

    @app.get("/v1/timeline", responses=errors(*KEYED), openapi_extra=TIMELINE_FACT)
    def timeline(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        subject: Annotated[Text | None, Query(include_in_schema=False)] = None,
        predicate: Annotated[Text | None, Query(include_in_schema=False)] = None,
        known_at: Annotated[When | None, Query()] = None,
    ) -> list[MemoryRecord]:
        if subject is None and predicate is None:
            raise ServiceError(422, "invalid_request", "query.fact: give subject, predicate or both")
        options = dict(subject=subject, predicate=predicate, known_at=known_at)
        return _memory(request).timeline(**options, **caller.acting_scope(scope))

    @app.get("/v1/graph", responses=errors(*KEYED, 404), openapi_extra=GRAPH_FOCUS)
    def graph(
        request: Request,
        caller: Auth,
        scope: QueryScope,
        entity: Annotated[Text | None, Query(include_in_schema=False)] = None,
        memory_id: Annotated[MemoryId | None, Query(include_in_schema=False)] = None,
        depth: Annotated[int, Query(ge=1, le=3)] = 1,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
    ) -> dict[str, Any]:
        if entity is not None and memory_id is not None:
            raise ServiceError(422, "invalid_request", "query.focus: give an entity or a memory_id, not both")
        graph = _memory(request).graph(
            entity, memory_id=memory_id, depth=depth, limit=limit, **caller.acting_scope(scope)
        )
        return graph.to_json()

    @app.post("/v1/context", responses=errors(*KEYED, 400))
    def context(body: ContextRequest, request: Request, caller: Auth) -> Context:
        return _memory(request).context(
            body.query, budget_tokens=body.budget_tokens, as_of=body.as_of, **caller.acting_scope(body.ids())
        )

    @app.post("/v1/answer", responses=errors(*KEYED, 400, 502))
    async def answer(body: AnswerRequest, request: Request, caller: Auth) -> Answer:
        """Needs an LM (`serve --lm`); without one, 503 `lm_unavailable`."""
        return await _memory(request).aanswer(
            body.question,
            budget_tokens=body.budget_tokens,
            as_of=body.as_of,
            rewrite=body.rewrite,
            **caller.acting_scope(body.ids()),
        )

    @app.get("/v1/blocks", responses=errors(*KEYED))
    def list_blocks(request: Request, caller: Auth, scope: QueryScope) -> list[Block]:
        return _memory(request).blocks.list(**caller.acting_scope(scope))

    @app.put("/v1/blocks/{label}", responses=errors(*KEYED, 400, 409))
    def set_block(
        label: Annotated[str, Path(pattern=BLOCK_LABEL_PATTERN)],
        body: BlockRequest,
        request: Request,
        caller: Auth,
    ) -> Block:
        options = body.model_dump(exclude={*SCOPE_FIELDS, "value"}, exclude_none=True)
        return _memory(request).blocks.set(label, body.value, **options, **caller.acting_scope(body.ids()))

    @app.get("/v1/profile", responses=errors(*KEYED))
    def profile(request: Request, caller: Auth, scope: QueryScope) -> dict[str, Any] | None:
        document = _memory(request).profile(**caller.acting_scope(scope))
        return None if document is None else document.model_dump(mode="json")

    @app.delete("/v1/scope", responses=errors(*KEYED))
    def delete_scope(request: Request, caller: Auth, scope: QueryScope) -> DeleteResult:
        return _memory(request).delete_scope(**caller.acting_scope(scope))

    @app.post("/v1/maintain", responses=errors(*KEYED, 400, 409, 502))
    async def maintain(body: MaintainRequest, request: Request, caller: Auth) -> MaintenanceReport:
        """Maintain the scope; an admin key naming no scope maintains every scope."""
        scope = caller.scope(body.ids())
        if not any(scope.values()):
            caller.require_admin()
            scope = {"all_scopes": True}
        return await _memory(request).amaintain(consolidate=body.consolidate, dry_run=body.dry_run, **scope)

    @app.post(
        "/v1/reprocess", responses=errors(*KEYED, 409, 502), description=ADMIN_NOTE, openapi_extra=ADMIN_ONLY
    )
    async def reprocess(
        request: Request, caller: Auth, limit: Annotated[Limit, Query()] = 1000
    ) -> list[AddResult]:
        caller.require_admin()  # it works on the whole file
        return await _memory(request).areprocess(limit=limit)

    @app.get("/v1/stats", responses=errors(*KEYED), description=ADMIN_NOTE, openapi_extra=ADMIN_ONLY)
    def stats(request: Request, caller: Auth) -> dict[str, Any]:
        caller.require_admin()  # counts of the whole file
        memory = _memory(request)
        reports = [report.model_dump(mode="json") for report in memory.maintenance_reports()]
        return {**memory.stats(), "maintenance": reports[-10:]}

    key_links = links(revoke_key={"key_id": "$response.body#/id"})
    key_links["responses"]["201"] = key_links["responses"].pop("200")

    @app.post(
        "/v1/keys",
        status_code=201,
        responses=errors(*KEYED, 400),
        description=ADMIN_NOTE,
        openapi_extra={**ADMIN_ONLY, **key_links},
    )
    def create_key(body: KeyRequest, request: Request, caller: Auth) -> CreatedKey:
        caller.require_admin()
        from dspy_memory.types import Scope

        ids = body.ids()
        scope = Scope.of(**ids) if any(ids.values()) else None
        key, token = _memory(request).keys.create(scope, admin=body.admin, name=body.name)
        return CreatedKey(key=token, **key_record(key))

    @app.get("/v1/keys", responses=errors(*KEYED), description=ADMIN_NOTE, openapi_extra=ADMIN_ONLY)
    def list_keys(request: Request, caller: Auth) -> list[KeyInfo]:
        caller.require_admin()
        return [KeyInfo(**key_record(key)) for key in _memory(request).keys.list()]

    @app.delete(
        "/v1/keys/{key_id}", responses=errors(*KEYED, 404), description=ADMIN_NOTE, openapi_extra=ADMIN_ONLY
    )
    def revoke_key(
        key_id: Annotated[str, Path(pattern=KEY_ID_PATTERN)], request: Request, caller: Auth
    ) -> dict[str, Any]:
        caller.require_admin()
        if not _memory(request).keys.revoke(key_id):
            raise ServiceError(404, "key_not_found", f"no live key {key_id!r}")
        return {"status": "revoked", "id": key_id}
