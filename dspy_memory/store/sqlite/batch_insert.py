"""SQLite's side of the batch-insert hook (store/backend.py, Connections.insert_rows): the
statements SQLite runs fastest, one prepared INSERT per row (executemany, a loop in C), or
several rows per INSERT where the new ids must come back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Parameters per multi-row INSERT: 11,000 for the 22 columns of memories, within the 32,766
# SQLite allows.
_MAX_PARAMETERS = 11_000


def insert_rows(
    conn: Any,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    generated: str | None = None,
) -> list[int]:
    """Insert `rows` (values in the order of `columns`) into `table` inside the caller's
    transaction; with `generated`, the ids that column (an INTEGER PRIMARY KEY) gave the
    rows, in the rows' order (store/backend.py, Connections.insert_rows)."""
    values = "(" + ", ".join(["?"] * len(columns)) + ")"
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    if generated is None:
        conn.executemany(head + values, rows)
        return []
    ids: list[int] = []
    # Several rows per statement: one statement per row cost a fifth of an add of raw turns.
    per_statement = max(1, _MAX_PARAMETERS // len(columns))
    for offset in range(0, len(rows), per_statement):
        chunk = rows[offset : offset + per_statement]
        returned = conn.execute(
            head + ", ".join([values] * len(chunk)) + f" RETURNING {generated}",
            [value for row in chunk for value in row],
        ).fetchall()
        # RETURNING's order is not promised, but a new row's id is above every id before
        # it (the largest plus one; AUTOINCREMENT: above any ever used) and the rows of a
        # statement are inserted in order, so sorted ids are the rows' order.
        ids += sorted(row[0] for row in returned)
    return ids
