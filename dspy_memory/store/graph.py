"""Entities and the temporal graph: memories with a subject and an object are its edges."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.graph import GraphLink, MemoryGraph
from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import (
    CANDIDATES_FROM,
    MEMORY_COLUMNS,
    MEMORY_FROM,
    SIGNAL_COLUMNS,
    Candidate,
    Predicate,
    TimeView,
    from_row,
    record_from_row,
    scope_predicate,
    unexpired,
    unexpired_entity,
)
from dspy_memory.types import Entity, MemoryRecord, Scope
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
    return unexpired(predicate).add("m.expired_at IS NULL OR m.expired_at > ?", view.known_at)


class EntityGraph:
    def __init__(self, conns: Connections, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log

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
        created = 0
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
                    created += 1
                ids[key] = found
            if created:
                self._audit.record("add_entities", scope=scope, role="lm", counts={"entities": created})
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
        ).add(*unexpired_entity("e"))
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
        order: how a fact changed (memories merged into one are listed, expired, with the
        merge's id as `superseded_by`)."""
        if subject is None and predicate is None:
            raise InvalidInputError("timeline() needs subject=, predicate= or both")
        for name, value in (("subject", subject), ("predicate", predicate)):
            if value is not None:
                valid_text(value, name)
        # The last version of each memory believed at `known_at`, and of memories merged into
        # another since (expired, superseded_by the merge): a merge is part of how a fact changed.
        where = unexpired(scope_predicate(Predicate(), scope)).add("m.created_at <= ?", view.known_at)
        where.add(
            "m.expired_at IS NULL OR m.expired_at > ? OR m.id IN (SELECT linked_id FROM memory_links "
            "WHERE relation = 'merged_from' AND memory_id = m.superseded_by)",
            view.known_at,
        )
        if subject is not None:
            where.add("subj.normalized_name = ?", normalize_name(subject))
        if predicate is not None:
            where.add("m.predicate = ?", normalize_predicate(predicate))
        return self._records(where, view)

    def subgraph(
        self,
        scope: Scope,
        view: TimeView,
        *,
        entity: str | None = None,
        memory_id: str | None = None,
        depth: int = 1,
        limit: int = 500,
    ) -> MemoryGraph:
        """The graph around an entity (by name), around a memory (its entities), or of the whole
        scope: the memories about those entities (current and past versions as believed at
        `known_at`), then, for `depth` > 1, the memories about the other entities those name.
        At most `limit` memories, in world-time order; each memory once, in the version believed at
        `known_at`."""
        memories = _latest_versions(scope_predicate(Predicate(), scope), view)
        entities = scope_predicate(Predicate(), scope, "e").add(*unexpired_entity("e"))
        rows: dict[int, Any] = {}
        with self._conns.read() as conn:
            if entity is not None:
                entities.add("e.normalized_name = ?", normalize_name(entity))
                frontier = {
                    row[0]
                    for row in conn.execute(
                        f"SELECT e.id FROM entities e WHERE {entities.sql}", entities.params
                    )
                }
            elif memory_id is not None:
                where = memories.copy().add("m.id = ?", memory_id)
                for row in self._select(conn, where, limit):
                    rows[row["row_id"]] = row
                frontier = {
                    ref for row in rows.values() for ref in (row["subject_id"], row["object_id"]) if ref
                }
            else:
                frontier = {
                    row[0]
                    for row in conn.execute(
                        f"SELECT e.id FROM entities e WHERE {entities.sql} ORDER BY e.created_at LIMIT ?",
                        [*entities.params, limit],
                    )
                }
            seen = set(frontier)
            for _ in range(depth):
                if not frontier or len(rows) >= limit:
                    break
                ids = json.dumps(sorted(frontier))
                where = memories.copy().add(
                    "m.subject_id IN (SELECT value FROM json_each(?)) OR m.object_id IN (SELECT value FROM json_each(?))",
                    ids,
                    ids,
                )
                for row in self._select(conn, where, limit - len(rows)):
                    rows.setdefault(row["row_id"], row)
                named = {ref for row in rows.values() for ref in (row["subject_id"], row["object_id"]) if ref}
                frontier = named - seen
                seen |= named
            named = {ref for row in rows.values() for ref in (row["subject_id"], row["object_id"]) if ref}
            shown_sql, shown_param = unexpired_entity("e")
            entity_rows = conn.execute(
                "SELECT e.id, e.name, e.type, e.summary, e.user_id, e.agent_id, e.run_id, e.created_at "
                f"FROM entities e WHERE e.id IN (SELECT value FROM json_each(?)) AND ({shown_sql}) "
                "ORDER BY e.created_at, e.id",
                (json.dumps(sorted(seen | named)), shown_param),
            ).fetchall()
        ordered = sorted(rows.values(), key=lambda row: (row["valid_at"] or row["created_at"], row["row_id"]))
        records = [record_from_row(row, view) for row in ordered]
        shown_ids = {record.id for record in records}
        links: list[GraphLink] = []
        for row, record in zip(ordered, records):
            if row["subject_id"]:
                links.append(
                    GraphLink(
                        source=record.id, target=row["subject_id"], type="subject", label=record.predicate
                    )
                )
            if row["object_id"]:
                links.append(GraphLink(source=record.id, target=row["object_id"], type="object"))
            if record.superseded_by in shown_ids and record.superseded_by != record.id:
                links.append(GraphLink(source=record.id, target=record.superseded_by, type="replaced_by"))
        return MemoryGraph(
            entities=[from_row(Entity, row) for row in entity_rows], memories=records, links=links
        )

    @staticmethod
    def _select(conn: Any, where: Predicate, limit: int) -> list[Any]:
        return conn.execute(
            f"SELECT {MEMORY_COLUMNS}, m.subject_id, m.object_id FROM {MEMORY_FROM} WHERE {where.sql} "
            "ORDER BY coalesce(m.valid_at, m.created_at), m.row_id LIMIT ?",
            [*where.params, limit],
        ).fetchall()

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

    def linked(
        self,
        row_ids: Sequence[int],
        predicate: Predicate,
        *,
        scope_rows: int,
        max_share: float,
        per_entity: int,
        reference: str,
    ) -> list[tuple[int, float, Candidate]]:
        """Memories that share an entity (as subject or object) with the memories `row_ids`, among
        those `predicate` (over `memories m`) admits: (seed row id, the entity's weight, the
        linked memory). An entity's weight is its inverse document frequency in the scope,
        log(rows / memories naming it) / log(rows); entities named by more than `max_share` of
        the scope's `scope_rows` memories (the user, say) link everything and are skipped."""
        if not row_ids or scope_rows < 2:
            return []
        cap = max(2, int(max_share * scope_rows))
        found: list[tuple[int, float, Candidate]] = []
        with self._conns.read() as conn:
            seeds = conn.execute(
                "SELECT row_id, subject_id, object_id FROM memories "
                "WHERE row_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(row_ids)),),
            ).fetchall()
            weights: dict[str, float | None] = {}
            for seed in seeds:
                for entity_id in {seed["subject_id"], seed["object_id"]} - {None}:
                    if entity_id not in weights:
                        weights[entity_id] = self._weight(
                            conn, entity_id, predicate, cap=cap, scope_rows=scope_rows
                        )
                    weight = weights[entity_id]
                    if weight is None:
                        continue
                    rows = conn.execute(
                        "SELECT m.row_id FROM memories m WHERE (m.subject_id = ? OR m.object_id = ?) "
                        f"AND m.row_id != ? AND ({predicate.sql}) LIMIT ?",
                        [entity_id, entity_id, seed["row_id"], *predicate.params, per_entity],
                    ).fetchall()
                    if not rows:
                        continue
                    for row in conn.execute(
                        f"SELECT {SIGNAL_COLUMNS} FROM {CANDIDATES_FROM}",
                        (reference, json.dumps([row[0] for row in rows])),
                    ):
                        found.append((seed["row_id"], weight, Candidate(row[0], weight, *row[1:])))
        return found

    @staticmethod
    def _weight(
        conn: Any, entity_id: str, predicate: Predicate, *, cap: int, scope_rows: int
    ) -> float | None:
        """The entity's inverse document frequency in the scope, None past `cap` memories."""
        count = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories m WHERE (m.subject_id = ? OR m.object_id = ?) "
            f"AND ({predicate.sql}) LIMIT ?)",
            [entity_id, entity_id, *predicate.params, cap + 1],
        ).fetchone()[0]
        if count == 0 or count > cap:
            return None
        return math.log(scope_rows / count) / math.log(scope_rows)

    def _records(self, where: Predicate, view: TimeView) -> list[MemoryRecord]:
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {where.sql} "
                "ORDER BY coalesce(m.valid_at, m.created_at), m.row_id",
                where.params,
            ).fetchall()
        return [record_from_row(row, view) for row in rows]
