"""The memory lifecycle's rows: what maintenance reads (current memories with their recall
statistics, clusters with their vectors), archiving and restoring, pins, compaction settings per
scope, and consolidation (merge, summarize) in one transaction. Mixed into Store; every method
joins the caller's transaction when there is one. The decisions are made in lifecycle/."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspy_memory.errors import WriteConflictError
from dspy_memory.store.audit_log import scope_of
from dspy_memory.store.feedback import FeedbackLog
from dspy_memory.store.queries import (
    MEMORY_COLUMNS,
    MEMORY_FROM,
    Predicate,
    TimeView,
    not_found,
    record_from_row,
    scope_predicate,
    unexpired,
)
from dspy_memory.store.retention import earliest
from dspy_memory.store.settings import ScopeKey
from dspy_memory.store.writes import MemoryWrites, NewMemory
from dspy_memory.types import MemoryRecord, Scope
from dspy_memory.util.timeutil import now_db


@dataclass(frozen=True)
class DecayRow:
    """What the forgetting curve needs of a current memory."""

    row_id: int
    id: str
    scope: ScopeKey
    kind: str
    importance: float
    strength: float
    recalls: int
    recalled_at: str  # the last recall, or, never recalled, when it was stored
    created_at: str
    archived_at: str | None


class LifecycleRows(MemoryWrites):
    """Built on MemoryWrites: consolidation inserts and expires memories, restoring logs events."""

    feedback: FeedbackLog

    # -- reading ---------------------------------------------------------------------------

    def decay_rows(
        self,
        *,
        after_row_id: int,
        limit: int,
        protected_kinds: Sequence[str],
        archived: bool = False,
        scope: Scope | None = None,
        at: str | None = None,
    ) -> list[DecayRow]:
        """Current memories (believed and true at `at`), not pinned and not of `protected_kinds`,
        active ones (or, `archived`, archived ones), by row id after `after_row_id`."""
        at = at or now_db()
        predicate = scope_predicate(Predicate(), scope)
        predicate.add("m.row_id > ? AND m.expired_at IS NULL AND m.pinned = 0", after_row_id)
        predicate.add("m.invalid_at IS NULL OR m.invalid_at > ?", at)
        predicate.add("m.kind NOT IN (SELECT value FROM json_each(?))", json.dumps(list(protected_kinds)))
        predicate.add("m.archived_at IS NOT NULL" if archived else "m.archived_at IS NULL")
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT m.row_id, m.id, m.user_id, m.agent_id, m.run_id, m.kind, m.importance, m.strength, "
                "m.access_count, coalesce(m.last_accessed_at, m.created_at) AS recalled_at, m.created_at, "
                f"m.archived_at FROM memories m WHERE {predicate.sql} ORDER BY m.row_id LIMIT ?",
                [*predicate.params, limit],
            ).fetchall()
        return [
            DecayRow(
                row_id=row["row_id"],
                id=row["id"],
                scope=(row["user_id"], row["agent_id"], row["run_id"]),
                kind=row["kind"],
                importance=row["importance"],
                strength=row["strength"],
                recalls=row["access_count"],
                recalled_at=row["recalled_at"],
                created_at=row["created_at"],
                archived_at=row["archived_at"],
            )
            for row in rows
        ]

    def consolidation_pool(
        self, scope: ScopeKey, *, kinds: Sequence[str], limit: int, archived: bool = False
    ) -> list[tuple[MemoryRecord, np.ndarray]]:
        """Current, unpinned memories of exactly one scope with their vectors, newest first:
        what consolidation clusters."""
        at = now_db()
        predicate = Predicate()
        for column, value in zip(("user_id", "agent_id", "run_id"), scope):
            predicate.add(f"m.{column} IS ?", value)
        predicate.add("m.expired_at IS NULL AND m.pinned = 0")
        predicate.add("m.invalid_at IS NULL OR m.invalid_at > ?", at)
        predicate.add("m.kind IN (SELECT value FROM json_each(?))", json.dumps(list(kinds)))
        predicate.add("m.archived_at IS NOT NULL" if archived else "m.archived_at IS NULL")
        view = TimeView(as_of=at, known_at=at)
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS}, v.embedding FROM {MEMORY_FROM} "
                f"JOIN memory_vectors v ON v.row_id = m.row_id WHERE {predicate.sql} "
                "ORDER BY m.row_id DESC LIMIT ?",
                [*predicate.params, limit],
            ).fetchall()
        return [(record_from_row(row, view), self.vectors.decode(row["embedding"])) for row in rows]

    def scopes(self, scope: Scope | None = None) -> list[ScopeKey]:
        """The exact scopes that hold memories within `scope` (read as search reads it; None:
        every scope)."""
        predicate = scope_predicate(Predicate(), scope)
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT m.user_id, m.agent_id, m.run_id FROM memories m WHERE {predicate.sql}",
                predicate.params,
            ).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    # -- archive, restore, pin -------------------------------------------------------------

    def archive(
        self, items: Sequence[tuple[int, dict[str, Any]]], *, actor: str, reason: str, at: str
    ) -> int:
        """Archive active current rows, each with a DECAY event holding `metadata` (the curve's
        numbers). Rows changed meanwhile (a new version, archived already) are left alone."""
        archived = 0
        by_scope: dict[Scope, list[str]] = {}
        with self.transaction() as conn:
            for row_id, metadata in items:
                changed = conn.execute(
                    "UPDATE memories SET archived_at = ? WHERE row_id = ? AND archived_at IS NULL "
                    "AND expired_at IS NULL AND pinned = 0",
                    (at, row_id),
                ).rowcount
                if changed:
                    row = conn.execute(
                        f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE m.row_id = ?", (row_id,)
                    ).fetchone()
                    self.log_event(conn, row, "DECAY", actor=actor, reason=reason, metadata=metadata, at=at)
                    by_scope.setdefault(scope_of(row), []).append(row["id"])
                    archived += 1
            for scope, ids in by_scope.items():
                self.audit_log.record(
                    "archive", scope=scope, role=actor, counts={"archive": len(ids)}, memory_ids=ids
                )
        return archived

    def restore(
        self,
        memory_id: str,
        *,
        scope: Scope | None,
        actor: str,
        reason: str | None = None,
        metadata: dict[str, Any] | None = None,
        recall: bool = True,
        at: str | None = None,
        feedback: bool = False,
    ) -> tuple[MemoryRecord, bool]:
        """Make an archived memory active again (a RESTORE event); `recall`: it counts as a
        recall, so the next maintenance does not archive it at once. `feedback`: a person asked,
        so archiving it was a mistake: a "restore" feedback record names what archived it.
        Returns (the record, whether it was archived)."""
        at = at or now_db()
        with self.transaction() as conn:
            row = self._current(conn, memory_id, scope)
            was_archived = row["archived_at"] is not None
            if was_archived and feedback:
                self._restore_feedback(conn, row, reason)
            if was_archived:
                recalled = ", access_count = access_count + 1, last_accessed_at = ?" if recall else ""
                conn.execute(
                    f"UPDATE memories SET archived_at = NULL{recalled} WHERE row_id = ?",
                    (at, row["row_id"]) if recall else (row["row_id"],),
                )
                self.log_event(conn, row, "RESTORE", actor=actor, reason=reason, metadata=metadata, at=at)
                self.audit_log.record(
                    "restore", scope=scope_of(row), role=actor, counts={"restore": 1}, memory_ids=[memory_id]
                )
                row = self._current(conn, memory_id, scope)
        return record_from_row(row, TimeView(as_of=at, known_at=at)), was_archived

    def _restore_feedback(self, conn: Any, row: Any, reason: str | None) -> None:
        archived = conn.execute(
            "SELECT event, reason FROM memory_events WHERE memory_id = ? AND event = 'DECAY' ORDER BY id DESC LIMIT 1",
            (row["id"],),
        ).fetchone()
        expected = {"status": "active", "archived_by": archived["event"] if archived else None}
        if archived is not None and archived["reason"]:
            expected["archive_reason"] = archived["reason"]  # "forgotten", "summarized": ours, not content
        record = record_from_row(row, TimeView.at())
        self.feedback.about(record, source="restore", note=reason, expected=expected)

    def set_pinned(self, memory_id: str, *, scope: Scope | None, pinned: bool) -> MemoryRecord:
        """Pin a memory (it never decays; pinning an archived one restores it) or unpin it."""
        at = now_db()
        with self.transaction() as conn:
            row = self._current(conn, memory_id, scope)
            if pinned and row["archived_at"] is not None:
                self.restore(memory_id, scope=scope, actor="user", reason="pinned", at=at, feedback=True)
            conn.execute("UPDATE memories SET pinned = ? WHERE id = ?", (int(pinned), row["id"]))
            operation = "pin" if pinned else "unpin"
            self.audit_log.record(
                operation, scope=scope_of(row), counts={operation: 1}, memory_ids=[row["id"]]
            )
            row = self._current(conn, memory_id, scope)
        return record_from_row(row, TimeView(as_of=at, known_at=at))

    def current_row_id(self, memory_id: str, *, scope: Scope | None) -> int | None:
        """The row of a memory's current version (for counting a recall of it), or None."""
        predicate = unexpired(
            scope_predicate(Predicate().add("m.id = ? AND m.expired_at IS NULL", memory_id), scope)
        )
        with self._conns.read() as conn:
            row = conn.execute(
                f"SELECT m.row_id FROM memories m WHERE {predicate.sql} ORDER BY m.version DESC LIMIT 1",
                predicate.params,
            ).fetchone()
        return row[0] if row else None

    @staticmethod
    def _current(conn: Any, memory_id: str, scope: Scope | None) -> Any:
        """The current row of a memory (to pin, restore or read), unless it expired."""
        predicate = unexpired(
            scope_predicate(Predicate().add("m.id = ? AND m.expired_at IS NULL", memory_id), scope)
        )
        row = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE {predicate.sql} ORDER BY m.version DESC LIMIT 1",
            predicate.params,
        ).fetchone()
        if row is None:
            raise not_found(memory_id, scope)
        return row

    def _check_versions(self, conn: Any, sources: Sequence[MemoryRecord]) -> list[Any]:
        """The current rows of `sources`, or WriteConflictError if one changed since it was read."""
        rows = []
        for record in sources:
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS}, m.subject_id, m.object_id FROM {MEMORY_FROM} "
                "WHERE m.id = ? AND m.expired_at IS NULL ORDER BY m.version DESC LIMIT 1",
                (record.id,),
            ).fetchone()
            if row is None or row["version"] != record.version or row["pinned"]:
                raise WriteConflictError(f"memory {record.id} changed since consolidation read it")
            rows.append(row)
        return rows

    def _source_episodes(self, conn: Any, memory_ids: Sequence[str]) -> list[str]:
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT episode_id FROM memory_sources WHERE memory_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(memory_ids)),),
            )
        ]

    def consolidate(
        self,
        sources: Sequence[MemoryRecord],
        new: NewMemory,
        *,
        relation: str,
        actor: str,
        reason: str | None,
        metadata: dict[str, Any],
    ) -> MemoryRecord:
        """One transaction: compare-and-set on the `sources` (the versions consolidation read),
        then insert `new`, link it to them (`relation`), and
        - "merged_from": `new` comes from the sources' episodes; expire the sources (superseded
          by `new`), a MERGE event on each and on `new`: they are replaced by one sentence;
          `history()` and `known_at` keep them;
        - "summarizes": archive the sources (DECAY events), an ADD event on `new`: the summary
          stands for them in default search; they stay reachable with include_archived."""
        at = now_db()
        ids = [record.id for record in sources]
        merged = relation == "merged_from"
        with self.transaction() as conn, self.audit_log.group("consolidate", scope=scope_of(new), role=actor):
            rows = self._check_versions(conn, sources)
            slots = {(row["subject_id"], row["predicate"], row["object_id"]) for row in rows}
            if merged and len(slots) == 1:  # one slot merged stays that slot's fact
                new.subject_id, new.predicate, new.object_id = slots.pop()
            # A merge stands for its parts, so it comes from their episodes; a summary points to
            # the memories it condenses (memory_links) and quotes no episode: erasing it must not
            # take the episodes of memories that stay.
            new.episode_ids = self._source_episodes(conn, ids) if merged else []
            # It quotes its sources: it expires when the first of them does (retention).
            new.expires_at = earliest(new.expires_at, *(row["expires_at"] for row in rows))
            self.insert_memories(
                [new],
                actor=actor,
                reason=reason,
                event="MERGE" if merged else "ADD",
                at=at,
                event_metadata={**metadata, relation: ids},
            )
            conn.executemany(
                "INSERT INTO memory_links (memory_id, linked_id, relation) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [(new.id, memory_id, relation) for memory_id in ids],
            )
            for row in rows:
                if merged:
                    self.expire(
                        row["id"],
                        scope=None,
                        actor=actor,
                        reason=reason,
                        superseded_by=new.id,
                        metadata={**metadata, "merged_into": new.id},
                        event="MERGE",
                        at=at,
                    )
                elif row["archived_at"] is None:
                    conn.execute("UPDATE memories SET archived_at = ? WHERE row_id = ?", (at, row["row_id"]))
                    self.log_event(
                        conn,
                        row,
                        "DECAY",
                        actor=actor,
                        reason="summarized",
                        metadata={"summary": new.id},
                        at=at,
                    )
                    self.audit_log.record("archive", counts={"archive": 1}, memory_ids=[row["id"]])
            created = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM {MEMORY_FROM} WHERE m.id = ? AND m.expired_at IS NULL",
                (new.id,),
            ).fetchone()
        return record_from_row(created, TimeView(as_of=at, known_at=at))

    def links(self, memory_id: str) -> dict[str, list[str]]:
        """{relation: ids} of what a consolidated memory was made from."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT relation, linked_id FROM memory_links WHERE memory_id = ? ORDER BY linked_id",
                (memory_id,),
            ).fetchall()
        found: dict[str, list[str]] = {}
        for row in rows:
            found.setdefault(row["relation"], []).append(row["linked_id"])
        return found
