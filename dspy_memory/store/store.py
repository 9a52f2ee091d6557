"""Store: the one class that speaks SQL to the memory file."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dspy_memory.errors import EmbedderMismatchError
from dspy_memory.store import keyword
from dspy_memory.store.connection import Connections, resolve_driver
from dspy_memory.store.episodes import EpisodeLog
from dspy_memory.store.erase import Eraser
from dspy_memory.store.graph import EntityGraph
from dspy_memory.store.migrations import migrate
from dspy_memory.store.queries import (
    CANDIDATES_FROM,
    ENTITY_JOINS,
    MEMORY_COLUMNS,
    MEMORY_FROM,
    MEMORY_WIDTH,
    Candidate,
    Predicate,
    TimeView,
    kinds_predicate,
    metadata_predicate,
    not_found,
    record_from_row,
    scope_predicate,
    time_predicate,
)
from dspy_memory.store.runs import WriteRunLog
from dspy_memory.store.vectors import NO_USER, VectorIndex
from dspy_memory.timeutil import now_db
from dspy_memory.types import Event, MemoryRecord, Provenance, Scope

_INSERT_EVENT = (
    "INSERT INTO memory_events (memory_id, user_id, agent_id, run_id, event, version, old_content, "
    "new_content, reason, actor, episode_id, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


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
    episode_ids: Sequence[str] = ()


class Store:
    """Schema, transactions, memories, events; episodes, vector and keyword indexes, erasure,
    entities and the write-run log live in the components `episodes`, `vectors`, `keywords`,
    `erase`, `graph` and `runs`.

    Methods that write join the caller's `transaction()` when there is one, so a write path can
    group many calls into one atomic unit.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 10_000,
        driver: str | None = None,
        vector_cache_min_rows: int = 2048,
        vector_cache_max_rows: int = 4_000_000,
        keyword_score_budget: int = 1000,
    ) -> None:
        path = os.fspath(path)
        if path != ":memory:" and not path.startswith("file:"):
            parent = Path(path).expanduser().resolve().parent
            if not parent.is_dir():
                raise FileNotFoundError(
                    f"cannot create the memory file {path!r}: folder {str(parent)!r} does not exist"
                )
            path = str(Path(path).expanduser())
        self.path = path
        self._conns = Connections(path, resolve_driver(driver), busy_timeout_ms=busy_timeout_ms)
        self.vectors = VectorIndex(cache_min_rows=vector_cache_min_rows, cache_max_rows=vector_cache_max_rows)
        self.keywords = keyword.KeywordIndex(score_budget=keyword_score_budget)
        self.episodes = EpisodeLog(self._conns)
        self.erase = Eraser(self._conns, self.vectors, self.keywords, path=path)
        self.graph = EntityGraph(self._conns)
        self.runs = WriteRunLog(self._conns)
        with self._conns.read() as conn:
            migrate(conn)
            bound = self._meta(conn, "embedder_dim")
        if bound is not None:
            self.vectors.dim = int(bound)

    # -- connections and metadata ------------------------------------------------------------

    @property
    def driver_name(self) -> str:
        return self._conns.driver.__name__

    def transaction(self) -> Any:
        return self._conns.transaction()

    def snapshot(self) -> Any:
        return self._conns.snapshot()

    def close(self) -> None:
        self._conns.close()

    @staticmethod
    def _meta(conn: Any, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def embedder_info(self) -> tuple[str, int] | None:
        with self._conns.read() as conn:
            name, dim = self._meta(conn, "embedder_name"), self._meta(conn, "embedder_dim")
        return (name, int(dim)) if name is not None and dim is not None else None

    def bind_embedder(self, name: str, dim: int) -> None:
        """Record the embedder in the file on first use; refuse a different one later."""
        if dim <= 0 or dim % 8:
            raise ValueError(f"embedding dimension must be a positive multiple of 8, got {dim}")
        with self.transaction() as conn:
            bound_name, bound_dim = self._meta(conn, "embedder_name"), self._meta(conn, "embedder_dim")
            if bound_name is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_name', ?)", (name,))
                conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_dim', ?)", (str(dim),))
                self.vectors.create(conn, dim)
                return
            if bound_name != name or int(bound_dim) != dim:
                raise EmbedderMismatchError(
                    f"{self.path} was built with embedder {bound_name!r} ({bound_dim} dimensions) "
                    f"but was opened with {name!r} ({dim} dimensions). Open it with "
                    f"embedder={bound_name!r}, or use a new file for the new embedder."
                )
            self.vectors.dim = dim

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
    ) -> list[int]:
        """Insert memory rows with their vectors, keyword entries, sources and events (whose
        new content is the row's unless `new_content` says otherwise)."""
        if not items:
            return []
        if self.vectors.dim is None:
            raise RuntimeError("bind an embedder (Store.bind_embedder) before inserting memories")
        created_at = at or now_db()
        row_ids = []
        with self.transaction() as conn:
            for item in items:
                cursor = conn.execute(
                    "INSERT INTO memories (id, version, user_id, agent_id, run_id, content, kind, "
                    "subject_id, predicate, object_id, confidence, importance, strength, "
                    "access_count, last_accessed_at, content_hash, metadata, valid_at, invalid_at, "
                    "created_at, superseded_by) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        item.id,
                        item.version,
                        item.user_id,
                        item.agent_id,
                        item.run_id,
                        item.content,
                        item.kind,
                        item.subject_id,
                        item.predicate,
                        item.object_id,
                        item.confidence,
                        item.importance,
                        item.strength,
                        item.access_count,
                        item.last_accessed_at,
                        item.content_hash,
                        json.dumps(item.metadata),
                        item.valid_at,
                        item.invalid_at,
                        created_at,
                        item.superseded_by,
                    ),
                )
                row_ids.append(cursor.lastrowid)
            self.keywords.insert(
                conn,
                [
                    (row_id, item.content, item.user_id, item.agent_id, item.run_id)
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
            conn.executemany(
                "INSERT OR IGNORE INTO memory_sources (memory_id, episode_id, created_at) VALUES (?, ?, ?)",
                [(item.id, ep, created_at) for item in items for ep in item.episode_ids],
            )
            conn.executemany(
                _INSERT_EVENT,
                [
                    (
                        item.id,
                        item.user_id,
                        item.agent_id,
                        item.run_id,
                        event,
                        item.version,
                        old_content,
                        new_content if new_content is not None else item.content,
                        reason,
                        actor,
                        event_episode_id or (item.episode_ids[0] if item.episode_ids else None),
                        json.dumps(event_metadata or {}),
                        created_at,
                    )
                    for item in items
                ],
            )
        return row_ids

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
                blob = conn.execute(
                    "SELECT embedding FROM memory_vectors WHERE row_id = ?", (row[0],)
                ).fetchone()[0]
                embedding = np.frombuffer(blob, np.float32)
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
                last_accessed_at=row[15],
                metadata=old.metadata,
                valid_at=row[18],
                invalid_at=row[19],
                subject_id=row[MEMORY_WIDTH],
                predicate=old.predicate,
                object_id=row[MEMORY_WIDTH + 1],
                superseded_by=old.superseded_by,
            )
            unknown = set(changes) - set(fields)
            if unknown:
                raise ValueError(f"cannot change {sorted(unknown)} of a memory")
            fields.update(changes)
            conn.execute("UPDATE memories SET expired_at = ? WHERE row_id = ?", (at, row[0]))
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
            )
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
                (at, superseded_by, row[0]),
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
        return old

    def confirm(
        self, memory_id: str, *, scope: Scope | None, episode_ids: Sequence[str], gain: float
    ) -> bool:
        """A memory was stated again: link the new episodes and make it stronger (harder to
        forget). False when there is no current version in the scope."""
        with self.transaction() as conn:
            row = self._current_row(conn, memory_id, scope)
            if row is None:
                return False
            conn.execute("UPDATE memories SET strength = strength + ? WHERE row_id = ?", (gain, row[0]))
            conn.executemany(
                "INSERT OR IGNORE INTO memory_sources (memory_id, episode_id, created_at) VALUES (?, ?, ?)",
                [(memory_id, episode_id, now_db()) for episode_id in episode_ids],
            )
        return True

    def current_by_hash(self, hashes: Sequence[str], scope: Scope) -> dict[str, str]:
        """{content hash: memory id} for memories of the scope that are believed and true now."""
        predicate = time_predicate(scope_predicate(Predicate(), scope), TimeView.at())
        predicate.add("m.content_hash IN (SELECT value FROM json_each(?))", json.dumps(list(hashes)))
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT m.content_hash, m.id FROM memories m WHERE {predicate.sql}", predicate.params
            ).fetchall()
        return {row[0]: row[1] for row in rows}

    def record_access(self, counts: Sequence[tuple[int, int, str]]) -> None:
        """Add recalls to rows: (row_id, times recalled, last recall time). The forgetting curve
        uses these statistics."""
        if not counts:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE memories SET access_count = access_count + ?, "
                "last_accessed_at = max(ifnull(last_accessed_at, ''), ?) WHERE row_id = ?",
                [(count, at, row_id) for row_id, count, at in counts],
            )

    # -- memories: reads -----------------------------------------------------------------------

    def get_memory(self, memory_id: str, *, scope: Scope | None = None) -> MemoryRecord | None:
        """The current version of a memory, or its last version if it was expired."""
        predicate = scope_predicate(Predicate().add("m.id = ?", memory_id), scope)
        with self._conns.read() as conn:
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {predicate.sql} "
                "ORDER BY (m.expired_at IS NULL) DESC, m.version DESC LIMIT 1",
                predicate.params,
            ).fetchone()
        return record_from_row(row, TimeView.at()) if row else None

    def memory_predicate(
        self,
        scope: Scope | None,
        view: TimeView | None,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> Predicate:
        predicate = scope_predicate(Predicate(), scope)
        time_predicate(predicate, view)
        kinds_predicate(predicate, kinds)
        return metadata_predicate(predicate, filters)

    def list_memories(
        self, predicate: Predicate, view: TimeView, *, limit: int, offset: int, newest_first: bool = True
    ) -> list[MemoryRecord]:
        order = "DESC" if newest_first else "ASC"
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {predicate.sql} "
                f"ORDER BY ifnull(m.valid_at, m.created_at) {order}, m.row_id {order} "
                "LIMIT ? OFFSET ?",
                [*predicate.params, limit, offset],
            ).fetchall()
        return [record_from_row(row, view) for row in rows]

    def records_with_provenance(
        self, row_ids: Sequence[int], view: TimeView
    ) -> dict[int, tuple[MemoryRecord, list[Provenance]]]:
        """Records of these rows with the episodes they came from, in one query."""
        if not row_ids:
            return {}
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS}, e.id, e.source, e.role, e.name, e.content, e.occurred_at, "
                f"e.metadata FROM {CANDIDATES_FROM} {ENTITY_JOINS} "
                "LEFT JOIN memory_sources s ON s.memory_id = m.id "
                "LEFT JOIN episodes e ON e.id = s.episode_id ORDER BY e.occurred_at, e.rowid",
                (json.dumps(list(row_ids)),),
            ).fetchall()
        result: dict[int, tuple[MemoryRecord, list[Provenance]]] = {}
        width = len(rows[0]) - 7 if rows else 0
        for row in rows:
            entry = result.get(row[0])
            if entry is None:
                entry = result[row[0]] = (record_from_row(row[:width], view), [])
            if row[width] is not None:
                entry[1].append(
                    Provenance(
                        episode_id=row[width],
                        source=row[width + 1],
                        role=row[width + 2],
                        name=row[width + 3],
                        content=row[width + 4],
                        occurred_at=row[width + 5],
                        metadata=json.loads(row[width + 6]),
                    )
                )
        return result

    def history(self, memory_id: str, *, scope: Scope | None = None) -> list[Event]:
        predicate = scope_predicate(Predicate().add("m.memory_id = ?", memory_id), scope)
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT id, memory_id, event, version, old_content, new_content, reason, actor, "
                f"episode_id, created_at, metadata FROM memory_events m WHERE {predicate.sql} "
                "ORDER BY id",
                predicate.params,
            ).fetchall()
        return [
            Event(
                id=row[0],
                memory_id=row[1],
                event=row[2],
                version=row[3],
                old_content=row[4],
                new_content=row[5],
                reason=row[6],
                actor=row[7],
                episode_id=row[8],
                created_at=row[9],
                metadata=json.loads(row[10]),
            )
            for row in rows
        ]

    # -- search --------------------------------------------------------------------------------

    def keyword_search(
        self, terms: list[str], scope: Scope, predicate: Predicate, n: int, *, reference: str
    ) -> list[Candidate]:
        """BM25 over memory content, best first; candidate ages are measured to `reference`."""
        with self._conns.read() as conn:
            # Row counts are kept per user; the size of an agent- or run-only scope is unknown.
            state = self.vectors.state(conn, scope.user_id)
            total_rows, scope_rows = state.total_rows, state.rows if scope.user_id is not None else None
            return self.keywords.search(
                conn,
                terms,
                keyword.scope_tokens(scope.user_id, scope.agent_id, scope.run_id),
                n,
                predicate=predicate.sql,
                params=predicate.params,
                scope_rows=scope_rows,
                total_rows=total_rows,
                reference=reference,
            )

    def dense_search(
        self, query: np.ndarray, scope: Scope, predicate: Predicate, n: int, *, coarse: int, reference: str
    ) -> list[Candidate]:
        """Cosine similarity search, best first. At least `coarse` candidates of the binary
        pass are rescored exactly; candidate ages are measured to `reference`."""
        with self._conns.snapshot() as conn:
            return self.vectors.search(
                conn,
                query,
                n,
                partition=scope.user_id,
                agent_id=scope.agent_id,
                run_id=scope.run_id,
                predicate=predicate.sql,
                params=predicate.params,
                coarse=coarse,
                reference=reference,
            )

    # -- inspection ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Row counts per table and the bound embedder."""
        import sqlite_utils

        with self._conns.read() as conn:
            db = sqlite_utils.Database(conn)
            tables = {
                name: db[name].count
                for name in (
                    "episodes",
                    "memories",
                    "memory_sources",
                    "memory_events",
                    "entities",
                    "blocks",
                    "write_runs",
                )
            }
            current = conn.execute("SELECT count(*) FROM memories WHERE expired_at IS NULL").fetchone()[0]
        info = self.embedder_info()
        return {
            "path": self.path,
            "driver": self.driver_name,
            "embedder": info[0] if info else None,
            "dim": info[1] if info else None,
            "tables": tables,
            "current_memories": current,
        }
