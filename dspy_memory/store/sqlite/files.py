"""What a path must be to hold a memory file, and what a driver's error on opening it means."""

from __future__ import annotations

from pathlib import Path

from dspy_memory.errors import MemoryFileError, MemoryFolderMissingError


def checked_file_path(path: str) -> str:
    """`path` with ~ expanded, once it can name a memory file (else a MemoryFileError that says
    why): not a folder, in a folder that exists."""
    expanded = Path(path).expanduser()
    if expanded.is_dir():
        raise MemoryFileError(
            f"{path!r} is a folder; give a file name in it, e.g. {str(expanded / 'memory.db')!r}"
        )
    parent = expanded.resolve().parent
    if not parent.is_dir():
        raise MemoryFolderMissingError(
            f"cannot create the memory file {path!r}: folder {str(parent)!r} does not exist"
        )
    return str(expanded)


def file_error(path: str, exc: Exception) -> MemoryFileError:
    """What a driver error on opening means for the user."""
    text = str(exc)
    if "not a database" in text:
        return MemoryFileError(
            f"{path!r} is not a SQLite memory file (or it is encrypted or damaged): {text}. "
            "Give a new file name; the file was not changed."
        )
    if "readonly" in text or "unable to open" in text:
        return MemoryFileError(
            f"cannot open {path!r} for writing: {text}. Check that you can write to the file and "
            "its folder (SQLite also writes the -wal and -shm files next to it)."
        )
    return MemoryFileError(f"cannot open the memory file {path!r}: {text}")
