"""Settings kept per exact scope, one JSON document a row (user_id, agent_id, run_id, settings,
updated_at): the lifecycle's (`lifecycle_settings`) and retention's (`retention_settings`)."""

from __future__ import annotations

import json
from typing import Any

from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import now_db

ScopeKey = tuple[str | None, str | None, str | None]
_EXACT = "user_id IS ? AND agent_id IS ? AND run_id IS ?"


def lookup_order(scope: ScopeKey) -> list[ScopeKey]:
    """Where a scope's settings are looked for, first found wins: its own, its user's (user_id
    only), its agent's (agent_id only); then the caller's default."""
    user, agent, _ = scope
    keys = [scope, (user, None, None), (None, agent, None)]
    return [key for index, key in enumerate(keys) if key != (None, None, None) and key not in keys[:index]]


class ScopeSettings:
    def __init__(self, conns: Connections, audit_log: AuditLog, table: str) -> None:
        self._conns = conns
        self._audit = audit_log
        self.table = table

    def get(self, scope: ScopeKey) -> dict[str, Any] | None:
        """The settings stored for exactly this scope, as saved (None: none)."""
        with self._conns.read() as conn:
            row = conn.execute(f"SELECT settings FROM {self.table} WHERE {_EXACT}", scope).fetchone()
        return json.loads(row["settings"]) if row else None

    def all(self) -> dict[ScopeKey, dict[str, Any]]:
        """Every stored document by its scope, in scope order."""
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT user_id, agent_id, run_id, settings FROM {self.table} "
                "ORDER BY coalesce(user_id, ''), coalesce(agent_id, ''), coalesce(run_id, '')"
            ).fetchall()
        return {(row["user_id"], row["agent_id"], row["run_id"]): json.loads(row["settings"]) for row in rows}

    def save(self, scope: ScopeKey, settings: dict[str, Any] | None) -> None:
        """Store the settings of exactly this scope (None: forget them), with an audit entry
        naming the keys set (joins the caller's transaction)."""
        with self._conns.transaction() as conn:
            conn.execute(f"DELETE FROM {self.table} WHERE {_EXACT}", scope)
            if settings is not None:
                conn.execute(
                    f"INSERT INTO {self.table} (user_id, agent_id, run_id, settings, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*scope, json.dumps(settings, sort_keys=True), now_db()),
                )
            self._audit.record(self.table, scope=Scope.of(*scope), details={"keys": sorted(settings or {})})
