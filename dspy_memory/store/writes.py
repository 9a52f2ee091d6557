"""Writing memories: new rows and versions with their vectors, keyword entries, sources and
events. Mixed into Store; every method joins the caller's transaction when there is one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dspy_memory.store.audit_log import AuditLog, scope_of
from dspy_memory.store.backend import NO_USER, Connections, KeywordIndex, VectorIndex
from dspy_memory.store.queries import (
    MEMORY_COLUMNS,
    MEMORY_FROM,
    Predicate,
    TimeView,
    link_sources,
    not_found,
    record_from_row,
    scope_predicate,
)
from dspy_memory.store.retention import expiries
from dspy_memory.store.turns import TurnContext
from dspy_memory.types import MemoryRecord, Scope
from dspy_memory.util.timeutil import now_db

_EVENT_COLUMNS = (
    "memory_id", "user_id", "agent_id", "run_id", "event", "version", "old_content", "new_content", "reason",
    "actor", "episode_id", "metadata", "created_at",
)  # fmt: skip
_INSERT_EVENT = f"INSERT INTO memory_events ({', '.join(_EVENT_COLUMNS)}) VALUES ({', '.join(['?'] * 13)})"
_MEMORY_COLUMNS = (
    "id", "version", "user_id", "agent_id", "run_id", "content", "kind", "subject_id", "predicate",
    "object_id", "confidence", "importance", "strength", "access_count", "last_accessed_at", "content_hash",
    "metadata", "valid_at", "invalid_at", "created_at", "superseded_by", "pinned", "expires_at",
)  # fmt: skip


def _memory_row(item: NewMemory, created_at: str, expires_at: str | None) -> tuple[Any, ...]:
    """The values of `item`'s memories row, in the order of _MEMORY_COLUMNS."""
    return (
        item.id, item.version, item.user_id, item.agent_id, item.run_id, item.content, item.kind,
        item.subject_id, item.predicate, item.object_id, item.confidence, item.importance,
        item.strength, item.access_count, item.last_accessed_at, item.content_hash,
        json.dumps(item.metadata), item.valid_at, item.invalid_at, created_at, item.superseded_by,
        int(item.pinned), expires_at,
    )  # fmt: skip


@dataclass
class NewMemory:
    """A memory row to insert (a first version, or the next version of an existing id)."""

    id: str
    content: str
    content_hash: str
    embedding: np.ndarray
    kind: str = "fact"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    version: int = 1
    confidence: float = 1.0
    importance: float = 0.5
    strength: float = 1.0
    access_count: int = 0
    last_accessed_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    valid_at: str | None = None
    invalid_at: str | None = None
    subject_id: str | None = None
    predicate: str | None = None
    object_id: str | None = None
    superseded_by: str | None = None
    pinned: bool = False
    episode_ids: Sequence[str] = ()
    # When it is to be erased (db time); the episodes' and earlier versions' expiry also count.
    expires_at: str | None = None


