"""Store: the one class that speaks SQL to the memory file."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from dspy_memory.errors import EmbedderMismatchError
from dspy_memory.store.access import AccessStatistics
from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import NO_USER, TURN_CONTEXT_VERSION, open_backend
from dspy_memory.store.blocks import BlockStore
from dspy_memory.store.conflicts import WriteConflicts
from dspy_memory.store.episodes import EpisodeLog
from dspy_memory.store.erase import Eraser
from dspy_memory.store.feedback import FeedbackLog
from dspy_memory.store.graph import EntityGraph
from dspy_memory.store.inspection import Inspection
from dspy_memory.store.keys import KeyStore
from dspy_memory.store.lifecycle import LifecycleRows
from dspy_memory.store.queries import (
    CANDIDATES_FROM,
    ENTITY_JOINS,
    MEMORY_COLUMNS,
    MEMORY_FROM,
    Candidate,
    Predicate,
    TimeView,
    event_new_content,
    from_row,
    kinds_predicate,
    metadata_predicate,
    not_about_expired,
    record_from_row,
    scope_predicate,
    time_predicate,
    unexpired,
)
from dspy_memory.store.retention import RetentionRows
from dspy_memory.store.runs import WriteRunLog
from dspy_memory.store.settings import ScopeSettings
from dspy_memory.store.texts import MemoryTexts
from dspy_memory.store.turns import RawTurns, TurnContext
from dspy_memory.types import Event, MemoryRecord, Provenance, Scope


def _partition(scope: Scope) -> str | None:
    """The vector partition a read of `scope` scans: the user's, the user-less one (NO_USER)
    when user_id is left out, or every partition (None) for an any-user scope."""
    if scope.user_id is not None:
        return scope.user_id
    return None if scope.any_user else NO_USER


# The source episode of each memory row (columns named apart from the memory's own).
PROVENANCE_COLUMNS = ", ".join(
    f"e.{name} AS episode_{name}"
    for name in ("id", "source", "role", "name", "content", "occurred_at", "metadata")
)


class Store(LifecycleRows, WriteConflicts, AccessStatistics, Inspection, MemoryTexts):
    """One database (store/backend.py): schema, transactions, memory reads and search; writes
    from MemoryWrites, archive/restore/consolidation from LifecycleRows, compare-and-set from
    WriteConflicts, recall counts from AccessStatistics, checks from Inspection, rows' texts
    from MemoryTexts. Components: `episodes`, `vectors`, `keywords`, `erase`, `graph`, `runs`,
    `feedback`, `blocks`, `retention`, `lifecycle_settings`, `retention_settings`. Methods that
    write join the caller's `transaction()` when there is one (one atomic unit).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 10_000,
        driver: str | None = None,
        encryption_key: str | Literal[False] | None = None,
        pool_size: int = 10,
        partitions: int = 1,
        exact_max_rows: int = 20_000,
        vector_cache_min_rows: int = 2048,
        vector_cache_max_rows: int = 4_000_000,
        keyword_score_budget: int = 1000,
        keyword_context_weight: float = 0.5,
        turn_context_before: int = 2,
        turn_context_after: int = 1,
        turn_context_gap_minutes: float = 60.0,
        read_only: bool = False,
    ) -> None:
        """`path`: a SQLite file (or ":memory:") or a postgresql:// URL. `encryption_key`: a
        passphrase that encrypts a SQLite file (None: $DSPY_MEMORY_ENCRYPTION_KEY, if set; False:
        a plaintext file, whatever the environment says). `read_only`: open an existing store
        without creating, migrating or writing anything (writes raise ReadOnlyError)."""
        self.backend = open_backend(
            path,
            busy_timeout_ms=busy_timeout_ms,
            driver=driver,
            encryption_key=encryption_key,
            pool_size=pool_size,
            partitions=partitions,
            exact_max_rows=exact_max_rows,
            read_only=read_only,
        )
        self.path = self.backend.path
        self.read_only = read_only
        self._conns = self.backend.conns
        self.vectors = self.backend.vector_index(
            cache_min_rows=vector_cache_min_rows, cache_max_rows=vector_cache_max_rows
        )
        self.keywords = self.backend.keyword_index(
            score_budget=keyword_score_budget, context_weight=keyword_context_weight
        )
        self.turn_context = TurnContext(
            self._conns,
            self.keywords,
            before=turn_context_before,
            after=turn_context_after,
            gap_minutes=turn_context_gap_minutes,
        )
        self.audit_log = AuditLog(self._conns)
        self.episodes = EpisodeLog(self._conns, self.turn_context, self.audit_log)
        self.erase = Eraser(self.backend, self.vectors, self.keywords, self.turn_context, self.audit_log)
        self.graph = EntityGraph(self._conns, self.audit_log)
        self.runs = WriteRunLog(self._conns)
        self.feedback = FeedbackLog(self._conns, self.runs, self.audit_log)
        self.turns = RawTurns(self._conns, self.audit_log)
        self.blocks = BlockStore(self._conns, self.audit_log)
        self.keys = KeyStore(self._conns, self.audit_log)
        self.retention = RetentionRows(self._conns, self.audit_log)
        self.lifecycle_settings = ScopeSettings(self._conns, self.audit_log, "lifecycle_settings")
        self.retention_settings = ScopeSettings(self._conns, self.audit_log, "retention_settings")
        try:
            applied = self.backend.migrate()
            with self._conns.read() as conn:
                bound = self._meta(conn, "embedder_dim")
            if TURN_CONTEXT_VERSION in applied:
                with self._conns.transaction() as conn:
                    self.turn_context.rebuild_all(conn)
        except BaseException as exc:
            self.backend.close()
            error = self.backend.open_error(exc)
            if error is None:
                raise
            raise error from None
        if bound is not None:
            self.vectors.dim = int(bound)

    # -- connections and metadata ------------------------------------------------------------

    @property
    def backend_name(self) -> str:
        return self.backend.name

    @property
    def driver_name(self) -> str:
        return self.backend.driver_name

    def transaction(self) -> Any:
        return self._conns.transaction()

    def snapshot(self) -> Any:
        return self._conns.snapshot()

    def close(self) -> None:
        self.backend.close()

    @property
    def closed(self) -> bool:
        return self._conns.closed

    def check_open(self) -> None:
        """Raise MemoryClosedError once the store is closed."""
        self._conns.check_open()

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
        with self._conns.read() if self.read_only else self.transaction() as conn:
            bound_name, bound_dim = self._meta(conn, "embedder_name"), self._meta(conn, "embedder_dim")
            if bound_name is None and self.read_only:
                self.vectors.dim = dim  # no vector was ever stored: searches find none
                return
            if bound_name is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_name', ?)", (name,))
                conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_dim', ?)", (str(dim),))
                self.vectors.create(conn, dim)
                return
            if bound_name != name or bound_dim is None or int(bound_dim) != dim:
                raise EmbedderMismatchError(
                    f"{self.path} was built with embedder {bound_name!r} ({bound_dim} dimensions) "
                    f"but was opened with {name!r} ({dim} dimensions).",
                    recorded=bound_name,
                )
            self.vectors.dim = dim

    # -- memories: reads -----------------------------------------------------------------------

    def get_memory(
        self, memory_id: str, *, scope: Scope | None = None, version: int | None = None
    ) -> MemoryRecord | None:
        """The current version of a memory, or its last version if it was expired; `version`:
        that version (each version is a row), as it is now (status as of now)."""
        predicate = unexpired(scope_predicate(Predicate().add("m.id = ?", memory_id), scope))
        if version is not None:
            predicate.add("m.version = ?", version)
        with self._conns.read() as conn:
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {predicate.sql} "
                "ORDER BY (m.expired_at IS NULL) DESC, m.version DESC LIMIT 1",
                predicate.params,
            ).fetchone()
        return record_from_row(row, TimeView.at()) if row else None

    def current_by_hash(self, hashes: Sequence[str], scope: Scope) -> dict[str, MemoryRecord]:
        """{content hash: memory} for memories of the scope that are believed and true now."""
        view = TimeView.at()
        predicate = time_predicate(scope_predicate(Predicate(), scope), view)
        # By the hash-prefix index of current rows (SQLite; else it reads the scope: 7 ms, not 0.02).
        prefixes = json.dumps(sorted({digest[:16] for digest in hashes}))
        predicate.add("m.expired_at IS NULL")
        predicate.add("substr(m.content_hash, 1, 16) IN (SELECT value FROM json_each(?))", prefixes)
        predicate.add("m.content_hash IN (SELECT value FROM json_each(?))", json.dumps(list(hashes)))
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m INDEXED BY memories_hash {ENTITY_JOINS} "
                f"WHERE {predicate.sql}",
                predicate.params,
            ).fetchall()
        return {record.content_hash: record for record in (record_from_row(row, view) for row in rows)}

    def ids_with_prefix(self, prefix: str, scope: Scope | None, limit: int = 2) -> list[str]:
        """Memory ids starting with `prefix` in a scope (agents quote ids shortened)."""
        predicate = unexpired(scope_predicate(Predicate(), scope))
        # A range on the (id, version) index; ids are UUIDs, and "~" sorts after their characters.
        predicate.add("m.id >= ? AND m.id < ?", prefix, prefix + "~")
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT m.id FROM memories m WHERE {predicate.sql} LIMIT ?",
                [*predicate.params, limit],
            ).fetchall()
        return [row[0] for row in rows]

    def memory_predicate(
        self,
        scope: Scope | None,
        view: TimeView | None,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        *,
        include_archived: bool = False,
    ) -> Predicate:
        predicate = scope_predicate(Predicate(), scope)
        time_predicate(predicate, view)
        kinds_predicate(predicate, kinds)
        if not include_archived:
            predicate.add("m.archived_at IS NULL")
        return metadata_predicate(predicate, filters, self.backend.json)

    def list_memories(
        self, predicate: Predicate, view: TimeView, *, limit: int, offset: int, newest_first: bool = True
    ) -> list[MemoryRecord]:
        order = "DESC" if newest_first else "ASC"
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {predicate.sql} "
                f"ORDER BY coalesce(m.valid_at, m.created_at) {order}, m.row_id {order} "
                "LIMIT ? OFFSET ?",
                [*predicate.params, limit, offset],
            ).fetchall()
        return [record_from_row(row, view) for row in rows]

    def records_with_provenance(
        self, row_ids: Sequence[int], view: TimeView
    ) -> dict[int, tuple[MemoryRecord, list[Provenance]]]:
        """Records of these rows with the episodes they came from. The episodes are read by
        memory id on their own: on SQLite `memory_sources` is a view (a join), which the right
        side of a LEFT JOIN would read whole (store/sqlite/schema_compact.py, V13)."""
        if not row_ids:
            return {}
        live = unexpired(Predicate(), "e")
        with self._conns.read() as conn:
            records = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {CANDIDATES_FROM} {ENTITY_JOINS}", (json.dumps(list(row_ids)),)
            ).fetchall()
            sources = conn.execute(
                f"SELECT s.memory_id, {PROVENANCE_COLUMNS} FROM memory_sources s "
                "JOIN episodes e ON e.id = s.episode_id WHERE s.memory_id IN (SELECT value FROM json_each(?)) "
                f"AND ({live.sql}) ORDER BY e.occurred_at, e.rowid",
                (json.dumps(sorted({row["id"] for row in records})), *live.params),
            ).fetchall()
        episodes: dict[str, list[Provenance]] = {}
        for row in sources:
            episodes.setdefault(row["memory_id"], []).append(
                Provenance(
                    **{name: row[f"episode_{name}"] for name in ("source", "role", "name", "content")},
                    episode_id=row["episode_id"],
                    occurred_at=row["episode_occurred_at"],
                    metadata=json.loads(row["episode_metadata"]),
                )
            )
        return {
            row["row_id"]: (record_from_row(row, view), list(episodes.get(row["id"], []))) for row in records
        }

    def history(self, memory_id: str, *, scope: Scope | None = None) -> list[Event]:
        """A memory's events, oldest first; none once it expired (its events quote it)."""
        predicate = scope_predicate(Predicate().add("m.memory_id = ?", memory_id), scope)
        not_about_expired(predicate, "m.memory_id")
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT id, memory_id, event, version, old_content, {event_new_content('m')} AS new_content, "
                f"reason, actor, episode_id, created_at, metadata FROM memory_events m WHERE {predicate.sql} "
                "ORDER BY id",
                predicate.params,
            ).fetchall()
        return [from_row(Event, row) for row in rows]

    # -- search --------------------------------------------------------------------------------

    def _sizes(self, conn: Any, scope: Scope) -> tuple[int, int | None]:
        """(rows in the file, rows in the scope's partition). Row counts are kept per user
        (user-less rows: NO_USER); the size of an any-user scope is unknown (None)."""
        partition = _partition(scope)
        total_rows, rows = self.vectors.sizes(conn, partition)
        return total_rows, rows if partition is not None else None

    def keyword_search(
        self, terms: list[str], scope: Scope, predicate: Predicate, n: int, *, reference: str
    ) -> list[Candidate]:
        """BM25 over memory content, best first; candidate ages are measured to `reference`."""
        with self._conns.read() as conn:
            total_rows, scope_rows = self._sizes(conn, scope)
            return self.keywords.search(
                conn,
                terms,
                (scope.user_id, scope.agent_id, scope.run_id),
                n,
                predicate=predicate.sql,
                params=predicate.params,
                scope_rows=scope_rows,
                total_rows=total_rows,
                reference=reference,
            )

    def graph_search(
        self,
        seeds: Sequence[int],
        scope: Scope,
        predicate: Predicate,
        *,
        max_share: float,
        per_entity: int,
        reference: str,
    ) -> list[tuple[int, float, Candidate]]:
        """Memories sharing an entity with the `seeds` (see EntityGraph.linked)."""
        with self._conns.read() as conn:
            total_rows, scope_rows = self._sizes(conn, scope)
        return self.graph.linked(
            seeds,
            predicate,
            scope_rows=total_rows if scope_rows is None else scope_rows,
            max_share=max_share,
            per_entity=per_entity,
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
                partition=_partition(scope),
                agent_id=scope.agent_id,
                run_id=scope.run_id,
                predicate=predicate.sql,
                params=predicate.params,
                coarse=coarse,
                reference=reference,
            )
