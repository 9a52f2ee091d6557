"""Entities and the temporal graph: memories with a subject and an object are its edges."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.store.connection import Connections
from dspy_memory.store.queries import (
    MEMORY_COLUMNS,
    MEMORY_FROM,
    Predicate,
    TimeView,
    from_row,
    record_from_row,
    scope_predicate,
)
from dspy_memory.types import Entity, EntityEdges, MemoryRecord, Scope
from dspy_memory.util.text import normalize_name, normalize_predicate, valid_text
from dspy_memory.util.timeutil import now_db


def _exact_scope(predicate: Predicate, scope: Scope, alias: str) -> Predicate:
    # Entities belong to exactly the scope that wrote them (a user's entities are not an
    # agent's), so every id is compared, NULL included.
    for column in ("user_id", "agent_id", "run_id"):
        predicate.add(f"{alias}.{column} IS ?", getattr(scope, column))
    return predicate


def _latest_versions(predicate: Predicate, view: TimeView) -> Predicate:
    """Each memory once: its version the system believed at `known_at`, true or not at `as_of`."""
    predicate.add("m.created_at <= ?", view.known_at)
    return predicate.add("m.expired_at IS NULL OR m.expired_at > ?", view.known_at)


class EntityGraph:
    def __init__(self, conns: Connections) -> None:
        self._conns = conns

    def upsert(self, names: Iterable[str], scope: Scope) -> dict[str, str]:
        """Entity ids for these names in exactly this scope, creating the missing ones.
        Returns {normalized name: id}. Joins the caller's transaction."""
        wanted: dict[str, str] = {}
        for name in names:
            key = normalize_name(name)
            if key and key not in wanted:
                wanted[key] = " ".join(name.split())
        if not wanted:
            return {}
        now = now_db()
        ids: dict[str, str] = {}
        with self._conns.transaction() as conn:
            for key, display in wanted.items():
                found = self._find(conn, key, scope)
                if found is None:
                    found = str(uuid.uuid4())
                    conn.execute(
                        "INSERT INTO entities (id, user_id, agent_id, run_id, name, normalized_name, "
                        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (found, scope.user_id, scope.agent_id, scope.run_id, display, key, now, now),
                    )
                ids[key] = found
        return ids

    @staticmethod
    def _find(conn: Any, key: str, scope: Scope) -> str | None:
        predicate = _exact_scope(Predicate().add("e.normalized_name = ?", key), scope, "e")
        row = conn.execute(f"SELECT e.id FROM entities e WHERE {predicate.sql}", predicate.params).fetchone()
        return row[0] if row else None

    def entities(self, name: str, scope: Scope) -> list[Entity]:
        """Entities with this (normalized) name in a scope (matched as `scope_predicate` does)."""
        predicate = scope_predicate(
            Predicate().add("e.normalized_name = ?", normalize_name(name)), scope, "e"
        )
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT e.id, e.name, e.type, e.summary, e.user_id, e.agent_id, e.run_id, e.created_at "
                f"FROM entities e WHERE {predicate.sql} ORDER BY e.created_at",
                predicate.params,
            ).fetchall()
        return [from_row(Entity, row) for row in rows]

    def timeline(
        self, scope: Scope, view: TimeView, *, subject: str | None, predicate: str | None
    ) -> list[MemoryRecord]:
        """Every memory about `subject` (and `predicate`), true now or in the past, in world-time
        order: how a fact changed."""
        if subject is None and predicate is None:
            raise InvalidInputError("timeline() needs subject=, predicate= or both")
        for name, value in (("subject", subject), ("predicate", predicate)):
            if value is not None:
                valid_text(value, name)
        where = _latest_versions(scope_predicate(Predicate(), scope), view)
        if subject is not None:
            where.add("subj.normalized_name = ?", normalize_name(subject))
        if predicate is not None:
            where.add("m.predicate = ?", normalize_predicate(predicate))
        return self._records(where, view)

    def neighbourhood(self, entity: str, scope: Scope, view: TimeView) -> EntityEdges:
        """The entities named `entity` in a scope and the memories linking them."""
        entities = self.entities(entity, scope)
        return EntityEdges(
            entity=entity, entities=entities, edges=self.edges([e.id for e in entities], scope, view)
        )

    def edges(self, entity_ids: list[str], scope: Scope, view: TimeView) -> list[MemoryRecord]:
        """Memories in which these entities are the subject or the object, current and past."""
        where = _latest_versions(scope_predicate(Predicate(), scope), view)
        ids = json.dumps(entity_ids)
        where.add(
            "m.subject_id IN (SELECT value FROM json_each(?)) OR m.object_id IN (SELECT value FROM json_each(?))",
            ids,
            ids,
        )
        return self._records(where, view)

    def predecessors(self, memory_ids: list[str], scope: Scope, view: TimeView) -> list[MemoryRecord]:
        """Memories that were replaced by these ones (invalidated or corrected), as believed at
        `known_at`."""
        where = _latest_versions(scope_predicate(Predicate(), scope), view)
        where.add("m.superseded_by IN (SELECT value FROM json_each(?))", json.dumps(memory_ids))
        return self._records(where, view)

    def _records(self, where: Predicate, view: TimeView) -> list[MemoryRecord]:
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {where.sql} "
                "ORDER BY ifnull(m.valid_at, m.created_at), m.row_id",
                where.params,
            ).fetchall()
        return [record_from_row(row, view) for row in rows]
