"""Exceptions raised by dspy-memory. Every message says what went wrong and what to do next."""

from __future__ import annotations


class DSPyMemoryError(Exception):
    """Base class for every error raised by dspy-memory."""


class ExtensionLoadError(DSPyMemoryError):
    """No available SQLite driver could load sqlite-vec (or lacks FTS5)."""


class EmbedderMismatchError(DSPyMemoryError):
    """The memory file was built with a different embedder than the one it was opened with.
    `recorded` is the name of the embedder the file was built with."""

    def __init__(self, message: str, *, recorded: str | None = None) -> None:
        super().__init__(message)
        self.recorded = recorded


class EmbeddingError(DSPyMemoryError):
    """An embedder failed or returned vectors of the wrong shape."""


class MemoryNotFoundError(DSPyMemoryError, LookupError):
    """No memory with that id exists in the requested scope."""


class InvalidInputError(DSPyMemoryError, ValueError, TypeError):
    """An argument was refused (wrong type, out of range, not valid text). Nothing was stored.
    It is also a ValueError and a TypeError, so code written against either keeps working."""


class ScopeError(InvalidInputError):
    """A call did not name a scope, named it badly, or (in strict scope mode) reached for a
    memory by id without the scope that owns it."""


class MemoryFileError(DSPyMemoryError, OSError):
    """The path cannot hold a memory file: a folder, not a SQLite file, or not writable."""


class MemoryFolderMissingError(MemoryFileError, FileNotFoundError):
    """The folder the memory file should go in does not exist."""


class EncryptionKeyError(MemoryFileError):
    """An encrypted file and its key do not fit: a wrong key, a key for a file that is not
    encrypted, or an encrypted file opened without a key (docs/governance.md)."""


class EncryptionUnavailableError(DSPyMemoryError):
    """A key was given where nothing can encrypt: no SQLCipher driver (pip install
    'dspy-memory[encryption]'), a driver chosen that cannot, or a PostgreSQL store."""


class MemoryClosedError(DSPyMemoryError, RuntimeError):
    """The Memory was closed; open the file again."""

    @classmethod
    def for_path(cls, path: str) -> MemoryClosedError:
        return cls(f"this Memory is closed; open the file again: Memory({path!r})")


class SchemaError(DSPyMemoryError):
    """The memory file's schema is newer than this version of dspy-memory understands (or, for a
    read-only Memory, missing or older: it opens a store without creating or migrating it)."""


class ReadOnlyError(DSPyMemoryError, PermissionError):
    """A write through a Memory opened with read_only=True (docs/scaling.md, "Read-only mode"):
    it searches and reads, and nothing it does writes. Write through a Memory opened without
    read_only (on a PostgreSQL primary, not a standby). It is also a PermissionError."""

    @classmethod
    def for_path(cls, path: str) -> ReadOnlyError:
        return cls(
            f"{path} is open read-only (read_only=True): nothing can be written through this Memory; "
            "write through a Memory opened without read_only (on the primary server)"
        )


class LMUnavailableError(DSPyMemoryError):
    """No LM is configured, or the configured one cannot be reached."""


class RerankerUnavailableError(DSPyMemoryError):
    """The reranker of recipe "rerank" cannot run: sentence-transformers is not installed (the
    `rerank` extra), the cross-encoder model cannot be loaded, or it failed (docs/retrieval.md)."""


class WriteProgramError(DSPyMemoryError):
    """An LM program failed on every attempt (LM errors or answers that could not be
    parsed). `usage` is what the attempts cost."""

    def __init__(self, message: str, *, usage: object = None) -> None:
        super().__init__(message)
        self.usage = usage


class WriteConflictError(DSPyMemoryError):
    """What the write program decided does not fit the file: a memory it acted on changed after
    the LM read it, or a current fact of a slot it writes was not shown to it (written by
    another writer meanwhile, or missed by retrieval). The write path plans again with fresh
    memories, `unseen` among them (bounded), and otherwise keeps the input as raw turns."""

    def __init__(self, message: str, *, unseen: list[str] | None = None) -> None:
        super().__init__(message)
        self.unseen = unseen or []


class BlockError(DSPyMemoryError, ValueError):
    """A core-memory block edit was refused (read-only, over its character limit, text not found)."""


class BackupError(DSPyMemoryError):
    """A backup or restore was refused (the destination exists, a PostgreSQL store, a target
    file still open elsewhere) or failed; nothing was replaced (docs/governance.md)."""


class VerificationError(BackupError):
    """A memory file or backup failed verification; `check` (a FileCheck) says what failed."""

    def __init__(self, message: str, *, check: object = None) -> None:
        super().__init__(message)
        self.check = check


class InsufficientFeedbackError(DSPyMemoryError, ValueError):
    """Too little feedback to compile the write program from it (and to check the result on
    feedback it did not train on). Give verdicts (`memory.feedback`) and corrections
    (`memory.update(..., reason=)`) on memories the write program made, then try again."""


class ConfigError(DSPyMemoryError, ValueError):
    """A setting was refused (out of range, not one of its choices, unknown, or an embedder spec
    that names no embedder). The message has one line per refused setting, named by its dotted
    path ("write.max_ops") with what it may be; `settings` lists those names. Nothing was opened
    or written: fix the setting (in code, the TOML file or the DSPY_MEMORY_* variable) and open
    again. It is also a ValueError, so code written against pydantic's errors keeps working."""

    def __init__(self, message: str, *, settings: list[str] | None = None) -> None:
        super().__init__(message)
        self.settings = settings or []


class StorageError(DSPyMemoryError, OSError):
    """The database could not read or write its storage: an I/O error, a read-only file system
    or database, a damaged file (SQLite's IOERR, READONLY, CORRUPT; PostgreSQL's class 58 and
    XX001/XX002). The statement's transaction was rolled back, so it wrote nothing; input saved
    by an earlier step (episodes) stays pending for `memory.reprocess()`. `path` names the file
    (or the PostgreSQL database, without its password). Check the disk and its file system, run
    `memory.check()`, then retry; a damaged file is restored from a backup (docs/governance.md).
    It is also an OSError."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def adding(self, advice: str) -> StorageError:
        """This error with `advice` after its message; the driver's error stays its cause."""
        error = type(self)(f"{self}. {advice}", path=self.path)
        error.__cause__ = self.__cause__
        return error


class StorageFullError(StorageError):
    """The disk (or the file's size limit) is full: SQLite's SQLITE_FULL, PostgreSQL's disk_full
    (53100). Nothing of the failed transaction was written; free space, then retry (episodes
    saved before the fault are processed by `memory.reprocess()` or when the file is next
    opened)."""
