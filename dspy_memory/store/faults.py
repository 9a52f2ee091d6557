"""Storage faults of either database as StorageErrors that name the file or database and say
what to do. The connections (sqlite/connection.py, postgres/connection.py) translate every
statement's driver error through here; what is not a storage fault is left as it was."""

from __future__ import annotations

import os
import shutil

from dspy_memory.errors import StorageError, StorageFullError

ROLLED_BACK = "this transaction was rolled back, so nothing of it was written"

# SQLite's primary result codes (the low byte of an extended one).
SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL = 8, 10, 11, 13
# What a driver without `sqlite_errorcode` says instead.
_SQLITE_TEXTS = (
    ("database or disk is full", SQLITE_FULL),
    ("disk I/O error", SQLITE_IOERR),
    ("malformed", SQLITE_CORRUPT),
    ("readonly database", SQLITE_READONLY),
)


def sqlite_storage_error(path: str, exc: BaseException) -> StorageError | None:
    """The StorageError a SQLite driver error means, or None when it is not a storage fault."""
    text = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        primary = code & 0xFF
    else:
        primary = next((found for words, found in _SQLITE_TEXTS if words in text), None)
    if primary == SQLITE_FULL:
        return StorageFullError(
            f"{path} cannot grow: the disk holding it is full, or the file reached its size limit "
            f"({_usage(path)}); free space on that disk, then retry; {ROLLED_BACK}",
            path=path,
        )
    if primary == SQLITE_IOERR:
        return StorageError(
            f"reading or writing {path} failed: {text}. Check the disk and its file system (space, "
            f"permissions, a read-only mount, the kernel log), then retry; {ROLLED_BACK}. "
            f"`dspy-memory verify {path}` tells whether the file is intact",
            path=path,
        )
    if primary == SQLITE_CORRUPT:
        return StorageError(
            f"{path} is damaged: {text}. `dspy-memory verify {path}` says where; restore the file "
            f"from a backup (`dspy-memory restore-backup`, docs/governance.md); {ROLLED_BACK}",
            path=path,
        )
    if primary == SQLITE_READONLY:
        return StorageError(
            f"cannot write to {path}: {text}. The file, its folder or its file system is read-only "
            f"(SQLite also writes the -wal and -shm files next to it): make them writable, then "
            f"retry; {ROLLED_BACK}",
            path=path,
        )
    return None


def _usage(path: str) -> str:
    """How much the file uses and how much its disk has left, as far as can be told."""
    if not os.path.exists(path):
        return "an in-memory database" if path == ":memory:" else "its size is unknown"
    used = sum(os.path.getsize(name) for name in (path, f"{path}-wal") if os.path.exists(name))
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    except OSError:
        return f"the file and its -wal use {used:,} bytes"
    return f"the file and its -wal use {used:,} bytes; {free:,} bytes are free on that disk"


def postgres_storage_error(where: str, exc: BaseException) -> StorageError | None:
    """The StorageError a psycopg error means (by its SQLSTATE), or None when it is not a
    storage fault. `where` is the database's URL without its password."""
    state = getattr(exc, "sqlstate", None) or ""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if state == "53100":  # disk_full
        return StorageFullError(
            f"the PostgreSQL server of {where} is out of disk space: {detail}; free space on its "
            f"data disk (or raise its quota), then retry; {ROLLED_BACK}",
            path=where,
        )
    if state.startswith("58") or state in ("XX001", "XX002"):  # system/io errors, corrupted data
        return StorageError(
            f"the PostgreSQL server of {where} could not read or write its files: {detail}. Check "
            f"its disks and its server log, then retry; {ROLLED_BACK}",
            path=where,
        )
    if state == "25006":  # read_only_sql_transaction: a standby, or a read-only default
        return StorageError(
            f"{where} is read-only ({detail}): connect to the primary server, or allow writes "
            f"there, then retry; {ROLLED_BACK}",
            path=where,
        )
    return None
