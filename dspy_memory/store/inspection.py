"""Store inspection: the file checked against the invariants, row counts. Mixed into Store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dspy_memory.reports import AuditReport
from dspy_memory.store.audit import audit
from dspy_memory.store.backend import Backend, Connections
from dspy_memory.util.timeutil import now_db


class Inspection:
    backend: Backend
    path: str
    _conns: Connections

    def embedder_info(self) -> tuple[str, int] | None:  # provided by Store
        raise NotImplementedError

    @property
    def backend_name(self) -> str:  # provided by Store
        raise NotImplementedError

    @property
    def driver_name(self) -> str:  # provided by Store
        raise NotImplementedError

    # -- inspection ---------------------------------------------------------------------------

    def audit(self, *, single_valued: Sequence[str]) -> AuditReport:
        """Check the file against the invariants (see store/audit.py)."""
        return audit(self.backend, single_valued=single_valued)

    def user_ids(self, *, limit: int = 2) -> list[str | None]:
        """Up to `limit` of the users whose input the file holds (None: input without a user)."""
        with self._conns.read() as conn:
            rows = conn.execute("SELECT DISTINCT user_id FROM episodes LIMIT ?", (limit,)).fetchall()
        return [row["user_id"] for row in rows]

    def stats(self) -> dict[str, Any]:
        """Row counts per table and the bound embedder."""
        tables = (
            "episodes",
            "memories",
            "memory_sources",
            "memory_events",
            "entities",
            "blocks",
            "write_runs",
            "feedback",
        )
        with self._conns.read() as conn:
            counts = {name: conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in tables}
            current, archived, pinned, expiring, past = conn.execute(
                "SELECT count(*), count(archived_at), sum(pinned), count(expires_at), "
                "count(CASE WHEN expires_at <= ? THEN 1 END) FROM memories WHERE expired_at IS NULL",
                (now_db(),),
            ).fetchone()
        info = self.embedder_info()
        return {
            "path": self.path,
            "backend": self.backend_name,
            "driver": self.driver_name,
            "embedder": info[0] if info else None,
            "dim": info[1] if info else None,
            "tables": counts,
            "current_memories": current,
            "archived_memories": archived,
            "pinned_memories": pinned or 0,
            # Retention (docs/governance.md#retention): memories that expire, and those past it
            # (no read returns them; the next maintain() erases them).
            "expiring_memories": expiring,
            "memories_past_expiry": past,
        }
