"""An API key as the service (GET /v1/keys) and `dspy-memory keys --json` show it: one record,
importable without FastAPI (the CLI runs without the server extra)."""

from __future__ import annotations

from typing import Any

SCOPE_FIELDS = ("user_id", "agent_id", "run_id")


def key_record(key: Any) -> dict[str, Any]:
    """id, name, admin, created_at, revoked_at and the scope's ids (None for an unbound key);
    never the token, which is shown once when the key is made."""
    ids = key.scope.model_dump() if key.scope is not None else dict.fromkeys(SCOPE_FIELDS)
    fields = ("id", "name", "admin", "created_at", "revoked_at")
    return {field: getattr(key, field) for field in fields} | ids
