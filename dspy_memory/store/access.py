"""Recall statistics of memory rows (access counts, last access): what the forgetting curve
reads (lifecycle/curve.py). Mixed into Store."""

from __future__ import annotations

from collections.abc import Sequence

from dspy_memory.store.backend import Connections


class AccessStatistics:
    _conns: Connections

    def last_row_id(self) -> int:
        """The newest memory row so far: rows written later have larger ids (AUTOINCREMENT)."""
        with self._conns.read() as conn:
            return int(conn.execute("SELECT coalesce(max(row_id), 0) FROM memories").fetchone()[0])

    def record_access(self, counts: Sequence[tuple[int, int, str]]) -> bool:
        """Add recalls to rows: (row_id, times recalled, last recall time), if the file can be
        written at once; False (nothing written) when another writer holds it. The forgetting
        curve uses these statistics; they are never worth making a read wait."""
        if not counts:
            return True
        # Not in the audit log: a statistic of use, not a change of what anyone said or decided,
        # and an entry here would add a chained write to every read (store/audit_log.py).
        with self._conns.transaction_if_free() as conn:
            if conn is None:
                return False
            conn.executemany(
                "UPDATE memories SET access_count = access_count + ?, "
                "last_accessed_at = CASE WHEN last_accessed_at > ? THEN last_accessed_at ELSE ? END WHERE row_id = ?",
                [(count, at, at, row_id) for row_id, count, at in counts],
            )
        return True