class MemoryWrites:
    vectors: VectorIndex
    keywords: KeywordIndex
    turn_context: TurnContext
    audit_log: AuditLog
    _conns: Connections

    def transaction(self) -> Any:  # provided by Store
        raise NotImplementedError

    # -- memories: writes ----------------------------------------------------------------------

    def insert_memories(
        self,
        items: Sequence[NewMemory],
        *,
        actor: str,
        reason: str | None = None,
        event: str = "ADD",
        at: str | None = None,
        old_content: str | None = None,
        new_content: str | None = None,
        event_metadata: dict[str, Any] | None = None,
        event_episode_id: str | None = None,
        audit: bool = True,
    ) -> list[int]:
        """Insert memory rows with their vectors, keyword entries, sources and events (whose
        new content is the row's unless `new_content` says otherwise; an ADD stores it only
        then: the row holds it, store/queries.py, `event_new_content`), logged in the audit log
        as `event` unless the caller logs the change itself (`audit` False)."""
        if not items:
            return []
        if self.vectors.dim is None:
            raise RuntimeError("bind an embedder (Store.bind_embedder) before inserting memories")
        created_at = at or now_db()
        with self.transaction() as conn:
            row_ids = self._conns.insert_rows(
                conn,
                "memories",
                _MEMORY_COLUMNS,
                [
                    _memory_row(item, created_at, expires_at)
                    for item, expires_at in zip(items, expiries(conn, items))
                ],
                generated="row_id",
            )
            # A raw turn is indexed with the conversation around its episode (store/turns.py).
            anchors = {
                row_id: item.episode_ids[0]
                for row_id, item in zip(row_ids, items)
                if item.kind == "turn" and item.episode_ids
            }
            around = self.turn_context.contexts_of(conn, list(anchors.values())) if anchors else {}
            contexts = {row_id: around[episode] for row_id, episode in anchors.items() if episode in around}
            self.keywords.insert(
                conn,
                [
                    (
                        row_id,
                        item.content,
                        contexts.get(row_id, ("", []))[0],
                        item.user_id,
                        item.agent_id,
                        item.run_id,
                    )
                    for row_id, item in zip(row_ids, items)
                ],
            )
            self.vectors.insert(
                conn,
                row_ids,
                [item.user_id or NO_USER for item in items],
                [item.agent_id or "" for item in items],
                [item.run_id or "" for item in items],
                np.stack([np.asarray(item.embedding, dtype=np.float32) for item in items]),
            )
            link_sources(conn, [(item.id, ep, created_at) for item in items for ep in item.episode_ids])
            self.turn_context.indexed(conn, contexts)
            self._conns.insert_rows(
                conn,
                "memory_events",
                _EVENT_COLUMNS,
                [
                    (
                        item.id,
                        item.user_id,
                        item.agent_id,
                        item.run_id,
                        event,
                        item.version,
                        old_content,
                        # An ADD's text is its version's: not stored twice (event_new_content).
                        new_content if new_content is not None or event == "ADD" else item.content,
                        reason,
                        actor,
                        event_episode_id or (item.episode_ids[0] if item.episode_ids else None),
                        json.dumps(event_metadata or {}),
                        created_at,
                    )
                    for item in items
                ],
            )
            if audit:
                by_scope: dict[Scope, list[str]] = {}
                for item in items:
                    by_scope.setdefault(scope_of(item), []).append(item.id)
                for scope, ids in by_scope.items():
                    self.audit_log.record(
                        event.lower(),
                        scope=scope,
                        role=actor,
                        counts={event.lower(): len(ids)},
                        memory_ids=ids,
                    )
        return row_ids

    def _log_change(self, event: str, row: Any, actor: str, memory_id: str) -> None:
        """The audit entry of a change to one memory, in `row`'s scope (joins the transaction)."""
        operation = event.lower()
        self.audit_log.record(
            operation, scope=scope_of(row), role=actor, counts={operation: 1}, memory_ids=[memory_id]
        )

    def _current_row(self, conn: Any, memory_id: str, scope: Scope | None) -> Any:
        predicate = scope_predicate(Predicate().add("m.id = ?", memory_id), scope)
        predicate.add("m.expired_at IS NULL")
        return conn.execute(
            f"SELECT {MEMORY_COLUMNS}, m.subject_id, m.object_id FROM {MEMORY_FROM} "
            f"WHERE {predicate.sql} ORDER BY m.version DESC LIMIT 1",
            predicate.params,
        ).fetchone()

    def supersede(
        self,
        memory_id: str,
        *,
        scope: Scope | None,
        changes: dict[str, Any],
        embedding: np.ndarray | None,
        event: str,
        actor: str,
        reason: str | None = None,
        episode_id: str | None = None,
        at: str | None = None,
        add_source: bool = True,
        event_content: str | None = None,
        event_metadata: dict[str, Any] | None = None,
    ) -> tuple[MemoryRecord, MemoryRecord]:
        """Expire the current version of `memory_id` and insert the next one with `changes`
        applied (keys of NewMemory). Returns (old, new) records. The event records the old and
        new content, or `event_content` as the new content (an invalidation: what replaced it).
        `episode_id` is recorded with the event and, if `add_source`, as a source of the memory."""
        at = at or now_db()
        with self.transaction() as conn:
            row = self._current_row(conn, memory_id, scope)
            if row is None:
                raise not_found(memory_id, scope)
            view = TimeView(as_of=at, known_at=at)
            old = record_from_row(row, view)
            if embedding is None:
                stored = conn.execute(
                    "SELECT embedding FROM memory_vectors WHERE row_id = ?", (row["row_id"],)
                ).fetchone()[0]
                embedding = self.vectors.decode(stored)
            fields = dict(
                id=old.id,
                content=old.content,
                content_hash=old.content_hash,
                kind=old.kind,
                user_id=old.user_id,
                agent_id=old.agent_id,
                run_id=old.run_id,
                version=old.version + 1,
                confidence=old.confidence,
                importance=old.importance,
                strength=old.strength,
                access_count=old.access_count,
                last_accessed_at=row["last_accessed_at"],
                metadata=old.metadata,
                valid_at=row["valid_at"],
                invalid_at=row["invalid_at"],
                subject_id=row["subject_id"],
                predicate=old.predicate,
                object_id=row["object_id"],
                superseded_by=old.superseded_by,
                pinned=old.pinned,
            )
            unknown = set(changes) - set(fields)
            if unknown:
                raise ValueError(f"cannot change {sorted(unknown)} of a memory")
            fields.update(changes)
            conn.execute("UPDATE memories SET expired_at = ? WHERE row_id = ?", (at, row["row_id"]))
            sources = [episode_id] if episode_id and add_source else []
            item = NewMemory(embedding=embedding, episode_ids=sources, **fields)
            self.insert_memories(
                [item],
                actor=actor,
                reason=reason,
                event=event,
                at=at,
                old_content=old.content,
                new_content=event_content,
                event_metadata=event_metadata,
                event_episode_id=episode_id,
                audit=False,
            )
            self._log_change(event, old, actor, memory_id)
            new_row = self._current_row(conn, memory_id, scope)
            return old, record_from_row(new_row, view)

    def expire(
        self,
        memory_id: str,
        *,
        scope: Scope | None,
        actor: str,
        reason: str | None = None,
        episode_id: str | None = None,
        superseded_by: str | None = None,
        metadata: dict[str, Any] | None = None,
        event: str = "INVALIDATE",
        at: str | None = None,
    ) -> MemoryRecord:
        """Stop believing the current version of a memory (a correction: it was never true).
        No new version is written; the row keeps its content for `known_at` queries."""
        at = at or now_db()
        with self.transaction() as conn:
            row = self._current_row(conn, memory_id, scope)
            if row is None:
                raise not_found(memory_id, scope)
            conn.execute(
                "UPDATE memories SET expired_at = ?, superseded_by = ? WHERE row_id = ?",
                (at, superseded_by, row["row_id"]),
            )
            old = record_from_row(row, TimeView(as_of=at, known_at=at))
            conn.execute(
                _INSERT_EVENT,
                (
                    old.id,
                    old.user_id,
                    old.agent_id,
                    old.run_id,
                    event,
                    old.version,
                    old.content,
                    None,
                    reason,
                    actor,
                    episode_id,
                    json.dumps(metadata or {}),
                    at,
                ),
            )
            self._log_change(event, old, actor, memory_id)
        return old

    def confirm(
        self, memory_id: str, *, scope: Scope | None, episode_ids: Sequence[str], gain: float
    ) -> bool:
        """A memory was stated again: link the new episodes and make it stronger (harder to
        forget); an archived one is active again. False when there is no current version in
        the scope."""
        with self.transaction() as conn:
            row = self._current_row(conn, memory_id, scope)
            if row is None:
                return False
            conn.execute(
                "UPDATE memories SET strength = strength + ?, archived_at = NULL WHERE row_id = ?",
                (gain, row[0]),
            )
            if row["archived_at"] is not None:
                self.log_event(conn, row, "RESTORE", actor="write", reason="stated again")
            link_sources(conn, [(memory_id, episode_id, now_db()) for episode_id in episode_ids])
            self._log_change("confirm", row, "write", memory_id)
        return True

    @staticmethod
    def log_event(
        conn: Any,
        row: Any,
        event: str,
        *,
        actor: str,
        reason: str | None = None,
        metadata: dict[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        """An event about a memory row (read with MEMORY_COLUMNS) that changes no content."""
        conn.execute(
            _INSERT_EVENT,
            (
                row["id"],
                row["user_id"],
                row["agent_id"],
                row["run_id"],
                event,
                row["version"],
                None,
                None,
                reason,
                actor,
                None,
                json.dumps(metadata or {}),
                at or now_db(),
            ),
        )
