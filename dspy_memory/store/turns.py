"""Raw turns by text and time (the same text said in the same scope at the same time is one
memory), and the conversation context each raw turn is found by. Joins the caller's write
transaction."""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from dspy_memory.store.audit_log import AuditLog, scope_of
from dspy_memory.store.backend import Connections, KeywordIndex
from dspy_memory.store.queries import link_sources
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import format_db, from_db, now_db

# Hashes per lookup query (bound as one JSON array): bounds each query's IN-list and its rows.
_HASHES_PER_QUERY = 500


class RawTurns:
    def __init__(self, conns: Connections, audit_log: AuditLog) -> None:
        self._conns = conns
        self._audit = audit_log

    def current(
        self, keys: Sequence[tuple[Scope, str, str | None, str | None]]
    ) -> list[tuple[int, str] | None]:
        """For each (exact scope, content hash, valid_at, expires_at): the (row id, id) of the
        current version of a memory that was stored as a raw `turn` with exactly that scope,
        text, time and expiry, and has not expired (in any version: a corrected turn is still
        the memory of that input), else None. Read inside the caller's write transaction, so a concurrent writer's turn is seen. One
        query per scope and chunk of hashes, not per key: on PostgreSQL each statement is a
        round trip (one per turn was ~12% of an add of 1,000 turns)."""
        by_scope: dict[Scope, list[str]] = {}
        for scope, content_hash, _, _ in keys:
            by_scope.setdefault(scope, []).append(content_hash)
        held: dict[tuple[Scope, str, str | None, str | None], tuple[int, str]] = {}
        now = now_db()
        with self._conns.transaction() as conn:
            for scope, hashes in by_scope.items():
                distinct = sorted(set(hashes))
                for start in range(0, len(distinct), _HASHES_PER_QUERY):
                    chunk = distinct[start : start + _HASHES_PER_QUERY]
                    rows = conn.execute(
                        "SELECT m.content_hash, m.valid_at, cur.expires_at, cur.row_id, cur.id "
                        "FROM memories m INDEXED BY memories_turns "
                        "JOIN memories cur ON cur.id = m.id AND cur.expired_at IS NULL "
                        "AND (cur.expires_at IS NULL OR cur.expires_at > ?) "
                        "WHERE m.kind = 'turn' "
                        "AND substr(m.content_hash, 1, 16) IN (SELECT value FROM json_each(?)) "
                        "AND m.content_hash IN (SELECT value FROM json_each(?)) "
                        "AND m.user_id IS ? AND m.agent_id IS ? AND m.run_id IS ?",
                        (
                            now,
                            json.dumps([h[:16] for h in chunk]),
                            json.dumps(chunk),
                            scope.user_id,
                            scope.agent_id,
                            scope.run_id,
                        ),
                    ).fetchall()
                    for row in rows:
                        key = (scope, row["content_hash"], row["valid_at"], row["expires_at"])
                        row_id, memory_id = row["row_id"], row["id"]
                        if key not in held or row_id < held[key][0]:
                            held[key] = (row_id, memory_id)
        return [held.get(key) for key in keys]

    def restated(self, row_id: int, memory_id: str, episode_ids: Sequence[str]) -> None:
        """A raw turn was given again: link the new episodes to it and count each as a recall."""
        at = now_db()
        with self._conns.transaction() as conn:
            link_sources(conn, [(memory_id, episode_id, at) for episode_id in episode_ids])
            conn.execute(
                "UPDATE memories SET access_count = access_count + ?, "
                "last_accessed_at = CASE WHEN last_accessed_at > ? THEN last_accessed_at ELSE ? END WHERE row_id = ?",
                (len(episode_ids), at, at, row_id),
            )
            owner = conn.execute("SELECT user_id, agent_id, run_id FROM memories WHERE row_id = ?", (row_id,))
            self._audit.record(
                "confirm", scope=scope_of(owner.fetchone()), counts={"confirm": 1}, memory_ids=[memory_id]
            )


def _shifted(moment: datetime, delta: timedelta) -> str:
    """`moment` + `delta` in the stored format, held at the first or last representable time
    (a turn may be dated year 1 or 9999)."""
    try:
        return format_db(moment + delta)
    except OverflowError:
        return format_db(datetime.min if delta < timedelta(0) else datetime.max)


