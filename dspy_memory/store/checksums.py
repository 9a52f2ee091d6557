"""A store's logical tables (the rows every backend holds alike), read in key order, and
checksums of their contents that agree across backends: store/transfer.py copies and compares
stores with them.

A row's checksum input is canonical JSON of its columns by name: JSON text columns by value
(a backend may store them reformatted), floats by repr; `episodes` includes its rowid (SQLite's
implicit one, a real column on PostgreSQL), as the order of episodes depends on it. Vectors
count by row id, partition and float32 bytes. Keyword indexes differ per backend and are
compared by their row counts (store/transfer.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspy_memory.store.backend import VectorIndex

EMBEDDER_KEYS = ("embedder_dim", "embedder_name")
# What of `meta` travels with a store's rows: the embedder, and the audit log's salt (its scope
# hashes) and head (store/audit_log.py).
META_KEYS = ("audit_head", "audit_salt", *EMBEDDER_KEYS)
# Text columns holding JSON: compared by value (a backend may store it reformatted).
JSON_COLUMNS = frozenset(
    {"metadata", "settings", "episode_ids", "rejected", "counts", "memory_ids", "details", "expected"}
)


@dataclass(frozen=True)
class Table:
    name: str
    key: tuple[str, ...]
    # No primary key, a unique scope instead: the key is the scope with NULL read as ''.
    scoped: bool = False
    # (table, column) whose values, in order, are those of the key's first column: rows are
    # read a batch of those at a time (`pages`). On SQLite `memory_sources` is a view over
    # integer links (store/sqlite/schema_compact.py, V13) that only a sort of every row puts in
    # key order: per page, 40 s instead of 4 for its 100k rows.
    lead: tuple[str, str] | None = None

    @property
    def key_sql(self) -> str:
        return ", ".join(f"coalesce({c}, '')" if self.scoped else c for c in self.key)

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(("" if row[c] is None else row[c]) if self.scoped else row[c] for c in self.key)


# In the order of the foreign keys (memories -> entities, memory_sources -> episodes,
# block_versions -> blocks). `meta` and `schema_migrations` are each store's own.
TABLES = (
    Table("entities", ("id",)),
    Table("episodes", ("id",)),
    Table("memories", ("row_id",)),
    Table("memory_sources", ("memory_id", "episode_id"), lead=("memories", "id")),
    Table("memory_events", ("id",)),
    Table("blocks", ("id",)),
    Table("block_versions", ("block_id", "version")),
    Table("write_runs", ("id",)),
    Table("write_run_candidates", ("write_run_id", "alias")),
    Table("write_run_ops", ("write_run_id", "op_index")),
    Table("feedback", ("id",)),
    Table("turn_context", ("row_id", "episode_id")),
    Table("lifecycle_settings", ("user_id", "agent_id", "run_id"), scoped=True),
    Table("retention_settings", ("user_id", "agent_id", "run_id"), scoped=True),
    Table("memory_links", ("memory_id", "linked_id")),
    Table("api_keys", ("id",)),
    Table("audit_log", ("id",)),
)


def column_names(conn: Any, table: str) -> list[str]:
    """A table's columns by name, sorted; `episodes` with its rowid first (a real column on
    PostgreSQL, SQLite's implicit one), as the order of episodes depends on it."""
    cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")
    names = sorted(column[0] for column in cursor.description if column[0] != "rowid")
    return ["rowid", *names] if table == "episodes" else names


def pages(conn: Any, table: Table, columns: list[str], size: int) -> Iterator[list[dict[str, Any]]]:
    """Every row of `table`, in key order, `size` rows at a time (as dicts by column name); with
    a `lead`, the rows of `size` of its values at a time (rows whose first key is not among
    them are not read: on SQLite there are none)."""
    if table.lead is not None:
        yield from _pages_by_lead(conn, table, table.lead, columns, size)
        return
    after: tuple[Any, ...] | None = None
    marks = ", ".join("?" * len(table.key))
    while True:
        where = f"WHERE ({table.key_sql}) > ({marks}) " if after is not None else ""
        rows = conn.execute(
            f"SELECT {', '.join(columns)} FROM {table.name} {where}ORDER BY {table.key_sql} LIMIT ?",
            [*(after or ()), size],
        ).fetchall()
        if not rows:
            return
        page = [dict(zip(columns, row)) for row in rows]
        yield page
        after = table.key_of(page[-1])


def _pages_by_lead(
    conn: Any, table: Table, lead: tuple[str, str], columns: list[str], size: int
) -> Iterator[list[dict[str, Any]]]:
    source, column = lead
    after: str | None = None
    while True:
        where = f"WHERE {column} > ? " if after is not None else ""
        values = [
            row[0]
            for row in conn.execute(
                f"SELECT {column} FROM {source} {where}GROUP BY {column} ORDER BY {column} LIMIT ?",
                [*([after] if after is not None else []), size],
            )
        ]
        if not values:
            return
        rows = conn.execute(
            f"SELECT {', '.join(columns)} FROM {table.name} "
            f"WHERE {table.key[0]} IN (SELECT value FROM json_each(?)) ORDER BY {table.key_sql}",
            (json.dumps(values),),
        ).fetchall()
        if rows:
            yield [dict(zip(columns, row)) for row in rows]
        after = values[-1]


def _canonical(name: str, value: Any) -> Any:
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, str) and name in JSON_COLUMNS:
        try:
            return {"json": json.dumps(json.loads(value), sort_keys=True, ensure_ascii=False)}
        except ValueError:
            return value
    return value


def _row_bytes(row: dict[str, Any]) -> bytes:
    canonical = {name: _canonical(name, value) for name, value in row.items()}
    return json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"


def digest(conn: Any, table: Table, columns: list[str], size: int) -> tuple[int, str]:
    """(rows, sha256 of the rows in key order)."""
    hasher, count = hashlib.sha256(), 0
    for page in pages(conn, table, columns, size):
        for row in page:
            hasher.update(_row_bytes(row))
        count += len(page)
    return count, hasher.hexdigest()


def meta_rows(conn: Any) -> list[tuple[str, str]]:
    """The `meta` rows that travel with the store's rows (META_KEYS), by key."""
    rows = conn.execute(
        "SELECT key, value FROM meta WHERE key IN (SELECT value FROM json_each(?)) ORDER BY key",
        (json.dumps(META_KEYS),),
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def embedder_digest(conn: Any) -> tuple[int, str]:
    """(rows, sha256) of the embedder a store is bound to and its audit log's salt and head
    (the rest of `meta` is its own)."""
    rows = meta_rows(conn)
    return len(rows), hashlib.sha256(json.dumps([list(row) for row in rows]).encode()).hexdigest()


def vector_digest(conn: Any, vectors: VectorIndex, size: int) -> tuple[int, str]:
    """(vectors, sha256 over each one's row id, partition and float32 bytes, by row id)."""
    hasher, count, after = hashlib.sha256(), 0, None
    while True:
        rows = conn.execute(
            "SELECT row_id, partition_key, agent_id, run_id, embedding FROM memory_vectors "
            "WHERE row_id > ? ORDER BY row_id LIMIT ?",
            (-1 if after is None else after, size),
        ).fetchall()
        if not rows:
            return count, hasher.hexdigest()
        for row in rows:
            hasher.update(
                json.dumps([row["row_id"], row["partition_key"], row["agent_id"], row["run_id"]]).encode()
            )
            hasher.update(np.asarray(vectors.decode(row["embedding"]), dtype="<f4").tobytes())
        count += len(rows)
        after = rows[-1]["row_id"]
