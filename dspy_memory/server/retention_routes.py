"""The retention policy of a scope over HTTP (docs/governance.md#retention): `GET /v1/retention`
reads the policy that applies, `PUT /v1/retention` replaces the scope's own. Apart from
routes.py so that routes.py stays readable in one sitting; the same rules: the scope comes from
the caller's API key (server/auth.py), the bodies are in server/models.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request

from dspy_memory.server.auth import Caller, ServiceError
from dspy_memory.server.contract import KEYED, errors
from dspy_memory.server.key_record import SCOPE_FIELDS
from dspy_memory.server.models import RetentionPolicy, RetentionRequest
from dspy_memory.server.routes import Auth, QueryScope

if TYPE_CHECKING:
    from dspy_memory.retention_settings import RetentionSettings

SET_RETENTION = (
    "Replace the scope's own retention policy with this one: a body with no setting forgets it, and "
    "the scope follows its user's, its agent's or the service's policy again. `maintain` erases what "
    "is due. An agent's policy (`agent_id` alone) also applies to the agent's memories in its users' "
    "scopes, so only an admin key sets one (else 403 `admin_required`)."
)


def policy_of(settings: RetentionSettings) -> RetentionPolicy:
    """The library's settings as the service shows them: intervals in seconds."""
    seconds = {
        name: None if interval is None else interval.total_seconds()
        for name, interval in (
            ("erase_after", settings.erase_after),
            ("erase_runs_after", settings.erase_runs_after),
        )
    }
    kinds = None if settings.kinds is None else list(settings.kinds)
    return RetentionPolicy(**seconds, kinds=kinds, pinned=settings.pinned, blocks=settings.blocks)


def _settable(caller: Caller, scope: dict[str, Any]) -> dict[str, Any]:
    """The scope whose own policy the caller may set. Policies are looked up as lifecycle
    settings are (the scope's own, its user's, its agent's), so an agent's policy reaches the
    agent's memories in every user's scope: more than the scope it is stored for, whose reads
    reach only the agent's memories stored without a user (docs/scopes.md)."""
    agent_wide = scope["agent_id"] is not None and scope["user_id"] is None and scope["run_id"] is None
    if agent_wide and not caller.admin:
        raise ServiceError(
            403,
            "admin_required",
            f"a retention policy for agent_id={scope['agent_id']!r} alone applies to the agent's memories "
            "in every user's scope: set it with an admin key, or name a user_id or run_id",
        )
    return scope


def add_retention_routes(app: FastAPI) -> None:
    @app.get("/v1/retention", responses=errors(*KEYED))
    def get_retention(request: Request, caller: Auth, scope: QueryScope) -> RetentionPolicy:
        """The policy that applies to the scope: its own, else its user's, else its agent's,
        else the service's default (`MemoryConfig.retention`)."""
        memory = request.app.state.memory
        return policy_of(memory.retention(**caller.acting_scope(scope)))

    @app.put("/v1/retention", responses=errors(*KEYED, 400), description=SET_RETENTION)
    def set_retention(body: RetentionRequest, request: Request, caller: Auth) -> RetentionPolicy:
        scope = _settable(caller, caller.acting_scope(body.ids()))
        settings = body.model_dump(exclude={*SCOPE_FIELDS}, exclude_none=True)
        return policy_of(request.app.state.memory.retention(**scope, reset=True, **settings))
