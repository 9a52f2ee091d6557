"""Import's SQL (docs/governance.md, "Export and import"): rows as `store/exchange.py` reads
them written into a store in one transaction, each new memory row with its vector, keyword entry
and turn context. See store/exchange.py for how held rows are matched and conflicts refused."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dspy_memory.store.backend import NO_USER
from dspy_memory.store.exchange import (
    BY_NAME,
    JSON_COLUMNS,
    SCOPE,
    ImportConflictError,
    Kind,
    id_list,
    select_rows,
)
from dspy_memory.store.turns import context_text


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
            [id_list([r[kind.key[0]] for r in rows])],
        )
    return {_key(kind, row): row for row in select_rows(conn, kind, where, params)}


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
        tuple(_plain(c, row[c]) for c in kind.columns) for row in select_rows(conn, kind, where, params)
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
        for row in select_rows(
            conn, kind, f"t.{slot} IN (SELECT value FROM json_each(?))", [id_list([r[slot] for r in rows])]
        )
    }
    for row in rows:
        other = taken.get((*(row[c] for c in SCOPE), row[slot]))
        if other is not None and other != row["id"]:
            raise ImportConflictError(
                f"{kind.name} {row['id']!r} ({slot} {row[slot]!r}) conflicts with {other!r}, which this store "
                f"holds for the same scope and {slot}; nothing was imported"
            )


def insert_rows(conn: Any, table: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows (dicts by column name) into `table`, as they are: ids and times kept (import and
    migrate)."""
    if rows:
        conn.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            [tuple(row[column] for column in columns) for row in rows],
        )


def _insert(conn: Any, kind: Kind, rows: Sequence[dict[str, Any]]) -> None:
    insert_rows(conn, kind.table, kind.columns, rows)


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
        for name in ("lifecycle_settings", "retention_settings"):
            _insert(conn, BY_NAME[name], keyed(name))
        runs = found.get("write_run", [])
        unnamed = [row for row in runs if row["uid"] is None]  # logged before runs had a uid
        for name, rows, column in (("memory_event", found.get("memory_event", []), "memory_id"),
                                   ("write_run", unnamed, "started_at")):  # fmt: skip
            new = _unmatched(
                conn, BY_NAME[name], rows, f"t.{column} IN (SELECT value FROM json_each(?))",
                [id_list([row[column] for row in rows])],
            )  # fmt: skip
            _insert(conn, BY_NAME[name], new)
            counts[name] = (len(new), len(rows) - len(new))
        new_runs, held_runs = _keyed(
            conn, BY_NAME["write_run"], [row for row in runs if row["uid"] is not None]
        )
        _insert(conn, BY_NAME["write_run"], new_runs)
        counts["write_run"] = (counts["write_run"][0] + len(new_runs), counts["write_run"][1] + held_runs)
        for name in ("write_run_candidate", "write_run_op", "feedback"):
            _insert(conn, BY_NAME[name], keyed(name))
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
            (id_list([row["id"] for row in rows]),),
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
