"""Files the governance operations write: a path argument checked, a staged file written next
to its place and moved in (or removed, with its -wal/-shm, when a step fails), a file's sha256,
fsync. Used by backups, restores, key changes and exports."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dspy_memory.errors import InvalidInputError

# What SQLite keeps next to a database file; a file is swapped only with none of them left.
SIDE_FILES = ("-wal", "-shm", "-journal")


def file_argument(value: Any, name: str) -> str:
    """`value` as a path, or an InvalidInputError that says what was wrong with it."""
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidInputError(
            f"{name} must be a file path (str or os.PathLike), not {type(value).__name__}"
        )
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise InvalidInputError(f"{name} must name a file, got {text!r}")
    path = os.fspath(Path(text).expanduser())
    if os.path.isdir(path):
        raise InvalidInputError(f"{name} {path!r} is a folder; give a file name in it")
    return path


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def temporary_next_to(path: str, purpose: str) -> str:
    """A new file name in `path`'s folder (the same filesystem, so os.replace is atomic)."""
    return f"{path}.{purpose}-{os.getpid()}-{time.monotonic_ns()}"


@contextmanager
def staged(path: str, purpose: str) -> Iterator[str]:
    """A temporary file next to `path` for the block to write and move in; removed (with any
    -wal/-shm) if the block fails, so a failed step leaves nothing behind."""
    temporary = temporary_next_to(path, purpose)
    try:
        yield temporary
    except BaseException:
        remove_file(temporary)
        raise


def remove_file(path: str) -> None:
    for name in (path, *(path + side for side in SIDE_FILES)):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def fsync(path: str) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if os.path.isdir(path) else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:  # pragma: no cover - folders cannot be opened on Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on folders
        pass
    finally:
        os.close(fd)


def looks_encrypted(path: str | os.PathLike[str]) -> bool:
    """Whether the file at `path` looks like an encrypted memory file (no SQLite header)."""
    from dspy_memory.store.sqlite.cipher import looks_encrypted as by_header

    return by_header(os.fspath(path))
