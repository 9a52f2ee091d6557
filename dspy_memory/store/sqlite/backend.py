"""The SQLite backend: one file, sqlite-vec for vectors, FTS5 for keywords."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dspy_memory.errors import MemoryFileError, StorageError, StorageFullError
from dspy_memory.store.sqlite import copy as sqlite_copy
from dspy_memory.store.sqlite.cipher import looks_encrypted, missing_key_error, raw_key
from dspy_memory.store.sqlite.connection import CIPHER_DRIVER_MODULES, Connections, resolve_driver
from dspy_memory.store.sqlite.files import checked_file_path, file_error
from dspy_memory.store.sqlite.freespace import zero_free_space
from dspy_memory.store.sqlite.keywords import KeywordIndex
from dspy_memory.store.sqlite.migrations import check_version, current_version, migrate
from dspy_memory.store.sqlite.vectors import VectorIndex

logger = logging.getLogger("dspy_memory")


class SqliteJson:
    """Metadata filters with SQLite's JSON functions (see backend.JsonPaths)."""

    def value(self, key: str) -> tuple[str, list[Any]]:
        return "json_extract(m.metadata, ?)", [f'$."{key}"']

    def compare(self, value_sql: str, op: str) -> str:
        return f"{value_sql} {op} ?"

    def param(self, operand: Any) -> Any:
        return operand

    def one_of(self, value_sql: str, operands: list[Any], *, negate: bool) -> tuple[str, list[Any]]:
        import json

        return f"{value_sql} {'NOT ' if negate else ''}IN (SELECT value FROM json_each(?))", [
            json.dumps(operands)
        ]

    def exists(self, key: str) -> tuple[str, list[Any]]:
        return "json_type(m.metadata, ?) IS NOT NULL", [f'$."{key}"']


class SqliteBackend:
    name = "sqlite"
    json = SqliteJson()

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int,
        driver: str | None = None,
        encryption_key: str | None = None,
        read_only: bool = False,
    ) -> None:
        """`encryption_key`: a passphrase (SQLCipher; None: the file is plaintext). `read_only`:
        open an existing file without changing it (SQLite's mode=ro)."""
        if path != ":memory:" and not path.startswith("file:"):
            path = checked_file_path(path)
        if read_only and (path == ":memory:" or path.startswith("file:") or not Path(path).is_file()):
            raise MemoryFileError(
                f"no memory file at {path!r}: a read-only Memory opens an existing file (give its path)"
            )
        self.path = path
        self.read_only = read_only
        self.encrypted = encryption_key is not None
        if not self.encrypted and looks_encrypted(path):
            raise missing_key_error(path)
        # Derived before any connection (once per process), so a bad key fails before the driver
        # is chosen.
        key = raw_key(encryption_key) if self.encrypted else None
        self.driver = resolve_driver(driver, encrypted=self.encrypted)
        self.conns = Connections(
            path, self.driver, busy_timeout_ms=busy_timeout_ms, key=key, read_only=read_only
        )

    @property
    def driver_name(self) -> str:
        return self.driver.__name__

    def migrate(self) -> list[int]:
        with self.conns.read() as conn:
            if self.read_only:
                check_version(current_version(conn), where=repr(self.path))
                return []
            return migrate(conn)

    def vector_index(self, *, cache_min_rows: int, cache_max_rows: int) -> VectorIndex:
        return VectorIndex(cache_min_rows=cache_min_rows, cache_max_rows=cache_max_rows)

    def keyword_index(self, *, score_budget: int, context_weight: float) -> KeywordIndex:
        return KeywordIndex(score_budget=score_budget, context_weight=context_weight)

    def compact(self) -> int:
        """Zero the free space left inside pages (see `zero_free_space`), then checkpoint the
        WAL into the file and truncate it: until then the WAL holds the pages as they were
        before the purge. Returns the number of pages whose free space was zeroed."""
        if self.path == ":memory:":
            return 0
        with self.conns.transaction() as conn:
            pages = zero_free_space(conn)
        if pages is None:
            # SQLCipher's builds have no sqlite_dbpage: expected there (for plain files too, when
            # sqlcipher3 is the process's library), so not a warning.
            (logger.info if self.driver.__name__ in CIPHER_DRIVER_MODULES else logger.warning)(
                "this SQLite has no sqlite_dbpage table: VACUUM clears free space instead"
            )
            with self.conns.read() as conn:
                conn.execute("VACUUM")
        with self.conns.read() as conn:
            busy, frames, moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or frames > 0:
            # Another connection (a reader in another process, or a statement left open) kept
            # the WAL; it is emptied by the next checkpoint that nobody blocks.
            logger.warning(
                "erased data could not be moved out of %s-wal yet (%s of %s frames checkpointed); "
                "it stays there until the next checkpoint",
                self.path,
                moved,
                frames,
            )
        return pages or 0

    def reset_sequences(self, conn: Any) -> None:
        """Rows were inserted with their own ids (store/transfer.py): nothing to do, as an
        AUTOINCREMENT table continues after the largest id ever inserted."""

    def integrity(self, conn: Any) -> list[str]:
        return sqlite_copy.integrity(conn)

    def index_rows(self, conn: Any) -> dict[str, int]:
        return sqlite_copy.index_rows(conn)

    def open_error(self, exc: BaseException) -> Exception | None:
        if isinstance(exc, StorageError) and not isinstance(exc, StorageFullError):
            # On opening, a read-only or unreadable file is a MemoryFileError that says so.
            exc = exc.__cause__ or exc
        return file_error(self.path, exc) if isinstance(exc, self.driver.DatabaseError) else None

    def close(self) -> None:
        self.conns.close()
