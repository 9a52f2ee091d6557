"""The SQL of export and import (dspy_memory/governance/exchange.py; docs/governance.md, "Export
and import"): a scope's rows of every table, read in one snapshot in a fixed order, and rows
written back in one transaction with their vector and keyword entries.

Rows are plain dicts by column name, as stored (JSON columns as text). What a store numbers for
itself is left out: memory row ids (the vectors, keyword entries and turn contexts are keyed by
them; a turn context is read as (memory id, version, episode)), event and write-run ids,
episode rowids and claims. Imported rows get new local numbers in the order they come, so the
relative order the readers tie-break on (row id, rowid, event id) is kept.

Import is atomic: everything is checked and written in one write transaction, so a failure
part-way leaves nothing (no memory without its index entries). A row already held (by its key)
is compared on what makes it that row and skipped when equal; when it differs the import is
refused (`ImportConflictError`). Events and write runs have no key across stores: they count as
held when an equal row is there (as many times as the file has it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.store.backend import NO_USER
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.store.turns import context_text
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


KINDS = (
    Kind(
        "entity", "entities",
        ("id", *SCOPE, "name", "normalized_name", "type", "summary", "metadata", "created_at", "updated_at"),
        "t.id", ("id",), (*SCOPE, "normalized_name", "created_at"),
    ),
    Kind(
        "episode", "episodes",
        ("id", *SCOPE, "source", "role", "name", "content", "metadata", "occurred_at", "ingested_at",
         "status", "error", "attempts", "infer"),
        "t.rowid", ("id",), (*SCOPE, "source", "role", "name", "content", "occurred_at", "ingested_at"),
    ),
    Kind(
        "memory", "memories",
        ("id", "version", *SCOPE, "content", "kind", "subject_id", "predicate", "object_id", "confidence",
         "importance", "strength", "access_count", "last_accessed_at", "content_hash", "metadata",
         "valid_at", "invalid_at", "created_at", "expired_at", "superseded_by", "archived_at", "pinned"),
        "t.row_id", ("id", "version"),
        (*SCOPE, "content", "content_hash", "kind", "subject_id", "predicate", "object_id", "valid_at",
         "invalid_at", "created_at", "expired_at", "superseded_by"),
    ),
    Kind("memory_source", "memory_sources", ("memory_id", "episode_id", "created_at"),
         "t.memory_id, t.episode_id", ("memory_id", "episode_id")),
    Kind("memory_link", "memory_links", ("memory_id", "linked_id", "relation"),
         "t.memory_id, t.linked_id", ("memory_id", "linked_id"), ("relation",)),
    Kind(
        "memory_event", "memory_events",
        ("memory_id", *SCOPE, "event", "version", "old_content", "new_content", "reason", "actor",
         "episode_id", "metadata", "created_at"),
        "t.id",
    ),
    Kind(
        "block", "blocks",
        ("id", *SCOPE, "label", "value", "char_limit", "read_only", "description", "version", "created_at",
         "updated_at"),
        "t.id", ("id",), (*SCOPE, "label", "value", "version", "char_limit", "read_only"),
    ),
    Kind("block_version", "block_versions", ("block_id", "version", "value", "actor", "reason", "created_at"),
         "t.block_id, t.version", ("block_id", "version"), ("value", "actor", "reason", "created_at")),
    Kind("lifecycle_settings", "lifecycle_settings", (*SCOPE, "settings", "updated_at"),
         "coalesce(t.user_id, ''), coalesce(t.agent_id, ''), coalesce(t.run_id, '')", SCOPE, ("settings",)),
    Kind(
        "write_run", "write_runs",
        (*SCOPE, "mode", "episode_ids", "lm", "lm_calls", "prompt_tokens", "completion_tokens", "ops_applied",
         "rejected", "error", "started_at", "finished_at"),
        "t.id",
    ),
)  # fmt: skip
BY_NAME = {kind.name: kind for kind in KINDS}
# The link of a raw turn to the episodes its keyword context quotes.
TURN_CONTEXT = ("memory_id", "version", "episode_id")
JSON_COLUMNS = frozenset({"metadata", "settings", "episode_ids", "rejected"})


def _ids(values: Sequence[Any]) -> str:
    return json.dumps(sorted(set(values)))


def _select(conn: Any, kind: Kind, where: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    columns = ", ".join(f"t.{column}" for column in kind.columns)
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
            return _select(conn, BY_NAME[name], scoped.sql, scoped.params)

        found = {name: of_scope(name) for name in ("episode", "memory", "memory_event", "block", "write_run")}
        found["lifecycle_settings"] = of_scope("lifecycle_settings")

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
            return _select(conn, BY_NAME[name], where.sql, where.params)

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
    """The (id, version) pairs of `keys` the store already holds (those need no vector)."""
    ids = _ids([memory_id for memory_id, _ in keys])
    with store.snapshot() as conn:
        rows = conn.execute(
            "SELECT id, version FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids,)
        ).fetchall()
    return {(row[0], row[1]) for row in rows} & set(keys)


# -- import ----------------------------------------------------------------------------------------


def _plain(column: str, value: Any) -> Any:
    """A value as compared: JSON text by its value (a backend may store it reformatted)."""
    if column in JSON_COLUMNS and isinstance(value, str):
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    return value


def _key(kind: Kind, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[column] for column in (kind.key or kind.columns))


def _held(conn: Any, kind: Kind, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The store's rows with the keys of `rows`, by key."""
    if kind.key == SCOPE:  # few rows, NULLs in the key
        where, params = "TRUE", []
    else:
        where, params = (
            f"t.{kind.key[0]} IN (SELECT value FROM json_each(?))",
            [_ids([r[kind.key[0]] for r in rows])],
        )
    return {_key(kind, row): row for row in _select(conn, kind, where, params)}


