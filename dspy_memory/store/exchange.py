"""The SQL of export and import (dspy_memory/governance/exchange.py; docs/governance.md, "Export
and import"): a scope's rows of every table, read in one snapshot in a fixed order, and rows
written back (store/exchange_import.py) in one transaction with their vector and keyword entries.

Rows are plain dicts by column name, as stored (JSON columns as text). What a store numbers for
itself is left out: memory row ids (the vectors, keyword entries and turn contexts are keyed by
them; a turn context is read as (memory id, version, episode)), event and write-run ids,
episode rowids and claims. Imported rows get new local numbers in the order they come, so the
relative order the readers tie-break on (row id, rowid, event id) is kept.

Import is atomic: everything is checked, then written batch by batch in one write transaction,
so a failure part-way leaves nothing (no memory without its index entries). A row already held
(by its key) is compared on what makes it that row and skipped when equal; when it differs the
import is refused (`ImportConflictError`). Events have no key across stores, nor write runs logged before
runs had a uid: they count as held when an equal row is there (as many times as the file has it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.store.queries import Predicate, event_new_content, scope_predicate
from dspy_memory.types import Scope

SCOPE = ("user_id", "agent_id", "run_id")


class ImportConflictError(DSPyMemoryError):
    """A row of the file has the key of a row the store holds, with other content."""


@dataclass(frozen=True)
class Kind:
    """One record type: its table, the columns exported, how rows are ordered and matched."""

    name: str
    table: str
    columns: tuple[str, ...]
    order: str
    key: tuple[str, ...] = ()  # empty: matched by the whole row (events, write runs)
    compared: tuple[str, ...] = ()  # what must agree when the key is already held
    read_as: tuple[tuple[str, str], ...] = ()  # (column, the SQL it is read with over `t`)


# A memory's or an episode's `expires_at` is written once, with the row: it is compared, so a
# store that holds the row with another expiry (or none) refuses the file rather than silently
# keeping the row longer than the file says.
KINDS = (
    Kind(
        "entity", "entities",
        ("id", *SCOPE, "name", "normalized_name", "type", "summary", "metadata", "created_at", "updated_at"),
        "t.id", ("id",), (*SCOPE, "normalized_name", "created_at"),
    ),
    Kind(
        "episode", "episodes",
        ("id", *SCOPE, "source", "role", "name", "content", "metadata", "occurred_at", "ingested_at",
         "status", "error", "attempts", "infer", "expires_at"),
        "t.rowid", ("id",),
        (*SCOPE, "source", "role", "name", "content", "occurred_at", "ingested_at", "expires_at"),
    ),
    Kind(
        "memory", "memories",
        ("id", "version", *SCOPE, "content", "kind", "subject_id", "predicate", "object_id", "confidence",
         "importance", "strength", "access_count", "last_accessed_at", "content_hash", "metadata",
         "valid_at", "invalid_at", "created_at", "expired_at", "superseded_by", "archived_at", "pinned",
         "expires_at"),
        "t.row_id", ("id", "version"),
        (*SCOPE, "content", "content_hash", "kind", "subject_id", "predicate", "object_id", "valid_at",
         "invalid_at", "created_at", "expired_at", "superseded_by", "expires_at"),
    ),
    Kind("memory_source", "memory_sources", ("memory_id", "episode_id", "created_at"),
         "t.memory_id, t.episode_id", ("memory_id", "episode_id")),
    Kind("memory_link", "memory_links", ("memory_id", "linked_id", "relation"),
         "t.memory_id, t.linked_id", ("memory_id", "linked_id"), ("relation",)),
    Kind(
        "memory_event", "memory_events",
        ("memory_id", *SCOPE, "event", "version", "old_content", "new_content", "reason", "actor",
         "episode_id", "metadata", "created_at"),
        "t.id", read_as=(("new_content", event_new_content("t")),),
    ),
    Kind(
        "block", "blocks",
        ("id", *SCOPE, "label", "value", "char_limit", "read_only", "description", "version", "created_at",
         "updated_at"),
        "t.id", ("id",), (*SCOPE, "label", "value", "version", "char_limit", "read_only"),
    ),
    Kind("block_version", "block_versions", ("block_id", "version", "value", "actor", "reason", "created_at"),
         "t.block_id, t.version", ("block_id", "version"), ("value", "actor", "reason", "created_at")),
    *(
        Kind(name, name, (*SCOPE, "settings", "updated_at"),
             "coalesce(t.user_id, ''), coalesce(t.agent_id, ''), coalesce(t.run_id, '')", SCOPE, ("settings",))
        for name in ("lifecycle_settings", "retention_settings")
    ),
    # Matched by uid; runs logged before write runs had one, by the whole row.
    Kind(
        "write_run", "write_runs",
        ("uid", *SCOPE, "mode", "episode_ids", "lm", "lm_calls", "prompt_tokens", "completion_tokens",
         "ops_applied", "rejected", "error", "started_at", "finished_at"),
        "t.id", ("uid",), (*SCOPE, "mode", "episode_ids", "started_at"),
    ),
    Kind("write_run_candidate", "write_run_candidates", ("write_run_id", "alias", "memory_id", "version"),
         "t.write_run_id, t.alias", ("write_run_id", "alias"), ("memory_id", "version")),
    Kind(
        "write_run_op", "write_run_ops",
        ("write_run_id", "op_index", "action", "target", "applied", "memory_id", "version", "refused"),
        "t.write_run_id, t.op_index", ("write_run_id", "op_index"),
        ("action", "target", "applied", "memory_id", "version", "refused"),
    ),
    Kind(
        "feedback", "feedback",
        ("id", *SCOPE, "source", "verdict", "memory_id", "memory_version", "write_run_id", "op_index", "note",
         "expected", "actor", "created_at"),
        "t.created_at, t.id", ("id",),
        (*SCOPE, "source", "verdict", "memory_id", "memory_version", "write_run_id", "op_index", "note",
         "expected", "created_at"),
    ),
)  # fmt: skip
BY_NAME = {kind.name: kind for kind in KINDS}
# The link of a raw turn to the episodes its keyword context quotes.
TURN_CONTEXT = ("memory_id", "version", "episode_id")
JSON_COLUMNS = frozenset({"metadata", "settings", "episode_ids", "rejected", "expected"})


def id_list(values: Sequence[Any]) -> str:
    return json.dumps(sorted(set(values)))


def select_rows(conn: Any, kind: Kind, where: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    read_as = dict(kind.read_as)
    columns = ", ".join(read_as.get(column, f"t.{column}") for column in kind.columns)
    rows = conn.execute(
        f"SELECT {columns} FROM {kind.table} t WHERE {where} ORDER BY {kind.order}", list(params)
    ).fetchall()
    return [dict(zip(kind.columns, row)) for row in rows]


def schema_version(conn: Any) -> int:
    return int(conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0)


def read_scope(
    store: Any, scope: Scope | None, *, embeddings: bool
) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """({record type: rows} of `scope` (None: the whole store) in export order, the schema
    version), read in one snapshot. Also "turn_context" rows and, with `embeddings`, "vector"
    rows (memory_id, version, embedding as float32)."""
    with store.snapshot() as conn:
        scoped = scope_predicate(Predicate(), scope, alias="t")

        def of_scope(name: str) -> list[dict[str, Any]]:
            return select_rows(conn, BY_NAME[name], scoped.sql, scoped.params)

        found = {
            name: of_scope(name)
            for name in (
                "episode",
                "memory",
                "memory_event",
                "block",
                "write_run",
                "lifecycle_settings",
                "retention_settings",
                "feedback",
            )
        }

        # Rows of other tables belong to the scope through the rows they name: `column IN (the
        # scope's keys)`, a subquery both engines evaluate once (a correlated EXISTS made SQLite
        # scan the scope per row; a bound JSON list of ids was scanned per row too).
        def owned(column: str, table: str, key: str) -> tuple[str, list[Any]]:
            inner = scope_predicate(Predicate(), scope, alias="s")
            return f"{column} IN (SELECT s.{key} FROM {table} s WHERE {inner.sql})", inner.params

        def both(
            first: tuple[str, list[Any]], second: tuple[str, list[Any]], joint: str = "AND"
        ) -> Predicate:
            return Predicate().add(f"{first[0]} {joint} {second[0]}", *first[1], *second[1])

        def select(name: str, where: Predicate) -> list[dict[str, Any]]:
            return select_rows(conn, BY_NAME[name], where.sql, where.params)

        # Entities of the scope and those its memories name (a memory's ends are always exported).
        names = both(owned("t.id", "memories", "subject_id"), owned("t.id", "memories", "object_id"), "OR")
        found["entity"] = select(
            "entity", Predicate().add(f"({scoped.sql}) OR {names.sql}", *scoped.params, *names.params)
        )
        # One IN per query: with two on a two-column key SQLite probed every pair (quadratic).
        # The other end must be exported too: checked here.
        exported = {
            "episode": {row["id"] for row in found["episode"]},
            "memory": {row["id"] for row in found["memory"]},
        }
        for name, other, kind in (
            ("memory_source", "episode_id", "episode"),
            ("memory_link", "linked_id", "memory"),
        ):
            memories = owned("t.memory_id", "memories", "id")
            rows = select(name, Predicate().add(memories[0], *memories[1]))
            found[name] = [row for row in rows if row[other] in exported[kind]]
        blocks = owned("t.block_id", "blocks", "id")
        found["block_version"] = select("block_version", Predicate().add(blocks[0], *blocks[1]))
        runs = owned("t.write_run_id", "write_runs", "uid")
        for name in ("write_run_candidate", "write_run_op"):
            found[name] = select(name, Predicate().add(runs[0], *runs[1]))
        in_scope = scope_predicate(Predicate(), scope)
        episodes = owned("c.episode_id", "episodes", "id")
        found["turn_context"] = [
            dict(zip(TURN_CONTEXT, row))
            for row in conn.execute(
                "SELECT m.id, m.version, c.episode_id FROM turn_context c JOIN memories m ON m.row_id = c.row_id "
                f"WHERE {in_scope.sql} AND {episodes[0]} ORDER BY m.id, m.version, c.episode_id",
                [*in_scope.params, *episodes[1]],
            ).fetchall()
        ]
        if embeddings:
            found["vector"] = [
                {"memory_id": row[0], "version": row[1], "embedding": store.vectors.decode(row[2])}
                for row in conn.execute(
                    "SELECT m.id, m.version, v.embedding FROM memory_vectors v JOIN memories m "
                    f"ON m.row_id = v.row_id WHERE {in_scope.sql} ORDER BY m.row_id",
                    in_scope.params,
                ).fetchall()
            ]
        return found, schema_version(conn)


def held_memory_versions(store: Any, keys: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
    """The (id, version) pairs of `keys` the store already holds (those need no vector), asked
    for in slices so no one statement carries every id of a large import."""
    wanted, held = set(keys), set[tuple[str, int]]()
    ids = sorted({memory_id for memory_id, _ in keys})
    with store.snapshot() as conn:
        for start in range(0, len(ids), 1000):
            rows = conn.execute(
                "SELECT id, version FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids[start : start + 1000]),),
            ).fetchall()
            held.update(key for key in ((row[0], row[1]) for row in rows) if key in wanted)
    return held
