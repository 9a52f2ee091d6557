"""Erasure, the GDPR path: deleting a memory or a whole scope leaves nothing of it in the file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dspy_memory.store.connection import Connections
from dspy_memory.store.keyword import KeywordIndex
from dspy_memory.store.queries import Predicate, not_found, scope_predicate
from dspy_memory.store.vectors import VectorIndex
from dspy_memory.timeutil import now_db
from dspy_memory.types import DeleteResult, Scope


class Eraser:
    """Deletes rows, vectors and keyword entries with freed pages zeroed, then rewrites the
    keyword index and checkpoints the WAL so deleted words are gone from the file too."""

    def __init__(
        self, conns: Connections, vectors: VectorIndex, keywords: KeywordIndex, *, path: str
    ) -> None:
        self._conns = conns
        self._vectors = vectors
        self._keywords = keywords
        self._path = path

    @contextmanager
    def _secure_delete(self) -> Iterator[None]:
        """Pages freed inside the block are zeroed. Inside a caller's transaction it stays on
        until the caller's `compact()`, which purges always end with."""
        nested = self._conns.in_transaction()
        with self._conns.read() as conn:
            conn.execute("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            if not nested:
                with self._conns.read() as conn:
                    conn.execute("PRAGMA secure_delete = OFF")

    @contextmanager
    def _purging(self) -> Iterator[Any]:
        """A transaction whose freed pages are zeroed, then compaction of what it left behind.
        Inside a caller's transaction (the LM write path applies a DELETE with its other ops),
        the caller runs `compact()` after its commit."""
        nested = self._conns.in_transaction()
        with self._secure_delete():
            with self._conns.transaction() as conn:
                yield conn
        if not nested:
            self.compact()

    def compact(self) -> None:
        """Rewrite the keyword index and checkpoint the WAL, so purged words leave the file."""
        with self._secure_delete(), self._conns.transaction() as conn:
            self._keywords.optimize(conn)
        if self._path != ":memory:":
            with self._conns.read() as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _delete_rows(self, conn: Any, row_ids: list[int]) -> dict[str, int]:
        ids_json = json.dumps(row_ids)
        counts = {"vectors": self._vectors.delete(conn, row_ids)}
        counts["keyword_entries"] = self._keywords.delete(conn, row_ids)
        counts["memories"] = conn.execute(
            "DELETE FROM memories WHERE row_id IN (SELECT value FROM json_each(?))", (ids_json,)
        ).rowcount
        return counts

    def memory(self, memory_id: str, *, scope: Scope | None = None, actor: str = "user") -> DeleteResult:
        """Delete every version of a memory, its vectors, keyword entries and sources; erase the
        content of its events and log a DELETE; delete source episodes and entities nothing else
        refers to."""
        predicate = scope_predicate(Predicate().add("m.id = ?", memory_id), scope)
        with self._purging() as conn:
            rows = conn.execute(
                f"SELECT row_id, user_id, agent_id, run_id, subject_id, object_id FROM memories m "
                f"WHERE {predicate.sql}",
                predicate.params,
            ).fetchall()
            if not rows:
                raise not_found(memory_id, scope)
            counts = self._delete_rows(conn, [row[0] for row in rows])
            # Entity names are content too: those no other memory points at go with it.
            entity_ids = json.dumps(list({ref for row in rows for ref in row[4:6] if ref}))
            counts["entities"] = conn.execute(
                "DELETE FROM entities WHERE id IN (SELECT value FROM json_each(?)) "
                "AND id NOT IN (SELECT subject_id FROM memories WHERE subject_id IS NOT NULL) "
                "AND id NOT IN (SELECT object_id FROM memories WHERE object_id IS NOT NULL)",
                (entity_ids,),
            ).rowcount
            episode_ids = [
                row[0]
                for row in conn.execute(
                    "SELECT episode_id FROM memory_sources WHERE memory_id = ?", (memory_id,)
                )
            ]
            counts["sources"] = conn.execute(
                "DELETE FROM memory_sources WHERE memory_id = ?", (memory_id,)
            ).rowcount
            counts["episodes"] = conn.execute(
                "DELETE FROM episodes WHERE id IN (SELECT value FROM json_each(?)) "
                "AND id NOT IN (SELECT episode_id FROM memory_sources)",
                (json.dumps(episode_ids),),
            ).rowcount
            counts["events_erased"] = conn.execute(
                "UPDATE memory_events SET old_content = NULL, new_content = NULL, reason = NULL, "
                "metadata = '{}' WHERE memory_id = ?",
                (memory_id,),
            ).rowcount
            _, user_id, agent_id, run_id = rows[0][:4]
            conn.execute(
                "INSERT INTO memory_events (memory_id, user_id, agent_id, run_id, event, actor, "
                "created_at) VALUES (?, ?, ?, ?, 'DELETE', ?, ?)",
                (memory_id, user_id, agent_id, run_id, actor, now_db()),
            )
        return DeleteResult(counts=counts)

    def scope(self, scope: Scope) -> DeleteResult:
        """Delete everything stored for a scope: memories, vectors, keyword entries, sources,
        episodes, events, entities, blocks and write-run logs."""
        memories = scope_predicate(Predicate(), scope)
        with self._purging() as conn:
            rows = conn.execute(
                f"SELECT row_id, id FROM memories m WHERE {memories.sql}", memories.params
            ).fetchall()
            row_ids = [row[0] for row in rows]
            memory_ids = list({row[1] for row in rows})
            counts = self._delete_rows(conn, row_ids)
            counts["sources"] = conn.execute(
                "DELETE FROM memory_sources WHERE memory_id IN (SELECT value FROM json_each(?))",
                (json.dumps(memory_ids),),
            ).rowcount
            for table in ("episodes", "memory_events", "entities", "blocks", "write_runs"):
                predicate = scope_predicate(Predicate(), scope, alias="t")
                counts[table] = conn.execute(
                    f"DELETE FROM {table} AS t WHERE {predicate.sql}", predicate.params
                ).rowcount
        return DeleteResult(counts=counts)