def _keyed(conn: Any, kind: Kind, rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(the rows the store lacks, how many it holds already); refuses a held key whose row
    differs in what makes it that row."""
    if not rows:
        return [], 0
    held = _held(conn, kind, rows)
    new, seen = [], set()
    for row in rows:
        key = _key(kind, row)
        if key in seen:
            raise ImportConflictError(
                f"the file holds {kind.name} {_shown(key)} twice; it is not a valid export"
            )
        seen.add(key)
        mine = held.get(key)
        if mine is None:
            new.append(row)
            continue
        differing = [c for c in kind.compared if _plain(c, row[c]) != _plain(c, mine[c])]
        if differing:
            raise ImportConflictError(
                f"{kind.name} {_shown(key)} is already in this store with another {', '.join(differing)} "
                f"(here {_shown(tuple(mine[c] for c in differing))}, in the file "
                f"{_shown(tuple(row[c] for c in differing))}); nothing was imported. The file and this store "
                "have diverged: import it into a new store, or erase the scope here first"
            )
    return new, len(rows) - len(new)


def _shown(key: tuple[Any, ...]) -> str:
    text = ", ".join(repr(part) for part in key)
    return text if len(text) <= 200 else text[:200] + "..."


def _unmatched(
    conn: Any, kind: Kind, rows: Sequence[dict[str, Any]], where: str, params: list[Any]
) -> list[dict[str, Any]]:
    """Rows without a key (events, write runs): those not already held, counting equal rows."""
    held = Counter(
        tuple(_plain(c, row[c]) for c in kind.columns) for row in _select(conn, kind, where, params)
    )
    new = []
    for row in rows:
        found = tuple(_plain(c, row[c]) for c in kind.columns)
        if held[found] > 0:
            held[found] -= 1
        else:
            new.append(row)
    return new


def _same_slot(conn: Any, kind: Kind, rows: Sequence[dict[str, Any]], slot: str) -> None:
    """Refuse new rows whose unique (scope, `slot`) another row of the store holds."""
    if not rows:
        return
    taken = {
        (*(row[c] for c in SCOPE), row[slot]): row["id"]
        for row in _select(
            conn, kind, f"t.{slot} IN (SELECT value FROM json_each(?))", [_ids([r[slot] for r in rows])]
        )
    }
    for row in rows:
        other = taken.get((*(row[c] for c in SCOPE), row[slot]))
        if other is not None and other != row["id"]:
            raise ImportConflictError(
                f"{kind.name} {row['id']!r} ({slot} {row[slot]!r}) conflicts with {other!r}, which this store "
                f"holds for the same scope and {slot}; nothing was imported"
            )


def _insert(conn: Any, kind: Kind, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        conn.executemany(
            f"INSERT INTO {kind.table} ({', '.join(kind.columns)}) VALUES ({', '.join('?' * len(kind.columns))})",
            [tuple(row[c] for c in kind.columns) for row in rows],
        )


def keyword_entries(conn: Any, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The keyword-index entries of memory rows (with their `row_id`): a raw turn's context is
    the text of the episodes its `turn_context` links in `conn` name (what TurnContext indexed
    it with), so superseded turns keep theirs and no window settings need to be known."""
    quoted: dict[int, list[Any]] = {}
    for link in conn.execute(
        "SELECT c.row_id, e.name, e.content FROM turn_context c JOIN episodes e ON e.id = c.episode_id "
        "WHERE c.row_id IN (SELECT value FROM json_each(?)) ORDER BY c.row_id, e.occurred_at, e.rowid",
        (json.dumps([row["row_id"] for row in rows]),),
    ).fetchall():
        quoted.setdefault(link["row_id"], []).append(link)
    return [
        (row["row_id"], row["content"], context_text(quoted.get(row["row_id"], [])), *(row[c] for c in SCOPE))
        for row in rows
    ]


def import_rows(
    store: Any, found: Mapping[str, list[dict[str, Any]]], vectors: Mapping[tuple[str, int], np.ndarray]
) -> dict[str, tuple[int, int]]:
    """Write the rows of `found` (as `read_scope` returns them) the store lacks, in one
    transaction, each new memory row with its vector (`vectors` by (id, version)), keyword
    entry and turn context. Returns {record type: (new, already held)}."""
    counts: dict[str, tuple[int, int]] = {}
    with store.transaction() as conn:

        def keyed(name: str) -> list[dict[str, Any]]:
            new, held = _keyed(conn, BY_NAME[name], found.get(name, []))
            counts[name] = (len(new), held)
            return new

        entities = keyed("entity")
        _same_slot(conn, BY_NAME["entity"], entities, "normalized_name")
        _insert(conn, BY_NAME["entity"], entities)
        _insert(conn, BY_NAME["episode"], keyed("episode"))
        _insert_memories(conn, store, keyed("memory"), found.get("turn_context", []), vectors)
        _insert(conn, BY_NAME["memory_source"], keyed("memory_source"))
        _insert(conn, BY_NAME["memory_link"], keyed("memory_link"))
        blocks = keyed("block")
        _same_slot(conn, BY_NAME["block"], blocks, "label")
        _insert(conn, BY_NAME["block"], blocks)
        _insert(conn, BY_NAME["block_version"], keyed("block_version"))
        _insert(conn, BY_NAME["lifecycle_settings"], keyed("lifecycle_settings"))
        for name, column, of in (
            ("memory_event", "memory_id", "memory_id"),
            ("write_run", "started_at", "started_at"),
        ):
            rows = found.get(name, [])
            new = _unmatched(
                conn, BY_NAME[name], rows, f"t.{column} IN (SELECT value FROM json_each(?))",
                [_ids([row[of] for row in rows])],
            )  # fmt: skip
            _insert(conn, BY_NAME[name], new)
            counts[name] = (len(new), len(rows) - len(new))
    store.keywords.clear_cache()
    return counts


def _insert_memories(
    conn: Any,
    store: Any,
    rows: Sequence[dict[str, Any]],
    links: Sequence[Mapping[str, Any]],
    vectors: Mapping[tuple[str, int], np.ndarray],
) -> None:
    if not rows:
        return
    # One batch, then the new row ids by (id, version): a round trip per row cost PostgreSQL
    # most of an import.
    _insert(conn, BY_NAME["memory"], rows)
    assigned = {
        (row[1], row[2]): row[0]
        for row in conn.execute(
            "SELECT row_id, id, version FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (_ids([row["id"] for row in rows]),),
        ).fetchall()
    }
    indexed = [{**row, "row_id": assigned[(row["id"], row["version"])]} for row in rows]
    row_of = {(row["id"], row["version"]): row["row_id"] for row in indexed}
    conn.executemany(
        "INSERT INTO turn_context (row_id, episode_id) VALUES (?, ?)",
        [
            (row_of[(link["memory_id"], link["version"])], link["episode_id"])
            for link in links
            if (link["memory_id"], link["version"]) in row_of
        ],
    )
    store.vectors.insert(
        conn,
        [row["row_id"] for row in indexed],
        [row["user_id"] or NO_USER for row in indexed],
        [row["agent_id"] or "" for row in indexed],
        [row["run_id"] or "" for row in indexed],
        np.stack([np.asarray(vectors[(row["id"], row["version"])], dtype=np.float32) for row in indexed]),
    )
    store.keywords.insert(conn, keyword_entries(conn, indexed))
