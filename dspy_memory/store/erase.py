"""Erasure, the GDPR path: deleting a memory, episodes or a whole scope leaves nothing of them in
any table or index (docs/architecture.md, "Erasure"), and, as far as the engine allows, in the
database's files.

- What quotes an erased memory is erased or scrubbed too: its source episodes (even when other
  memories came from them too), the raw `turn` memories made from those episodes, the memories
  consolidated from it (a merge with its other parts, summaries of it), the content other
  memories' events recorded about it, and reasons that may quote it.
- The indexes drop the rows so that no term or vector of them stays behind (each backend's
  `KeywordIndex.erase` and `VectorIndex.delete`).
- Then the backend's `compact()`: SQLite zeroes the free space inside pages and truncates the
  WAL (store/sqlite/backend.py); PostgreSQL vacuums the tables (store/postgres/backend.py;
  docs/scaling.md says what that does and does not guarantee).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from dspy_memory.errors import MemoryNotFoundError
from dspy_memory.store.audit_log import AuditLog, scope_of
from dspy_memory.store.backend import Backend, KeywordIndex, VectorIndex
from dspy_memory.store.queries import Predicate, not_found, scope_predicate
from dspy_memory.store.runs import withhold_reasons
from dspy_memory.store.turns import TurnContext
from dspy_memory.types import DeleteResult, Scope
from dspy_memory.util.timeutil import now_db

# Keys of event metadata that may hold memory content.
_CONTENT_KEYS = ("new_content", "old_content", "content")


def _ids(values: Iterable[Any]) -> str:
    return json.dumps(sorted(values))


def _contents(rows: list[Any]) -> str:
    """The erased memory rows' contents, as a bound JSON list."""
    return json.dumps(sorted({row["content"] for row in rows}))


def _same_users(rows: list[Any]) -> tuple[str, str]:
    """(a condition on `user_id`: the users of the erased rows, user-less ones included when
    they are among them; its parameter)."""
    users = {row["user_id"] for row in rows}
    named = json.dumps(sorted(user for user in users if user is not None))
    return "(user_id IN (SELECT value FROM json_each(?))" + (
        " OR user_id IS NULL)" if None in users else ")"
    ), named


