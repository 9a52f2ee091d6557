"""Checks of the file against the invariants of docs/architecture.md: the indexes agree with the
rows, no input was lost, one truth per slot, no memory was invalidated twice, no episode was
processed twice. Read-only; the same checks serve tests, `python -m evals.chaos` and operators
(`Memory.check()`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from dspy_memory.reports import AuditReport
from dspy_memory.store.backend import Backend
from dspy_memory.util.timeutil import now_db

# A fact that is believed and true now.
_CURRENT = (
    "m.expired_at IS NULL AND (m.invalid_at IS NULL OR m.invalid_at > ?) "
    "AND (m.valid_at IS NULL OR m.valid_at <= ?)"
)


def _count(conn: Any, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


def audit(backend: Backend, *, single_valued: Iterable[str], sample: int = 20) -> AuditReport:
    """Check the whole file in one read snapshot. `single_valued` are the predicates that hold
    one value at a time (two current facts of one subject contradict each other)."""
    now = now_db()
    with backend.conns.snapshot() as conn:
        integrity = backend.integrity(conn)
        rows = {"memories": _count(conn, "SELECT count(*) FROM memories"), **backend.index_rows(conn)}
        # Processing always counts an attempt; a done episode without one was logged on purpose
        # (Memory.log: kept in the episode log only). A memory from the episode holds it in any
        # version (a fact later corrected or replaced is history, still there for known_at), but
        # a raw turn only while it is current: a retired turn stands for nothing by itself.
        lost = [
            row[0]
            for row in conn.execute(
                "SELECT e.id FROM episodes e WHERE e.status = 'done' AND e.attempts > 0 "
                "AND trim(e.content) != '' AND NOT EXISTS (SELECT 1 FROM memory_sources s "
                "JOIN memories m ON m.id = s.memory_id WHERE s.episode_id = e.id "
                "AND (m.kind != 'turn' OR m.expired_at IS NULL))"
            )
        ]
        slots = [
            dict(zip(row.keys(), row))
            for row in conn.execute(
                "SELECT m.user_id, m.agent_id, m.run_id, e.name AS subject, m.predicate, "
                "count(DISTINCT m.id) AS current "
                "FROM memories m JOIN entities e ON e.id = m.subject_id "
                f"WHERE {_CURRENT} AND m.kind != 'turn' "
                "AND m.predicate IN (SELECT value FROM json_each(?)) "
                "GROUP BY m.user_id, m.agent_id, m.run_id, m.subject_id, e.name, m.predicate "
                "HAVING count(DISTINCT m.id) > 1 LIMIT ?",
                (now, now, json.dumps(sorted(single_valued)), sample),
            )
        ]
        twice = [
            row[0]
            for row in conn.execute(
                "SELECT memory_id FROM memory_events WHERE event = 'INVALIDATE' "
                "GROUP BY memory_id HAVING count(*) > 1 LIMIT ?",
                (sample,),
            )
        ]
        # The same fact made twice from one episode: the episode was processed twice.
        duplicated = [
            row[0]
            for row in conn.execute(
                "SELECT s.episode_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                f"WHERE {_CURRENT} GROUP BY s.episode_id, m.content_hash "
                "HAVING count(DISTINCT m.id) > 1 LIMIT ?",
                (now, now, sample),
            )
        ]
        statuses = dict(conn.execute("SELECT status, count(*) FROM episodes GROUP BY status").fetchall())
    mismatched = {name: count for name, count in rows.items() if count != rows["memories"]}
    return AuditReport(
        integrity="; ".join(integrity),
        rows=rows,
        index_mismatch=bool(mismatched),
        episodes=statuses,
        episodes_lost=len(lost),
        lost_sample=lost[:sample],
        slots_with_several_current=slots,
        invalidated_twice=twice,
        episodes_processed_twice=duplicated,
    )
