"""The SQL of retention (docs/governance.md#retention): when new rows expire, and what is due for
erasure (the erasure itself is store/erase.py's; the policies are kept by store/settings.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dspy_memory.store.audit_log import AuditLog
from dspy_memory.store.backend import Connections
from dspy_memory.store.erase import Eraser
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.store.settings import ScopeKey
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import now_db

_EXACT = "user_id IS ? AND agent_id IS ? AND run_id IS ?"


def earliest(*times: str | None) -> str | None:
    """The earliest of some db times, None (never) counting as later than any."""
    return min(times, key=lambda when: when or "~", default=None)


def expiries(conn: Any, items: Sequence[Any]) -> list[str | None]:
    """When each new memory row (store/writes.py, NewMemory) expires: the earliest of its own
    `expires_at`, that of the episodes it came from and that of its memory's earlier versions
    (which take it too). What was made from input that expires goes with it, and a new version
    never outlives the text it revises. Inside the caller's transaction."""
    episode_ids = json.dumps(sorted({episode for item in items for episode in item.episode_ids}))
    episodes = {
        row["id"]: row["expires_at"]
        for row in conn.execute(
            "SELECT id, expires_at FROM episodes WHERE id IN (SELECT value FROM json_each(?)) "
            "AND expires_at IS NOT NULL",
            (episode_ids,),
        )
    }
    revised = json.dumps(sorted({item.id for item in items if item.version > 1}))
    earlier = {
        row["id"]: row["expires_at"]
        for row in conn.execute(
            "SELECT id, min(expires_at) AS expires_at FROM memories "
            "WHERE id IN (SELECT value FROM json_each(?)) AND expires_at IS NOT NULL GROUP BY id",
            (revised,),
        )
    }
    found = [
        earliest(item.expires_at, earlier.get(item.id), *(episodes.get(e) for e in item.episode_ids))
        for item in items
    ]
    # A memory's versions are erased together (store/erase.py), so they expire together: the
    # earlier ones of a version that expires sooner are not read past its expiry either.
    sooner = [(when, item.id, when) for item, when in zip(items, found) if item.version > 1 and when]
    if sooner:
        conn.executemany(
            "UPDATE memories SET expires_at = ? WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)",
            sooner,
        )
    return found


class RetentionRows:
    def __init__(self, conns: Connections, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log

    # -- what is due -----------------------------------------------------------------------

    def expired(self, scope: Scope | None, now: str) -> tuple[set[str], set[str]]:
        """(memory ids, episode ids) of `scope` (None: all) whose `expires_at` has passed."""
        predicate = scope_predicate(Predicate().add("t.expires_at <= ?", now), scope, alias="t")
        with self._conns.read() as conn:
            memories, episodes = (
                {
                    row[0]
                    for row in conn.execute(
                        f"SELECT DISTINCT t.id FROM {table} t WHERE {predicate.sql}", predicate.params
                    )
                }
                for table in ("memories", "episodes")
            )
        return memories, episodes

    def scopes(self, scope: Scope | None) -> list[ScopeKey]:
        """The exact scopes (user, agent, run) of `scope` that hold memories, episodes or blocks."""
        keys: set[ScopeKey] = set()
        with self._conns.read() as conn:
            for table in ("memories", "episodes", "blocks"):
                predicate = scope_predicate(Predicate(), scope, alias="t")
                rows = conn.execute(
                    f"SELECT DISTINCT t.user_id, t.agent_id, t.run_id FROM {table} t WHERE {predicate.sql}",
                    predicate.params,
                ).fetchall()
                keys.update((row["user_id"], row["agent_id"], row["run_id"]) for row in rows)
        return sorted(keys, key=lambda key: tuple(part or "" for part in key))

    def last_written(self, scope: ScopeKey) -> str | None:
        """When exactly this scope was last written to: its newest episode, memory version or
        block change (a run's last message)."""
        with self._conns.read() as conn:
            row = conn.execute(
                f"SELECT max(at) FROM (SELECT max(ingested_at) AS at FROM episodes WHERE {_EXACT} "
                f"UNION ALL SELECT max(created_at) FROM memories WHERE {_EXACT} "
                f"UNION ALL SELECT max(updated_at) FROM blocks WHERE {_EXACT}) AS latest",
                (*scope, *scope, *scope),
            ).fetchone()
        return row[0]

    def due(
        self, scope: ScopeKey, before: str, *, kinds: Sequence[str] | None, pinned: bool, blocks: bool
    ) -> tuple[set[str], set[str], set[str]]:
        """(memory ids, episode ids, block ids) of exactly this scope last written at or before
        `before`: memories of `kinds` (None: all) whose current version is that old, pinned ones
        only with `pinned`; the raw input (episodes) when `kinds` takes raw turns, but not
        episodes a writer holds now nor those of raw turns that stay; blocks (the profile too)
        only with `blocks`."""
        now = now_db()
        memories = Predicate().add(_EXACT, *scope).add("m.expired_at IS NULL AND m.created_at <= ?", before)
        if kinds is not None:
            memories.add("m.kind IN (SELECT value FROM json_each(?))", json.dumps(list(kinds)))
        if not pinned:
            memories.add("m.pinned = 0")
        with self._conns.read() as conn:
            memory_ids = {
                row[0]
                for row in conn.execute(f"SELECT m.id FROM memories m WHERE {memories.sql}", memories.params)
            }
            episode_ids: set[str] = set()
            if kinds is None or "turn" in kinds:
                episode_ids = {
                    row[0]
                    for row in conn.execute(
                        f"SELECT id FROM episodes WHERE {_EXACT} AND ingested_at <= ? "
                        "AND (claimed_by IS NULL OR claim_expires_at < ?)",
                        (*scope, before, now),
                    )
                }
                # A raw turn kept (pinned, or of a kind the policy keeps) keeps its episode:
                # erasing the episode would erase the turn made from it.
                kept_turns = conn.execute(
                    "SELECT DISTINCT s.episode_id, m.id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                    "WHERE s.episode_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn'",
                    (json.dumps(sorted(episode_ids)),),
                ).fetchall()
                episode_ids -= {row[0] for row in kept_turns if row[1] not in memory_ids}
            block_ids: set[str] = set()
            if blocks:
                block_ids = {
                    row[0]
                    for row in conn.execute(
                        f"SELECT id FROM blocks WHERE {_EXACT} AND updated_at <= ?", (*scope, before)
                    )
                }
        return memory_ids, episode_ids, block_ids

    # -- erasure ---------------------------------------------------------------------------

    def erase(
        self,
        eraser: Eraser,
        due: tuple[set[str], set[str], set[str]],
        *,
        scope: Scope | None,
        actor: str,
    ) -> dict[str, int]:
        """Erase what is due (memory ids, episode ids, block ids) in one transaction, with the
        closure of `delete` and one receipt with counts only; then make it unreachable in the
        database's files."""
        memory_ids, episode_ids, block_ids = due
        with self._conns.transaction() as conn:
            counts = eraser.due(memory_ids, episode_ids, actor=actor)
            blocks = json.dumps(sorted(block_ids))
            conn.execute(
                "DELETE FROM block_versions WHERE block_id IN (SELECT value FROM json_each(?))", (blocks,)
            )
            counts["blocks"] = conn.execute(
                "DELETE FROM blocks WHERE id IN (SELECT value FROM json_each(?))", (blocks,)
            ).rowcount
            self._audit.record("retention", scope=scope, role=actor, counts=counts)
        eraser.compact()
        return counts