class TurnContext:
    """The keyword-index `context` of raw turns: the text of up to `before` episodes before the
    turn's episode and `after` after it, in the same exact scope, said within `gap_minutes` of
    it (episodes in (occurred_at, insertion) order).

    A reply often answers only together with its question ("Yes, last Tuesday"); with its
    neighbours' words in a separate, lower-weighted FTS column it is found by the question's
    words while a hit still names one turn. The memory's content and vector stay the turn's own
    (measured on LoCoMo: a window in the vector changed dense recall by 0.005).

    A new episode (a message, a logged step) joins the contexts of the few stored turns whose
    window reaches it (`episodes_added`); a new turn's context is written with its keyword entry
    (`contexts_of`, then `indexed` records the episodes it quotes). Those links (`turn_context`)
    let erasure rebuild every context that quoted an erased episode (`rebuild_after_erasure`).
    """

    def __init__(
        self, conns: Connections, keywords: KeywordIndex, *, before: int, after: int, gap_minutes: float
    ) -> None:
        self._conns = conns
        self._keywords = keywords
        self.before = before
        self.after = after
        self.gap = timedelta(minutes=gap_minutes)

    @property
    def enabled(self) -> bool:
        return bool(self.before or self.after)

    def contexts_of(self, conn: Any, episode_ids: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
        """{episode id: (the context text of a turn said in it, the episodes that text quotes)}."""
        if not self.enabled:
            return {episode_id: ("", []) for episode_id in episode_ids}
        windows = self._windows(conn, episode_ids, before=self.before, after=self.after)
        return {
            episode_id: (context_text(rows), [row["id"] for row in rows])
            for episode_id, rows in windows.items()
        }

    def episodes_added(self, conn: Any, episode_ids: Sequence[str]) -> int:
        """Rebuild the raw turns whose window now reaches one of these new episodes: those up to
        `after` places before it, and up to `before` places after it (history added out of
        order). Returns how many were rebuilt."""
        if not self.enabled or not episode_ids:
            return 0
        # The windows that reach an episode are its own window turned around.
        windows = self._windows(conn, episode_ids, before=self.after, after=self.before)
        reached = {row["id"] for rows in windows.values() for row in rows} - set(episode_ids)
        return self.rebuild(conn, self._turn_rows(conn, reached))

    def indexed(self, conn: Any, contexts: dict[int, tuple[str, list[str]]]) -> None:
        """New turn rows were inserted with `contexts` ({row id: (text, episode ids)}): record
        which episodes each quotes. A plain insert, no ON CONFLICT: on SQLite `turn_context` is a
        view (store/sqlite/migrations.py, 11), and a row's links are written once, after its old
        ones are deleted."""
        self._conns.insert_rows(
            conn,
            "turn_context",
            ("row_id", "episode_id"),
            [
                (row_id, episode_id)
                for row_id, (_, ids) in contexts.items()
                for episode_id in dict.fromkeys(ids)
            ],
        )

    def rebuild(self, conn: Any, row_ids: Iterable[int]) -> int:
        """Build the context of these rows (current raw turns; others get none) anew from the
        episodes around their first source episode. Returns how many rows were rebuilt."""
        wanted = sorted(set(row_ids))
        if not wanted:
            return 0
        first: dict[int, Any] = {}
        for anchor in conn.execute(
            f"SELECT m.row_id, {_ANCHOR_COLUMNS} FROM memories m JOIN memory_sources s ON s.memory_id = m.id "
            "JOIN episodes e ON e.id = s.episode_id "
            "WHERE m.row_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn' "
            "AND m.expired_at IS NULL ORDER BY m.row_id, e.rowid",
            (json.dumps(wanted),),
        ).fetchall():
            first.setdefault(anchor["row_id"], anchor)
        windows = (
            self._windows(
                conn,
                [anchor["episode_id"] for anchor in first.values()],
                before=self.before,
                after=self.after,
            )
            if self.enabled
            else {}
        )
        quoted = {}
        for row_id in wanted:
            anchor = first.get(row_id)
            quoted[row_id] = windows.get(anchor["episode_id"], []) if anchor is not None else []
        self._relink(
            conn,
            {row_id: (context_text(rows), [row["id"] for row in rows]) for row_id, rows in quoted.items()},
        )
        return len(wanted)

    def clear(self, conn: Any, row_ids: Iterable[int]) -> None:
        """Give these rows no context (before an episode their context quotes is erased)."""
        self._relink(conn, {row_id: ("", []) for row_id in sorted(set(row_ids))})

    def _relink(self, conn: Any, contexts: dict[int, tuple[str, list[str]]]) -> None:
        """Replace the context and links of rows: {row id: (text, episode ids)}. The keyword
        index first, while the old links still name what it indexed (the SQLite index stores
        no text: it removes a row's old entry given that text, store/sqlite/keywords.py)."""
        if not contexts:
            return
        self._keywords.set_contexts(conn, [(row_id, text) for row_id, (text, _) in contexts.items()])
        conn.execute(
            "DELETE FROM turn_context WHERE row_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(contexts)),),
        )
        self.indexed(conn, contexts)

    @staticmethod
    def quoting(conn: Any, episode_ids: Iterable[str]) -> list[int]:
        """The rows whose context quotes one of these episodes (ask before they are deleted: an
        episode's links go with it, store/sqlite/migrations.py, 11)."""
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT row_id FROM turn_context WHERE episode_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(episode_ids)),),
            )
        ]

    def rebuild_after_erasure(self, conn: Any, erased_rows: Sequence[int], quoting: Iterable[int]) -> int:
        """Drop the links of erased rows and rebuild the contexts of the rows that quoted an
        erased episode (`quoting`, found and cleared before the episodes were deleted; call
        after; the keyword index's 'secure-delete' must be on, so the old contexts leave its
        segments)."""
        conn.execute(
            "DELETE FROM turn_context WHERE row_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(erased_rows)),),
        )
        return self.rebuild(conn, set(quoting) - set(erased_rows))

    def rebuild_all(self, conn: Any) -> int:
        """Build the context of every current raw turn (a schema upgrade)."""
        rows = [
            row[0]
            for row in conn.execute("SELECT row_id FROM memories WHERE kind = 'turn' AND expired_at IS NULL")
        ]
        return self.rebuild(conn, rows)

    def _windows(
        self, conn: Any, episode_ids: Sequence[str], *, before: int, after: int
    ) -> dict[str, list[Any]]:
        """For each episode: the episodes with text around it, oldest first, up to `before`
        before it and `after` after it in (occurred_at, insertion) order, in its exact scope and
        within the gap. A batch's episodes of one scope are read in one span (a message batch
        is contiguous), so the cost does not grow with a query per episode."""
        anchors = conn.execute(
            f"SELECT {_ANCHOR_COLUMNS} FROM episodes e WHERE e.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(dict.fromkeys(episode_ids))),),
        ).fetchall()
        scopes: dict[tuple[Any, ...], list[Any]] = {}
        for anchor in anchors:
            scopes.setdefault((anchor["user_id"], anchor["agent_id"], anchor["run_id"]), []).append(anchor)
        windows: dict[str, list[Any]] = {}
        for scope, group in scopes.items():
            group.sort(key=lambda anchor: (anchor["occurred_at"], anchor["episode_row"]))
            first, last = group[0], group[-1]
            same_scope, scope_params = _same_scope(scope)
            middle = conn.execute(
                f"SELECT rowid, id, name, content, occurred_at FROM episodes WHERE {same_scope} "
                "AND (occurred_at, rowid) >= (?, ?) AND (occurred_at, rowid) <= (?, ?) "
                "ORDER BY occurred_at, rowid LIMIT ?",
                (
                    *scope_params,
                    first["occurred_at"],
                    first["episode_row"],
                    last["occurred_at"],
                    last["episode_row"],
                    _SPAN_LIMIT + 1,
                ),
            ).fetchall()
            if len(middle) > _SPAN_LIMIT:  # history added far out of order: one window at a time
                for anchor in group:
                    windows[anchor["episode_id"]] = self._neighbours(conn, anchor, before=before, after=after)
                continue
            sequence = [
                *reversed(self._side(conn, first, scope, before, earlier=True)),
                *middle,
                *self._side(conn, last, scope, after, earlier=False),
            ]
            places = {row["id"]: index for index, row in enumerate(sequence)}
            # Positions of the episodes with text, found once: scanning the sequence from each
            # anchor made a batch of n messages cost n^2 row reads (13 of 26 s for 5,000 adds
            # of 1,000 on PostgreSQL).
            texted = [index for index, row in enumerate(sequence) if row["content"]]
            for anchor in group:
                at = from_db(anchor["occurred_at"])
                assert at is not None
                low, high = _shifted(at, -self.gap), _shifted(at, self.gap)
                index = places[anchor["episode_id"]]
                start, end = bisect_left(texted, index), bisect_right(texted, index)
                earlier = [sequence[i] for i in texted[max(0, start - before) : start]]  # oldest first
                later = [sequence[i] for i in texted[end : end + after]]
                windows[anchor["episode_id"]] = [
                    *[row for row in earlier if row["occurred_at"] >= low],
                    *[row for row in later if row["occurred_at"] <= high],
                ]
        return windows

    def _side(
        self, conn: Any, anchor: Any, scope: tuple[Any, ...], count: int, *, earlier: bool
    ) -> list[Any]:
        """Up to `count` episodes with text just before (or after) `anchor` within the gap,
        nearest first."""
        if not count:
            return []
        at = from_db(anchor["occurred_at"])
        assert at is not None
        key = (anchor["occurred_at"], anchor["episode_row"])
        if earlier:
            sql = "(occurred_at, rowid) < (?, ?) AND occurred_at >= ? ORDER BY occurred_at DESC, rowid DESC"
            bound = _shifted(at, -self.gap)
        else:
            sql = "(occurred_at, rowid) > (?, ?) AND occurred_at <= ? ORDER BY occurred_at, rowid"
            bound = _shifted(at, self.gap)
        same_scope, scope_params = _same_scope(scope)
        return conn.execute(
            f"SELECT rowid, id, name, content, occurred_at FROM episodes WHERE {same_scope} "
            f"AND content != '' AND {sql} LIMIT ?",
            (*scope_params, *key, bound, count),
        ).fetchall()

    def _neighbours(self, conn: Any, anchor: Any, *, before: int, after: int) -> list[Any]:
        """The episodes with text around one `anchor`, oldest first."""
        scope = (anchor["user_id"], anchor["agent_id"], anchor["run_id"])
        return [
            *reversed(self._side(conn, anchor, scope, before, earlier=True)),
            *self._side(conn, anchor, scope, after, earlier=False),
        ]

    @staticmethod
    def _turn_rows(conn: Any, episode_ids: Iterable[str]) -> list[int]:
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT m.row_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                "WHERE s.episode_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn' "
                "AND m.expired_at IS NULL",
                (json.dumps(sorted(episode_ids)),),
            )
        ]


def _same_scope(scope: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """The condition (and its parameters) on episodes of exactly this (user, agent, run): `=`
    for a set id, so the partial agent and run indexes (store/sqlite/migrations.py, 10) serve it."""
    conditions, params = [], []
    for column, value in zip(("user_id", "agent_id", "run_id"), scope):
        if value is None:
            conditions.append(f"{column} IS NULL")
        else:
            conditions.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(conditions), params


# Episodes read in one span for a batch's windows; more (a batch spread over a long stretch of
# existing history) and each window is read on its own.
_SPAN_LIMIT = 5000

# An episode as the anchor of a context window (aliases as `_neighbours` reads them).
_ANCHOR_COLUMNS = "e.id AS episode_id, e.rowid AS episode_row, e.user_id, e.agent_id, e.run_id, e.occurred_at"


def context_text(neighbours: Sequence[Any]) -> str:
    """The keyword context of a raw turn: its neighbour episodes, "name: text" per line."""
    return "\n".join(
        f"{row['name']}: {row['content']}" if row["name"] else row["content"] for row in neighbours
    )
