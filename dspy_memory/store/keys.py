"""API keys of the memory service (docs/server.md). A key is `dm_<id>_<secret>`: the id finds
the row, and only a SHA-256 of the whole key is stored, so the file never holds a usable key.
The secret has 256 random bits, so a plain hash (not a slow password hash) is enough."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.types import API_KEY_PREFIX, Scope
from dspy_memory.util.timeutil import now_db

PREFIX = API_KEY_PREFIX


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str | None
    scope: Scope | None  # None: an admin key, for every scope
    admin: bool
    created_at: str
    revoked_at: str | None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _from_row(row: Any) -> ApiKey:
    ids = (row["user_id"], row["agent_id"], row["run_id"])
    return ApiKey(
        id=row["id"],
        name=row["name"],
        scope=None if row["admin"] and not any(ids) else Scope.of(*ids),
        admin=bool(row["admin"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


class KeyStore:
    def __init__(self, conns: Connections, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log

    def create(
        self, scope: Scope | None, *, admin: bool = False, name: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key bound to `scope` (an admin key may have none); returns it and the token,
        which is shown once and never stored."""
        if scope is None and not admin:
            raise InvalidInputError(
                "a key is bound to a scope (user_id, agent_id, run_id) unless it is an admin key"
            )
        key_id = secrets.token_hex(6)
        token = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        ids = (scope.user_id, scope.agent_id, scope.run_id) if scope is not None else (None, None, None)
        with self._conns.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (id, key_hash, name, user_id, agent_id, run_id, admin, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key_id, _hash(token), name, *ids, int(admin), now_db()),
            )
            row = conn.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
            # A key id is public (it prefixes the token); the secret never reaches the log.
            self._audit.record("key_create", scope=scope, details={"key_id": key_id, "admin": admin})
        return _from_row(row), token

    def verify(self, token: str) -> ApiKey | None:
        """The live key a token stands for, or None (unknown, malformed or revoked)."""
        if not isinstance(token, str) or not token.startswith(PREFIX) or token.count("_") < 2:
            return None
        key_id = token[len(PREFIX) :].split("_", 1)[0]
        with self._conns.read() as conn:
            row = conn.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        if row is None or row["revoked_at"] is not None:
            return None
        if not hmac.compare_digest(row["key_hash"], _hash(token)):
            return None
        return _from_row(row)

    def revoke(self, key_id: str) -> bool:
        with self._conns.transaction() as conn:
            revoked = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now_db(), key_id)
            ).rowcount
            if revoked:
                self._audit.record("key_revoke", details={"key_id": key_id})
            return bool(revoked)

    def list(self) -> list[ApiKey]:
        with self._conns.read() as conn:
            return [_from_row(row) for row in conn.execute("SELECT * FROM api_keys ORDER BY created_at, id")]

    def count_live(self) -> int:
        with self._conns.read() as conn:
            return int(conn.execute("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0])
