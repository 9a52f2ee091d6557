"""Encrypting, decrypting and re-keying a memory file safely (docs/governance.md): a new file is
written next to it with `sqlcipher_export` (rows copied logically: no freed page of the old file
comes along), verified with the new key and against the old file's row counts, then swapped in
atomically (governance/backup.py::replace_file). The old file is never changed in place, so a
failure at any step leaves it as it was, with its old key."""

from __future__ import annotations

import os
from typing import Any

from dspy_memory.errors import BackupError, EncryptionKeyError
from dspy_memory.governance.backup import (
    ensure_ok,
    file_in_use,
    replace_file,
    verify_file,
    write_receipt,
)
from dspy_memory.governance.files import staged
from dspy_memory.reports import FileCheck
from dspy_memory.store.sqlite import cipher
from dspy_memory.store.sqlite.connection import resolve_driver


def change_key(path: str | os.PathLike[str], *, old_key: Any, new_key: Any) -> FileCheck:
    """Write `path` again under `new_key` (None: plaintext), reading it with `old_key` (None: it
    is plaintext). Keys are passphrases (str or SecretStr). Refused while the file is open
    elsewhere. Returns the check of the new file (now at `path`)."""
    path = os.fspath(path)
    if old_key is None and new_key is None:
        raise EncryptionKeyError("give a new key to encrypt, the current key to decrypt, or both to re-key")
    if not os.path.isfile(path):
        raise BackupError(f"no such memory file: {path}")
    # Before the plaintext side is read: sqlite-vec lives in one SQLite library per process, and
    # both sides must be read through SQLCipher's (store/sqlite/connection.py).
    resolve_driver(encrypted=True)
    if old_key is None and cipher.looks_encrypted(path):
        raise cipher.missing_key_error(path)
    if new_key is not None and old_key is not None and cipher.raw_key(new_key) == cipher.raw_key(old_key):
        raise EncryptionKeyError("the new key is the current key; nothing to do")
    before = ensure_ok(verify_file(path, encryption_key=old_key, manifest=False), "the memory file")
    if file_in_use(path, encryption_key=old_key):
        raise BackupError(
            f"{path} is open in another connection or process; close every Memory on it (and stop "
            "the service) first. Nothing was changed."
        )
    with staged(path, "rekeying") as temporary:
        cipher.export_database(
            path,
            temporary,
            cipher.raw_key(new_key) if new_key is not None else None,
            source_key=cipher.raw_key(old_key) if old_key is not None else None,
        )
        after = verify_file(temporary, encryption_key=new_key, manifest=False)
        if after.ok and (after.tables, after.indexes) != (before.tables, before.indexes):
            after.problems.append(
                f"rows differ from the original's (original {before.tables} {before.indexes}, "
                f"copy {after.tables} {after.indexes})"
            )
        ensure_ok(after, "the new copy")
        replace_file(temporary, path, encryption_key=old_key)
    after.path = path
    operation = "encrypt" if old_key is None else "decrypt" if new_key is None else "rekey"
    write_receipt(
        path, operation, encryption_key=new_key, check=after, details={"encrypted": new_key is not None}
    )
    return after
