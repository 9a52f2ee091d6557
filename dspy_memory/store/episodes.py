"""Episodes: the raw input, written before any processing (the write-ahead log of memory)."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import Predicate, from_row, scope_predicate, unexpired
from dspy_memory.store.turns import TurnContext
from dspy_memory.types import Episode, Scope
from dspy_memory.util.timeutil import now_db, to_db

_EPISODE_COLUMNS = (
    "id, user_id, agent_id, run_id, source, role, name, content, metadata, occurred_at, "
    "ingested_at, status, error, attempts, infer, expires_at"
)


def _episode_from_row(row: Any) -> Episode:
    return from_row(Episode, row, infer=bool(row["infer"]))


class Claim(NamedTuple):
    """Who is processing an episode, and until when (db time)."""

    token: str
    expires_at: str


class Unfinished(NamedTuple):
    """Episodes left pending or failed, with the claim each carries (None: free), and the rows
    that could not be read as episodes (id, why), which are skipped."""

    episodes: list[Episode]
    claims: dict[str, Claim | None]
    unreadable: list[tuple[str, str]]


class EpisodeLog:
    def __init__(self, conns: Connections, turn_context: TurnContext, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log
        self._turn_context = turn_context

    def insert(self, episodes: Sequence[Episode], *, claim: Claim | None = None) -> None:
        """Write episodes in their own transaction; `claim` holds them for the writer that is
        about to process them."""
        token, expires = claim if claim is not None else (None, None)
        with self._conns.transaction() as conn:
            self._conns.insert_rows(
                conn,
                "episodes",
                (*_EPISODE_COLUMNS.split(", "), "claimed_by", "claim_expires_at"),
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
                        to_db(e.expires_at),
                        token if e.status != "done" else None,
                        expires if e.status != "done" else None,
                    )
                    for e in episodes
                ],
            )
            # Raw turns already stored whose context window reaches a new episode include it.
            self._turn_context.episodes_added(conn, [e.id for e in episodes])
            by_scope: dict[Scope, int] = {}
            for episode in episodes:
                by_scope[episode.scope] = by_scope.get(episode.scope, 0) + 1
            for scope, count in by_scope.items():
                self._audit.record("add_episodes", scope=scope, counts={"episodes": count})

    def mark(self, ids: Sequence[str], status: str, error: str | None = None) -> None:
        """Record the outcome of a processing attempt; the episodes' claims end with it. Status
        and claims are not in the audit log: bookkeeping of the write path's retries, while what
        the attempt changed is logged by the change itself (store/audit_log.py)."""
        with self._conns.transaction() as conn:
            # One statement for the batch: one per episode cost 4% of an add of 1,000 raw turns.
            conn.execute(
                "UPDATE episodes SET status = ?, error = ?, attempts = attempts + 1, claimed_by = NULL, "
                "claim_expires_at = NULL WHERE id IN (SELECT value FROM json_each(?))",
                (status, error, json.dumps(list(ids))),
            )

    def claim(self, claims: dict[str, Claim | None], claim: Claim) -> list[str]:
        """Take the episodes of `claims` whose claim is still the one given there (compare and
        set, so two writers never both win) and that are not done; returns the ids taken."""
        taken = []
        with self._conns.transaction() as conn:
            for episode_id, seen in claims.items():
                cursor = conn.execute(
                    "UPDATE episodes SET claimed_by = ?, claim_expires_at = ? WHERE id = ? "
                    "AND status != 'done' AND claimed_by IS ? AND claim_expires_at IS ?",
                    (claim.token, claim.expires_at, episode_id, *(seen or (None, None))),
                )
                if cursor.rowcount:
                    taken.append(episode_id)
        return taken

    def renew(self, ids: Sequence[str], claim: Claim) -> None:
        """Extend the writer's claim on episodes it holds."""
        with self._conns.transaction() as conn:
            conn.execute(
                "UPDATE episodes SET claim_expires_at = ? WHERE id IN (SELECT value FROM json_each(?)) "
                "AND claimed_by = ?",
                (claim.expires_at, json.dumps(list(ids)), claim.token),
            )

    def release(self, ids: Sequence[str] | None, token: str) -> None:
        """Free the episodes of `ids` (None: all) that `token` still holds."""
        with self._conns.transaction() as conn:
            if ids is None:
                conn.execute(
                    "UPDATE episodes SET claimed_by = NULL, claim_expires_at = NULL WHERE claimed_by = ?",
                    (token,),
                )
                return
            conn.execute(
                "UPDATE episodes SET claimed_by = NULL, claim_expires_at = NULL "
                "WHERE id IN (SELECT value FROM json_each(?)) AND claimed_by = ?",
                (json.dumps(list(ids)), token),
            )

    def held(self, ids: Sequence[str], token: str) -> set[str]:
        """Which of these episodes the writer `token` holds (not done). Inside the caller's write
        transaction this is the last word: nobody else can take them before it commits."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT id FROM episodes WHERE id IN (SELECT value FROM json_each(?)) "
                "AND claimed_by = ? AND status != 'done'",
                (json.dumps(list(ids)), token),
            ).fetchall()
        return {row[0] for row in rows}

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
        """Episodes of a scope in time order (`before`: that occurred at or before a time), but
        not those that expired."""
        predicate = unexpired(scope_predicate(Predicate(), scope, alias="e"), "e")
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

    def unfinished(self, *, ingested_before: str, limit: int = 1000) -> Unfinished:
        """Episodes left pending or failed, oldest first (the write-ahead log to replay). A row
        that cannot be read (a bad timestamp written by an older version) is skipped and
        reported, so one bad row never stops the others from being replayed. Expired ones are
        left to maintenance, which erases them: no LM reads what expired. `limit` is checked
        by the facade (`Memory.reprocess`): SQLite reads a negative LIMIT as none, and one past
        2**63 - 1 cannot be bound."""
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_EPISODE_COLUMNS}, claimed_by, claim_expires_at FROM episodes "
                "WHERE status != 'done' AND ingested_at < ? AND (expires_at IS NULL OR expires_at > ?) "
                "ORDER BY ingested_at, rowid LIMIT ?",
                (ingested_before, now_db(), limit),
            ).fetchall()
        found = Unfinished([], {}, [])
        for row in rows:
            try:
                episode = _episode_from_row(row)
            except (ValueError, TypeError) as exc:
                found.unreadable.append((row["id"], f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
                continue
            found.episodes.append(episode)
            claimed = row["claimed_by"] is not None
            found.claims[episode.id] = Claim(row["claimed_by"], row["claim_expires_at"]) if claimed else None
        return found

    def present(self, episode_ids: Sequence[str]) -> tuple[set[str], Unfinished]:
        """Which of these episodes the file holds: the ids of those nothing is left to do for
        (done, or expired: maintenance erases them), and the unfinished ones (pending or failed)
        with their claims, for a writer to take over (bulk ingestion run again)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                f"SELECT {_EPISODE_COLUMNS}, claimed_by, claim_expires_at FROM episodes "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        settled, found, now = set(), Unfinished([], {}, []), now_db()
        for row in rows:
            if row["status"] == "done" or (row["expires_at"] is not None and row["expires_at"] <= now):
                settled.add(row["id"])
                continue
            try:
                episode = _episode_from_row(row)
            except (ValueError, TypeError) as exc:
                settled.add(row["id"])  # there, and reported; reprocess() is where it is fixed
                found.unreadable.append((row["id"], f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
                continue
            found.episodes.append(episode)
            claimed = row["claimed_by"] is not None
            found.claims[episode.id] = Claim(row["claimed_by"], row["claim_expires_at"]) if claimed else None
        return settled, found

    def current_turns(self, episode_ids: Sequence[str]) -> dict[str, builtins.list[str]]:
        """{episode id: ids of the current raw `turn` memories made from it}, for the episodes
        that have any (inside a transaction: as the transaction sees it)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT s.episode_id, m.id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                "WHERE s.episode_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn' "
                "AND m.expired_at IS NULL",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        turns: dict[str, list[str]] = {}
        for episode_id, memory_id in rows:
            turns.setdefault(episode_id, []).append(memory_id)
        return turns

    def with_memories(self, episode_ids: Sequence[str]) -> set[str]:
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT episode_id FROM memory_sources "
                "WHERE episode_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(episode_ids)),),
            ).fetchall()
        return {row[0] for row in rows}
