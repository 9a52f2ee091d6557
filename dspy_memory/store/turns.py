"""Raw turns by text and time: the same text said in the same scope at the same time is one
memory. Joins the caller's write transaction."""

from __future__ import annotations

from collections.abc import Sequence

from dspy_memory.store.connection import Connections
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import now_db


class RawTurns:
    def __init__(self, conns: Connections) -> None:
        self._conns = conns

    def current(self, keys: Sequence[tuple[Scope, str, str | None]]) -> list[tuple[int, str] | None]:
        """For each (exact scope, content hash, valid_at): the (row id, id) of the current
        version of a memory that was stored as a raw `turn` with exactly that scope, text and
        time (in any version: a corrected turn is still the memory of that input), else None.
        Read inside the caller's write transaction, so a concurrent writer's turn is seen."""
        found: list[tuple[int, str] | None] = []
        with self._conns.transaction() as conn:
            for scope, content_hash, valid_at in keys:
                row = conn.execute(
                    "SELECT cur.row_id, cur.id FROM memories m INDEXED BY memories_turns "
                    "JOIN memories cur ON cur.id = m.id AND cur.expired_at IS NULL "
                    "WHERE m.kind = 'turn' AND m.content_hash = ? AND m.valid_at IS ? "
                    "AND m.user_id IS ? AND m.agent_id IS ? AND m.run_id IS ? "
                    "ORDER BY cur.row_id LIMIT 1",
                    (content_hash, valid_at, scope.user_id, scope.agent_id, scope.run_id),
                ).fetchone()
                found.append((row[0], row[1]) if row else None)
        return found

    def restated(self, row_id: int, memory_id: str, episode_ids: Sequence[str]) -> None:
        """A raw turn was given again: link the new episodes to it and count each as a recall."""
        at = now_db()
        with self._conns.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO memory_sources (memory_id, episode_id, created_at) VALUES (?, ?, ?)",
                [(memory_id, episode_id, at) for episode_id in episode_ids],
            )
            conn.execute(
                "UPDATE memories SET access_count = access_count + ?, "
                "last_accessed_at = max(ifnull(last_accessed_at, ''), ?) WHERE row_id = ?",
                (len(episode_ids), at, row_id),
            )
