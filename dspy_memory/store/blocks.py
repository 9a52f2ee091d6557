"""Core-memory blocks: labelled texts with a character limit, a read-only flag and every
version kept. A block belongs to exactly the scope that created it."""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from dspy_memory.errors import BlockError
from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import Predicate, from_row, scope_predicate
from dspy_memory.types import PROFILE_LABEL, Block, BlockVersion, Scope
from dspy_memory.util.timeutil import now_db

_COLUMNS = "id, label, value, char_limit, read_only, description, version, user_id, agent_id, run_id, created_at, updated_at"


def _block(row: Any) -> Block:
    return from_row(Block, row, read_only=bool(row["read_only"]))


def _exact(scope: Scope) -> Predicate:
    predicate = Predicate()
    for column in ("user_id", "agent_id", "run_id"):
        predicate.add(f"b.{column} IS ?", getattr(scope, column))
    return predicate


class BlockStore:
    def __init__(self, conns: Connections, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log

    def _row(self, conn: Any, label: str, scope: Scope) -> Any:
        predicate = _exact(scope).add("b.label = ?", label)
        return conn.execute(
            f"SELECT {_COLUMNS} FROM blocks b WHERE {predicate.sql}", predicate.params
        ).fetchone()

    def get(self, label: str, scope: Scope) -> Block | None:
        with self._conns.read() as conn:
            row = self._row(conn, label, scope)
        return _block(row) if row else None

    def list(self, scope: Scope) -> list[Block]:
        """Blocks of a scope (matched as `scope_predicate` matches it), oldest first."""
        predicate = scope_predicate(Predicate(), scope, alias="b")
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM blocks b WHERE {predicate.sql} ORDER BY b.created_at, b.label",
                predicate.params,
            ).fetchall()
        return [_block(row) for row in rows]

    def write(
        self,
        label: str,
        scope: Scope,
        *,
        value: str | None = None,
        char_limit: int | None = None,
        read_only: bool | None = None,
        description: str | None = None,
        actor: str,
        reason: str | None = None,
        enforce_read_only: bool = True,
    ) -> Block:
        """Create the block or change it; a new value is a new version. Refuses values over
        the limit, and edits of read-only blocks when `enforce_read_only` (agents' edits)."""
        now = now_db()
        with self._conns.transaction() as conn:
            row = self._row(conn, label, scope)
            if row is None:
                new_value = value or ""
                limit = char_limit or 2000
                self._check(label, new_value, limit)
                block_id = str(uuid.uuid4())
                conn.execute(
                    "INSERT INTO blocks (id, user_id, agent_id, run_id, label, value, char_limit, read_only, "
                    "description, version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
                    (
                        block_id,
                        scope.user_id,
                        scope.agent_id,
                        scope.run_id,
                        label,
                        new_value,
                        limit,
                        int(bool(read_only)),
                        description,
                        now,
                        now,
                    ),
                )
                conn.execute(
                    "INSERT INTO block_versions (block_id, version, value, actor, reason, created_at) "
                    "VALUES (?, 1, ?, ?, ?, ?)",
                    (block_id, new_value, actor, reason, now),
                )
            else:
                current = _block(row)
                if enforce_read_only and current.read_only:
                    raise BlockError(f"block {label!r} is read-only")
                new_value = current.value if value is None else value
                limit = char_limit or current.char_limit
                self._check(label, new_value, limit)
                version = current.version + (new_value != current.value)
                conn.execute(
                    "UPDATE blocks SET value = ?, char_limit = ?, read_only = ?, description = ?, version = ?, "
                    "updated_at = ? WHERE id = ?",
                    (
                        new_value,
                        limit,
                        int(current.read_only if read_only is None else read_only),
                        current.description if description is None else description,
                        version,
                        now,
                        row["id"],
                    ),
                )
                if version != current.version:
                    conn.execute(
                        "INSERT INTO block_versions (block_id, version, value, actor, reason, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (row["id"], version, new_value, actor, reason, now),
                    )
            block = _block(self._row(conn, label, scope))
            # Not the label: an agent may name a block after what it holds, and the entry must
            # outlive an erasure without any of it.
            operation = "profile" if label == PROFILE_LABEL else "block_write"
            self._audit.record(operation, scope=scope, role=actor, counts={"version": block.version})
            return block

    @staticmethod
    def _check(label: str, value: str, limit: int) -> None:
        if len(value) > limit:
            raise BlockError(
                f"block {label!r} would hold {len(value)} characters, over its limit of {limit}; "
                "shorten or replace text instead of adding"
            )

    def history(self, label: str, scope: Scope) -> builtins.list[BlockVersion]:
        predicate = _exact(scope).add("b.label = ?", label)
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT v.version, v.value, v.actor, v.reason, v.created_at FROM block_versions v "
                f"JOIN blocks b ON b.id = v.block_id WHERE {predicate.sql} ORDER BY v.version",
                predicate.params,
            ).fetchall()
        return [from_row(BlockVersion, row) for row in rows]

    def delete(self, label: str, scope: Scope) -> bool:
        predicate = _exact(scope).add("b.label = ?", label)
        with self._conns.transaction() as conn:
            deleted = conn.execute(
                f"DELETE FROM blocks AS b WHERE {predicate.sql}", predicate.params
            ).rowcount
            if deleted:
                self._audit.record(
                    "block_delete", scope=scope, counts={"blocks": deleted}, details={"label": label}
                )
            return deleted > 0