class Eraser:
    """Deletes memories, episodes and scopes with everything that quotes them, then checkpoints
    the WAL so erased bytes are gone from the file too."""

    def __init__(
        self,
        backend: Backend,
        vectors: VectorIndex,
        keywords: KeywordIndex,
        turn_context: TurnContext,
        audit_log: AuditLog,
    ) -> None:
        self._audit = audit_log
        self._backend = backend
        self._conns = backend.conns
        self._vectors = vectors
        self._keywords = keywords
        self._turn_context = turn_context

    # -- entry points ----------------------------------------------------------------------

    def memory(self, memory_id: str, *, scope: Scope | None = None, actor: str = "user") -> DeleteResult:
        """Erase every version of a memory (rows, vectors, keyword entries, entities nothing
        else names, the content of its events) with its source episodes and the raw turns made
        from them, scrub what other memories' events quote of it, and log a DELETE receipt
        without content."""
        predicate = scope_predicate(Predicate().add("m.id = ?", memory_id), scope)
        with self._purging() as conn:
            found = conn.execute(f"SELECT 1 FROM memories m WHERE {predicate.sql} LIMIT 1", predicate.params)
            if found.fetchone() is None:
                raise not_found(memory_id, scope)
            owner = conn.execute(
                "SELECT user_id, agent_id, run_id FROM memories WHERE id = ? LIMIT 1", (memory_id,)
            ).fetchone()
            counts = self._erase(conn, {memory_id}, set(), actor=actor)
            # The receipt: counts and the memory's id, the scope only as salted hashes.
            self._audit.record(
                "delete",
                scope=scope_of(owner),
                role=actor,
                counts={"delete": 1, **counts},
                memory_ids=[memory_id],
            )
        return DeleteResult(counts=counts)

    def episodes(self, episode_ids: list[str], *, scope: Scope | None, actor: str) -> DeleteResult:
        """Erase episodes and the raw `turn` memories made from them, with the same scrubbing
        as `memory` (e.g. a "please forget X" message, which quotes what was forgotten). Memories
        other than turns keep their content and lose the provenance link. Joins the caller's
        transaction when there is one; every id must exist in `scope`."""
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted:
            return DeleteResult(counts={})
        predicate = scope_predicate(
            Predicate().add("e.id IN (SELECT value FROM json_each(?))", json.dumps(wanted)), scope, alias="e"
        )
        with self._purging() as conn:
            found = {
                row[0]
                for row in conn.execute(
                    f"SELECT e.id FROM episodes e WHERE {predicate.sql}", predicate.params
                )
            }
            missing = [episode_id for episode_id in wanted if episode_id not in found]
            if missing:
                where = "" if scope is None else f" in scope {scope.model_dump(exclude_none=True)}"
                raise MemoryNotFoundError(f"no episode with id {missing[0]!r}{where}")
            counts = self._erase(conn, set(), found, actor=actor)
            self._audit.record("erase_episodes", scope=scope, role=actor, counts=counts)
        return DeleteResult(counts=counts)

    def scope(self, scope: Scope) -> DeleteResult:
        """Delete everything stored for a scope: memories, vectors, keyword entries, sources,
        episodes, events, entities, blocks, write-run logs (with what each run saw and did),
        feedback, settings; events and feedback of other scopes quoting its memories are
        scrubbed. The audit log keeps a receipt naming the scope by salted hashes only."""
        counts: dict[str, int] = {}
        with self._purging() as conn:
            memories = scope_predicate(Predicate(), scope)
            memory_ids = {
                row[0]
                for row in conn.execute(
                    f"SELECT DISTINCT m.id FROM memories m WHERE {memories.sql}", memories.params
                )
            }
            episodes = scope_predicate(Predicate(), scope, alias="e")
            episode_ids = {
                row[0]
                for row in conn.execute(f"SELECT e.id FROM episodes e WHERE {episodes.sql}", episodes.params)
            }
            # What the scope's write runs saw and did goes with them (before them: it names them).
            runs = scope_predicate(Predicate(), scope, alias="r")
            for table in ("write_run_ops", "write_run_candidates"):
                counts[table] = conn.execute(
                    f"DELETE FROM {table} WHERE write_run_id IN (SELECT r.uid FROM write_runs r WHERE {runs.sql})",
                    runs.params,
                ).rowcount
            for table in ("memory_events", "blocks", "write_runs"):
                predicate = scope_predicate(Predicate(), scope, alias="t")
                counts[table] = conn.execute(
                    f"DELETE FROM {table} AS t WHERE {predicate.sql}", predicate.params
                ).rowcount
            counts.update(self._erase(conn, memory_ids, episode_ids, actor=None))
            predicate = scope_predicate(Predicate(), scope, alias="t")
            # _erase took the entities and feedback of its memories already; settings name the scope.
            for table in ("entities", "feedback", "lifecycle_settings", "retention_settings"):
                deleted = conn.execute(f"DELETE FROM {table} AS t WHERE {predicate.sql}", predicate.params)
                counts[table] = counts.get(table, 0) + deleted.rowcount
            self._audit.record("erase_scope", scope=scope, counts=counts)
        return DeleteResult(counts=counts)

    def due(self, memory_ids: set[str], episode_ids: set[str], *, actor: str) -> dict[str, int]:
        """Erase what retention found due as `memory` does; the caller records the receipt."""
        with self._purging() as conn:
            return self._erase(conn, memory_ids, episode_ids, actor=actor)

    # -- transactions and the file ---------------------------------------------------------

    @contextmanager
    def _purging(self) -> Iterator[Any]:
        """A write transaction, then `compact()`. Inside a caller's transaction (the LM write
        path applies a DELETE with its other ops) the caller runs `compact()` after its commit."""
        nested = self._conns.in_transaction()
        with self._conns.transaction() as conn:
            yield conn
        if not nested:
            self.compact()

    def compact(self) -> int:
        """Make what was erased unreachable in the database's files (the backend decides how:
        store/sqlite/backend.py, store/postgres/backend.py)."""
        return self._backend.compact()

    # -- the purge -------------------------------------------------------------------------

    def _erase(
        self, conn: Any, memory_ids: set[str], episode_ids: set[str], *, actor: str | None
    ) -> dict[str, int]:
        """Erase memories and episodes, with the source episodes of those memories and the raw
        turns made from those episodes (to a fixed point); `actor` None: no receipts."""
        memory_ids, episode_ids = self._closure(conn, memory_ids, episode_ids)
        rows = conn.execute(
            "SELECT row_id, id, user_id, agent_id, run_id, content, subject_id, object_id FROM memories "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (_ids(memory_ids),),
        ).fetchall()
        owners = {row["id"]: (row["user_id"], row["agent_id"], row["run_id"]) for row in rows}
        counts = {
            "events_scrubbed": self._scrub_quotes(
                conn, memory_ids, episode_ids, rows, verbatim=actor is not None
            ),
            "feedback": self._erase_feedback(conn, memory_ids, episode_ids, rows, verbatim=actor is not None),
        }
        counts["sources"] = self._unlink_sources(conn, memory_ids, episode_ids)
        counts.update(self._delete_rows(conn, [row["row_id"] for row in rows]))
        # Entity names are content too: those no other memory points at go with it.
        counts["entities"] = conn.execute(
            "DELETE FROM entities WHERE id IN (SELECT value FROM json_each(?)) "
            "AND id NOT IN (SELECT subject_id FROM memories WHERE subject_id IS NOT NULL) "
            "AND id NOT IN (SELECT object_id FROM memories WHERE object_id IS NOT NULL)",
            (_ids({ref for row in rows for ref in row[6:8] if ref}),),
        ).rowcount
        conn.execute(
            "DELETE FROM memory_links WHERE memory_id IN (SELECT value FROM json_each(?)) "
            "OR linked_id IN (SELECT value FROM json_each(?))",
            (_ids(memory_ids), _ids(memory_ids)),
        )
        # Raw turns next to an erased episode were indexed with its words: found while the
        # episode's links exist, rebuilt without them once it is gone ('secure-delete' is on
        # from the file's creation, so the old context leaves the index segments too).
        quoting = set(self._turn_context.quoting(conn, episode_ids)) - {row["row_id"] for row in rows}
        self._turn_context.clear(conn, quoting)
        counts["episodes"] = conn.execute(
            "DELETE FROM episodes WHERE id IN (SELECT value FROM json_each(?))", (_ids(episode_ids),)
        ).rowcount
        counts["contexts_rebuilt"] = self._turn_context.rebuild_after_erasure(
            conn, [row["row_id"] for row in rows], quoting
        )
        counts["events_erased"] = conn.execute(
            "UPDATE memory_events SET old_content = NULL, new_content = NULL, reason = NULL, metadata = '{}' "
            "WHERE memory_id IN (SELECT value FROM json_each(?))",
            (_ids(memory_ids),),
        ).rowcount
        if actor is not None:
            at = now_db()
            conn.executemany(
                "INSERT INTO memory_events (memory_id, user_id, agent_id, run_id, event, actor, created_at) "
                "VALUES (?, ?, ?, ?, 'DELETE', ?, ?)",
                [(memory_id, *owner, actor, at) for memory_id, owner in sorted(owners.items())],
            )
        return counts

    @staticmethod
    def _closure(conn: Any, memory_ids: set[str], episode_ids: set[str]) -> tuple[set[str], set[str]]:
        """Add the source episodes of the memories and the turn memories of the episodes until
        nothing new comes in (a turn's text is its episode's; an episode quotes its facts)."""
        new_memories, new_episodes = set(memory_ids), set(episode_ids)
        memory_ids, episode_ids = set(), set()
        while new_memories or new_episodes:
            memory_ids |= new_memories
            sources = {
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT episode_id FROM memory_sources "
                    "WHERE memory_id IN (SELECT value FROM json_each(?))",
                    (_ids(new_memories),),
                )
            }
            new_episodes = (new_episodes | sources) - episode_ids
            episode_ids |= new_episodes
            turns = {
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT m.id FROM memory_sources s JOIN memories m ON m.id = s.memory_id "
                    "WHERE s.episode_id IN (SELECT value FROM json_each(?)) AND m.kind = 'turn'",
                    (_ids(new_episodes),),
                )
            }
            # A merged memory says what its parts said, and a summary quotes what it condenses:
            # erasing a part erases the merge (and its other parts) and the summaries of it.
            linked = {
                row[0]
                for row in conn.execute(
                    "SELECT linked_id FROM memory_links WHERE relation = 'merged_from' "
                    "AND memory_id IN (SELECT value FROM json_each(?)) "
                    "UNION SELECT memory_id FROM memory_links WHERE linked_id IN (SELECT value FROM json_each(?))",
                    (_ids(new_memories), _ids(new_memories)),
                )
            }
            new_memories, new_episodes = (turns | linked) - memory_ids, set()
        return memory_ids, episode_ids

    def _scrub_quotes(
        self, conn: Any, memory_ids: set[str], episode_ids: set[str], rows: list[Any], *, verbatim: bool
    ) -> int:
        """Scrub what events of other memories (of the same users) record about the erased ones:
        - events linking to an erased memory (`superseded_by` in their metadata: the INVALIDATE
          of the memory it replaced, a correction): the new content, content in metadata, reason;
        - reasons of events of memories linked to an erased one by `superseded_by` either way,
          and of events caused by an erased episode: an LM's reason often quotes the fact;
        - content or metadata content equal to an erased version's content, unless it is the
          event's own memory's content; with `verbatim`, reasons that quote such content.
        Returns the number of event rows changed."""
        if not rows:
            return 0
        ids, contents = _ids(memory_ids), _contents(rows)
        same_users, named = _same_users(rows)
        others = f"{same_users} AND memory_id NOT IN (SELECT value FROM json_each(?))"
        linked = {
            row[0]
            for row in conn.execute(
                f"SELECT DISTINCT id FROM memories WHERE {same_users} "
                "AND superseded_by IN (SELECT value FROM json_each(?)) "
                "UNION SELECT DISTINCT superseded_by FROM memories "
                "WHERE id IN (SELECT value FROM json_each(?)) AND superseded_by IS NOT NULL",
                (named, ids, ids),
            )
        } - memory_ids
        strip = "json_remove(metadata, " + ", ".join(f"'$.{key}'" for key in _CONTENT_KEYS) + ")"
        changed = conn.execute(
            f"UPDATE memory_events SET new_content = NULL, reason = NULL, metadata = {strip} "
            f"WHERE {others} AND json_extract(metadata, '$.superseded_by') IN (SELECT value FROM json_each(?))",
            (named, ids, ids),
        ).rowcount
        changed += conn.execute(
            f"UPDATE memory_events SET reason = NULL WHERE {others} AND reason IS NOT NULL AND ("
            "memory_id IN (SELECT value FROM json_each(?)) OR episode_id IN (SELECT value FROM json_each(?)))",
            (named, ids, _ids(linked), _ids(episode_ids)),
        ).rowcount
        # Word-for-word copies of an erased version, except a memory's record of its own content.
        not_own = "NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = ev.memory_id AND m.content = {})"
        for column in ("new_content", "old_content"):
            changed += conn.execute(
                f"UPDATE memory_events AS ev SET {column} = NULL WHERE {others} "
                f"AND {column} IN (SELECT value FROM json_each(?)) AND {not_own.format(column)}",
                (named, ids, contents),
            ).rowcount
        for key in _CONTENT_KEYS:
            value = f"json_extract(ev.metadata, '$.{key}')"
            changed += conn.execute(
                f"UPDATE memory_events AS ev SET metadata = json_remove(metadata, '$.{key}') WHERE {others} "
                f"AND {value} IN (SELECT value FROM json_each(?)) AND {not_own.format(value)}",
                (named, ids, contents),
            ).rowcount
        # A failed LM call's error may quote its answer, which may quote the erased messages.
        conn.execute(
            f"UPDATE write_runs SET error = NULL WHERE {same_users} AND error IS NOT NULL AND EXISTS "
            "(SELECT 1 FROM json_each(write_runs.episode_ids) e WHERE e.value IN (SELECT value FROM json_each(?)))",
            (named, _ids(episode_ids)),
        )
        if verbatim:
            changed += conn.execute(
                f"UPDATE memory_events AS ev SET reason = NULL WHERE {others} AND reason IS NOT NULL "
                "AND EXISTS (SELECT 1 FROM json_each(?) c WHERE instr(ev.reason, c.value) > 0)",
                (named, ids, contents),
            ).rowcount
        return changed

    @staticmethod
    def _erase_feedback(
        conn: Any, memory_ids: set[str], episode_ids: set[str], rows: list[Any], *, verbatim: bool
    ) -> int:
        """Erase the feedback on the erased memories (every version: a person's note and the
        corrected text are content), withhold the refusal reasons of write runs that read an
        erased episode (a reason may name a relation the LM read there; the codes stay), and,
        with `verbatim`, drop notes of the same users' feedback that quote an erased version.
        Returns the records erased. The runs' rows of candidates and operations hold ids only
        and stay (store/runs.py)."""
        erased = conn.execute(
            "DELETE FROM feedback WHERE memory_id IN (SELECT value FROM json_each(?))", (_ids(memory_ids),)
        ).rowcount
        runs = withhold_reasons(conn, _ids(episode_ids))
        conn.execute(
            "UPDATE feedback SET note = NULL WHERE source = 'refused' AND write_run_id IN (SELECT value FROM json_each(?))",
            (_ids(runs),),
        )
        if verbatim and rows:
            same_users, named = _same_users(rows)
            conn.execute(
                f"UPDATE feedback AS f SET note = NULL WHERE {same_users} AND note IS NOT NULL "
                "AND EXISTS (SELECT 1 FROM json_each(?) c WHERE instr(f.note, c.value) > 0)",
                (named, _contents(rows)),
            )
        return erased

    @staticmethod
    def _unlink_sources(conn: Any, memory_ids: set[str], episode_ids: set[str]) -> int:
        """Delete the links of the erased memories and episodes (other memories lose theirs to
        those episodes) while both ends exist: on SQLite they are a view joining them, where a
        DELETE counts no rows (store/sqlite/schema_compact.py, V13). Returns how many."""
        links: set[tuple[str, str]] = set()
        for column, ids in (("memory_id", _ids(memory_ids)), ("episode_id", _ids(episode_ids))):
            where = f"FROM memory_sources WHERE {column} IN (SELECT value FROM json_each(?))"
            links.update(tuple(row) for row in conn.execute(f"SELECT memory_id, episode_id {where}", (ids,)))
            conn.execute(f"DELETE {where}", (ids,))
        return len(links)

    def _delete_rows(self, conn: Any, row_ids: list[int]) -> dict[str, int]:
        total, _ = self._vectors.sizes(conn, None)
        counts = {"vectors": self._vectors.delete(conn, row_ids)}
        counts["keyword_entries"] = self._keywords.erase(conn, row_ids, total_rows=total)
        counts["memories"] = conn.execute(
            "DELETE FROM memories WHERE row_id IN (SELECT value FROM json_each(?))", (_ids(row_ids),)
        ).rowcount
        return counts
