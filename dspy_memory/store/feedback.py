"""Feedback (docs/feedback.md): labelled examples of what the write program got wrong or right,
kept with the scope of what they are about. Rows hold the person's words (`note`, `expected`),
so erasure treats them as content (store/erase.py); the audit log gets an entry per record with
its source and verdict only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dspy_memory.store.audit_log import AuditLog, scope_of
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import Predicate, from_row, not_about_expired, scope_predicate
from dspy_memory.store.runs import WriteRunLog
from dspy_memory.types import FeedbackRecord, MemoryRecord, Scope
from dspy_memory.util.timeutil import now_db

COLUMNS = (
    "id", "user_id", "agent_id", "run_id", "source", "verdict", "memory_id", "memory_version",
    "write_run_id", "op_index", "note", "expected", "actor", "created_at",
)  # fmt: skip
_SELECT = ", ".join(f"f.{column}" for column in COLUMNS)


class NewFeedback(NamedTuple):
    """A feedback record to write; `add` gives it an id and a time."""

    scope: Scope
    source: str
    expected: Mapping[str, Any]
    actor: str
    verdict: str | None = None
    memory_id: str | None = None
    memory_version: int | None = None
    write_run_id: str | None = None
    op_index: int | None = None
    note: str | None = None


def _record(row: Any) -> FeedbackRecord:
    return from_row(FeedbackRecord, row, expected=json.loads(row["expected"]))


class FeedbackLog:
    def __init__(self, conns: Connections, runs: WriteRunLog, audit_log: AuditLog) -> None:
        self._conns = conns
        self._runs = runs
        self._audit = audit_log

    def add(self, drafts: Sequence[NewFeedback]) -> list[FeedbackRecord]:
        """Write feedback records, each with its audit entry (source and verdict, never the
        note). Joins the caller's transaction, so a record commits with the change it is about."""
        rows = [
            {
                **{column: getattr(draft, column, None) for column in COLUMNS},
                **draft.scope.model_dump(),
                "id": str(uuid.uuid4()),
                "expected": json.dumps(dict(draft.expected), ensure_ascii=False, sort_keys=True),
                "created_at": now_db(),
            }
            for draft in drafts
        ]
        with self._conns.transaction() as conn:
            conn.executemany(
                f"INSERT INTO feedback ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                [tuple(row[column] for column in COLUMNS) for row in rows],
            )
            for draft in drafts:
                details: dict[str, str | int | None] = {"source": draft.source, "verdict": draft.verdict}
                if draft.write_run_id is not None:
                    details |= {"write_run_id": draft.write_run_id, "op_index": draft.op_index}
                self._audit.record(
                    "feedback",
                    scope=draft.scope,
                    role="system" if draft.actor == "validator" else "user",
                    counts={"feedback": 1},
                    memory_ids=[draft.memory_id] if draft.memory_id else [],
                    details=details,
                )
        return [_record(row) for row in rows]

    def about(
        self,
        record: MemoryRecord,
        *,
        source: str,
        expected: Mapping[str, Any],
        actor: str = "user",
        verdict: str | None = None,
        note: str | None = None,
    ) -> FeedbackRecord:
        """Feedback on one version of a memory, naming the write run and operation that made
        that version (none when no LM run made it: a raw turn, a correction by hand). Joins the
        caller's transaction."""
        made = self._runs.made(record.id, record.version)
        draft = NewFeedback(
            scope=scope_of(record),
            source=source,
            expected=expected,
            actor=actor,
            verdict=verdict,
            memory_id=record.id,
            memory_version=record.version,
            write_run_id=made[0] if made else None,
            op_index=made[1] if made else None,
            note=note,
        )
        return self.add([draft])[0]

    def list(
        self,
        scope: Scope | None,
        *,
        source: str | None = None,
        memory_id: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[FeedbackRecord]:
        """Feedback of a scope (read as `get_all` reads it; None: every scope), newest first
        (limit=None: all of it), but none about a memory that expired (it may quote it)."""
        predicate = not_about_expired(scope_predicate(Predicate(), scope, alias="f"), "f.memory_id")
        for column, value in (("source", source), ("memory_id", memory_id)):
            if value is not None:
                predicate.add(f"f.{column} = ?", value)
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_SELECT} FROM feedback f WHERE {predicate.sql} "
                "ORDER BY f.created_at DESC, f.id DESC LIMIT ? OFFSET ?",
                [*predicate.params, 2**62 if limit is None else limit, offset],
            ).fetchall()
        return [_record(row) for row in rows]

    def get(self, feedback_id: str, *, scope: Scope | None) -> FeedbackRecord | None:
        """One feedback record if it belongs to `scope` (None: any scope), unless it is about a
        memory that expired."""
        predicate = scope_predicate(Predicate().add("f.id = ?", feedback_id), scope, alias="f")
        not_about_expired(predicate, "f.memory_id")
        with self._conns.read() as conn:
            row = conn.execute(
                f"SELECT {_SELECT} FROM feedback f WHERE {predicate.sql}", predicate.params
            ).fetchone()
        return _record(row) if row else None
