"""Episodes: the raw input, written before any processing (the write-ahead log of memory)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dspy_memory.store.connection import Connections
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.timeutil import to_db
from dspy_memory.types import Episode, Scope

_EPISODE_COLUMNS = (
    "id, user_id, agent_id, run_id, source, role, name, content, metadata, occurred_at, "
    "ingested_at, status, error, attempts, infer"
)


def _episode_from_row(row: Any) -> Episode:
    return Episode(
        id=row[0],
        user_id=row[1],
        agent_id=row[2],
        run_id=row[3],
        source=row[4],
        role=row[5],
        name=row[6],
        content=row[7],
        metadata=json.loads(row[8]),
        occurred_at=row[9],
        ingested_at=row[10],
        status=row[11],
        error=row[12],
        attempts=row[13],
        infer=bool(row[14]),
    )


class EpisodeLog:
    def __init__(self, conns: Connections) -> None:
        self._conns = conns

    def insert(self, episodes: Sequence[Episode]) -> None:
        with self._conns.transaction() as conn:
            conn.executemany(
                f"INSERT INTO episodes ({_EPISODE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.id,
                        e.user_id,
                        e.agent_id,
                        e.run_id,
                        e.source,
                        e.role,
                        e.name,
                        e.content,
                        json.dumps(e.metadata),
                        to_db(e.occurred_at),
                        to_db(e.ingested_at),
                        e.status,
                        e.error,
                        e.attempts,
                        int(e.infer),
                    )
                    for e in episodes
                ],
            )

    def mark(self, ids: Sequence[str], status: str, error: str | None = None) -> None:
        with self._conns.transaction() as conn:
            conn.executemany(
                "UPDATE episodes SET status = ?, error = ?, attempts = attempts + 1 WHERE id = ?",
                [(status, error, episode_id) for episode_id in ids],
            )

    def get_many(self, episode_ids: Sequence[str]) -> list[Episode]:
        """Episodes by id, in the order given (missing ids are skipped)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        by_id = {row[0]: _episode_from_row(row) for row in rows}
        return [by_id[episode_id] for episode_id in episode_ids if episode_id in by_id]

    def list(
        self,
        scope: Scope,
        *,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = False,
        before: str | None = None,
    ) -> list[Episode]:
        """Episodes of a scope in time order (`before`: that occurred at or before a time)."""
        predicate = scope_predicate(Predicate(), scope, alias="e")
        if before is not None:
            predicate.add("e.occurred_at <= ?", before)
        order = "DESC" if newest_first else "ASC"
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes e WHERE {predicate.sql} "
                f"ORDER BY occurred_at {order}, ingested_at {order}, rowid {order} LIMIT ? OFFSET ?",
                [*predicate.params, limit, offset],
            ).fetchall()
        return [_episode_from_row(row) for row in rows]

    def unfinished(self, *, ingested_before: str, limit: int = 1000) -> list[Episode]:
        """Episodes left pending or failed, oldest first (the write-ahead log to replay)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE status != 'done' "
                "AND ingested_at < ? ORDER BY ingested_at, rowid LIMIT ?",
                (ingested_before, limit),
            ).fetchall()
        return [_episode_from_row(row) for row in rows]

    def turn_memories(self, episode_ids: Sequence[str]) -> list[str]:
        """Ids of the current raw `turn` memories made from these episodes."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT m.id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                "WHERE s.episode_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn' "
                "AND m.expired_at IS NULL",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        return [row[0] for row in rows]

    def with_memories(self, episode_ids: Sequence[str]) -> set[str]:
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT episode_id FROM memory_sources "
                "WHERE episode_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        return {row[0] for row in rows}
