"""Files as an older schema left them, written by today's code: the store is migrated only to
`version`, plus the columns of later migrations today's code writes (all NULL in what it
writes here), which `as_left` drops again, so the file holds what that version held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlean

from dspy_memory.store.sqlite.migrations import MIGRATIONS, migrate

# (the migration that added it, table, column) for each column today's code writes.
_LATER_COLUMNS = ((15, "memories", "expires_at"), (15, "episodes", "expires_at"))


def migrated_to(version: int) -> Callable[[Any], list[int]]:
    """A stand-in for the SQLite backend's `migrate` that stops at `version` (monkeypatch it)."""

    def migrate_to(conn: Any) -> list[int]:
        applied = migrate(conn, tuple(m for m in MIGRATIONS if m.version <= version))
        for added_in, table, column in _LATER_COLUMNS:
            if added_in > version:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        return applied

    return migrate_to


def as_left(path: str, version: int) -> None:
    """Drop the later columns `migrated_to(version)` added (the file must be closed)."""
    conn = sqlean.connect(path)
    try:
        for added_in, table, column in _LATER_COLUMNS:
            if added_in > version:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    finally:
        conn.close()
