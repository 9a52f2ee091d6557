"""Import's SQL (docs/governance.md, "Export and import"): rows as `store/exchange.py` reads
them written into a store batch by batch in one transaction, each new memory row with its vector,
keyword entry and turn context. See store/exchange.py for how held rows are matched and
conflicts refused."""

from __future__ import annotations

import hashlib
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


def _shown(key: tuple[Any, ...]) -> str:
    text = ", ".join(repr(part) for part in key)
    return text if len(text) <= 200 else text[:200] + "..."


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


# The record types an import counts (new, already held), in the order it reports them.
COUNTED = (
    "entity", "episode", "memory", "memory_source", "memory_link", "memory_event", "block", "block_version",
    "lifecycle_settings", "retention_settings", "write_run", "write_run_candidate", "write_run_op", "feedback",
)  # fmt: skip
# A new entity or block must not take the name or label another id holds in its scope.
SLOTS = {"entity": "normalized_name", "block": "label"}
Key = tuple[str, int]  # a memory version: (id, version)
Placed = tuple[int, str, str, str]  # a memory row as its vector is stored: row id, partition, agent, run


class Importer:
    """Rows as `read_scope` returns them written into the store in the caller's write
    transaction `conn`, a batch at a time: a batch holds rows of one record type in file order,
    and the batches of a type come after those of the types it names (the export's order). The
    caller has checked that the file names no key twice. `counts`: {type: [new, already held]}."""

    def __init__(self, store: Any, conn: Any) -> None:
        self.store, self.conn = store, conn
        self.counts = {name: [0, 0] for name in COUNTED}
        # Events, and runs without a uid, count as held when an equal row was there before the
        # import, not when an earlier batch of it wrote one; each held row matches once. What
        # is kept of the matched rows is a digest, not their content.
        self._before = {
            name: conn.execute(f"SELECT coalesce(max(id), 0) FROM {BY_NAME[name].table}").fetchone()[0]
            for name in ("memory_event", "write_run")
        }
        self._matched = {name: Counter[bytes]() for name in self._before}

    def add(self, name: str, rows: Sequence[dict[str, Any]]) -> None:
        """Write the batch's rows the store lacks (a memory batch: `new_memories`)."""
        kind = BY_NAME[name]
        if name == "memory_event":
            new = self._unmatched(kind, rows, "memory_id")
        elif name == "write_run":  # runs logged before runs had a uid are matched by the whole row
            unnamed = self._unmatched(kind, [row for row in rows if row["uid"] is None], "started_at")
            fresh = {
                id(row) for row in [*unnamed, *self._keyed(kind, [r for r in rows if r["uid"] is not None])]
            }
            new = [row for row in rows if id(row) in fresh]
        else:
            new = self._keyed(kind, rows)
            if name in SLOTS:
                _same_slot(self.conn, kind, new, SLOTS[name])
        insert_rows(self.conn, kind.table, kind.columns, new)
        self._count(name, len(new), len(rows))

    def new_memories(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The memory rows of the batch the store lacks (for `insert_memories`)."""
        new = self._keyed(BY_NAME["memory"], rows)
        self._count("memory", len(new), len(rows))
        return new

    def insert_memories(
        self,
        rows: Sequence[dict[str, Any]],
        links: Mapping[Key, Sequence[str]],
        vectors: Mapping[Key, np.ndarray],
    ) -> dict[Key, Placed]:
        """Insert new memory rows, each with its turn context (`links`: the episode ids its keyword
        context quotes), keyword entry and, if `vectors` has it, vector. Returns the rows left
        without one, for `insert_vectors` when their vectors come."""
        if not rows:
            return {}
        memory = BY_NAME["memory"]
        # One batch, then the new row ids by (id, version): a round trip per row cost PostgreSQL
        # most of an import.
        insert_rows(self.conn, memory.table, memory.columns, rows)
        assigned = {
            (row[1], row[2]): row[0]
            for row in self.conn.execute(
                "SELECT row_id, id, version FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                (id_list([row["id"] for row in rows]),),
            ).fetchall()
        }
        placed = {
            (row["id"], row["version"]): (
                assigned[(row["id"], row["version"])], row["user_id"] or NO_USER, row["agent_id"] or "",
                row["run_id"] or "",
            )
            for row in rows
        }  # fmt: skip
        self.conn.executemany(
            "INSERT INTO turn_context (row_id, episode_id) VALUES (?, ?)",
            [(place[0], episode) for key, place in placed.items() for episode in links.get(key, ())],
        )
        ready = [key for key in placed if key in vectors]
        if ready:
            self.insert_vectors([placed[key] for key in ready], np.stack([vectors[key] for key in ready]))
        indexed = [{**row, "row_id": placed[(row["id"], row["version"])][0]} for row in rows]
        self.store.keywords.insert(self.conn, keyword_entries(self.conn, indexed))
        return {key: place for key, place in placed.items() if key not in vectors}

    def insert_vectors(self, rows: Sequence[Placed], embeddings: np.ndarray) -> None:
        if rows:
            row_ids, partitions, agents, runs = (list(column) for column in zip(*rows))
            self.store.vectors.insert(
                self.conn, row_ids, partitions, agents, runs, np.asarray(embeddings, dtype=np.float32)
            )

    def _count(self, name: str, new: int, batch: int) -> None:
        self.counts[name][0] += new
        self.counts[name][1] += batch - new

    def _keyed(self, kind: Kind, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows the store lacks; refuses a held key whose row differs in what makes it that row."""
        if not rows:
            return []
        held, new = _held(self.conn, kind, rows), []
        for row in rows:
            key = _key(kind, row)
            mine = held.get(key)
            if mine is None:
                new.append(row)
                continue
            differing = [c for c in kind.compared if _plain(c, row[c]) != _plain(c, mine[c])]
            if differing:
                raise ImportConflictError(
                    f"{kind.name} {_shown(key)} is already in this store with another {', '.join(differing)} "
                    f"(here {_shown(tuple(mine[c] for c in differing))}, in the file "
                    f"{_shown(tuple(row[c] for c in differing))}); nothing was imported. The file and this "
                    "store have diverged: import it into a new store, or erase the scope here first"
                )
        return new

    def _unmatched(self, kind: Kind, rows: Sequence[dict[str, Any]], column: str) -> list[dict[str, Any]]:
        """Rows without a key (events, write runs without a uid): those not already held."""
        if not rows:
            return []
        where = f"t.{column} IN (SELECT value FROM json_each(?)) AND t.id <= ?"
        params = [id_list([row[column] for row in rows]), self._before[kind.name]]
        held = Counter(_digest(kind, row) for row in select_rows(self.conn, kind, where, params))
        matched, new = self._matched[kind.name], []
        for row in rows:
            digest = _digest(kind, row)
            if matched[digest] < held[digest]:
                matched[digest] += 1
            else:
                new.append(row)
        return new


def _digest(kind: Kind, row: Mapping[str, Any]) -> bytes:
    found = tuple(_plain(column, row[column]) for column in kind.columns)
    return hashlib.blake2b(repr(found).encode(), digest_size=16).digest()
