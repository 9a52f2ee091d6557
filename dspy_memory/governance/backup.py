"""Verified backups and restore of a SQLite memory file (docs/governance.md, "Backups and
restore").

`backup` = the keyword index optimized, `VACUUM INTO` a temporary file next to the destination
(one read snapshot, live rows only: no erased byte in freed pages reaches the copy), the copy
verified, renamed into place, and a manifest written next to it. `verify_file` checks a file
(or a backup against its manifest); `replace_file` swaps a verified file in atomically; restore
and the encrypt/decrypt/rekey commands are built from the three.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dspy_memory.errors import BackupError, MemoryFolderMissingError, VerificationError
from dspy_memory.governance.files import (
    SIDE_FILES,
    file_argument,
    fsync,
    sha256_of,
    staged,
)
from dspy_memory.reports import BackupManifest, FileCheck
from dspy_memory.store.sqlite import copy as sqlite_copy
from dspy_memory.store.sqlite.connection import resolve_driver
from dspy_memory.store.sqlite.migrations import LATEST_VERSION
from dspy_memory.util.timeutil import utcnow

MANIFEST_SUFFIX = ".manifest.json"
KeyApplier = Callable[[Any], None]


def manifest_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + MANIFEST_SUFFIX


# -- verification -------------------------------------------------------------------------------


def _key_applier(encryption_key: Any, path: str) -> tuple[KeyApplier | None, Any]:
    """(what keys a connection to `path`, the driver that can read it) for an optional key."""
    if encryption_key is None:
        return None, resolve_driver()
    from dspy_memory.store.sqlite import cipher

    key_hex = cipher.raw_key(encryption_key)
    return (lambda conn: cipher.apply_key(conn, key_hex, path)), resolve_driver(encrypted=True)


def _read(path: str, encryption_key: Any) -> dict[str, Any]:
    apply_key, driver = _key_applier(encryption_key, path)
    had_side_files = _side_files(path)
    conn = sqlite_copy.open_readonly(path, driver, apply_key)
    try:
        return sqlite_copy.file_facts(conn)
    finally:
        conn.close()
        # A read-only connection to a WAL file creates -wal and -shm and cannot remove them. A
        # read-write one that closes last removes them (under SQLite's own locks, so never
        # from under another process).
        if _side_files(path) and not had_side_files:
            file_in_use(path, encryption_key=encryption_key)


def _side_files(path: str) -> bool:
    return any(os.path.exists(path + side) for side in ("-wal", "-shm"))


def _compare_manifest(check: FileCheck, manifest_file: str, *, rows: bool) -> None:
    try:
        manifest = BackupManifest.model_validate_json(Path(manifest_file).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        check.problems.append(f"the manifest {manifest_file} cannot be read ({type(exc).__name__}): {exc}")
        return
    if manifest.sha256 != check.sha256:
        check.problems.append(
            f"the file's sha256 {check.sha256[:16]}... differs from the manifest's "
            f"{manifest.sha256[:16]}...: the file changed after the backup (or is another file)"
        )
    for name, what in (("tables", check.tables), ("indexes", check.indexes)) if rows else ():
        expected = getattr(manifest, name)
        differ = {key: (expected.get(key), what.get(key)) for key in expected.keys() | what.keys()}
        differ = {key: pair for key, pair in differ.items() if pair[0] != pair[1]}
        if differ:
            listed = ", ".join(f"{key}: manifest {a}, file {b}" for key, (a, b) in sorted(differ.items()))
            check.problems.append(f"rows differ from the manifest's ({listed})")
    if rows and manifest.encrypted != check.encrypted:
        check.problems.append(
            f"the manifest says encrypted={manifest.encrypted}, the file was read with encrypted={check.encrypted}"
        )


def verify_file(
    path: str | os.PathLike[str], *, encryption_key: Any = None, manifest: bool | str = True
) -> FileCheck:
    """Check a memory file or backup: it opens read-only with sqlite-vec (with `encryption_key`
    if given), `PRAGMA integrity_check` passes, the vector and keyword indexes hold one entry per
    memory row, the schema version is one this library knows, and (manifest=True and
    `<path>.manifest.json` exists, or manifest= a path) the sha256 and rows agree with the
    manifest. Never changes the file. Returns a FileCheck; `check.ok` is False and
    `check.problems` says why when anything failed (see `ensure_ok`)."""
    started = time.perf_counter()
    path = file_argument(path, "path")
    check = FileCheck(path=path, encrypted=encryption_key is not None)
    if not os.path.isfile(path):
        check.problems.append(f"no such file: {path}")
        return check
    check.sha256 = sha256_of(path)
    manifest_file = manifest if isinstance(manifest, str) else manifest_path(path) if manifest else None
    if manifest_file is not None and (isinstance(manifest, str) or os.path.exists(manifest_file)):
        check.manifest = manifest_file
    try:
        facts = _read(path, encryption_key)
    except Exception as exc:  # noqa: BLE001 - whatever the driver says, the file failed the check
        from dspy_memory.store.sqlite.cipher import looks_encrypted

        hint = (
            " (it looks encrypted: give its key)" if encryption_key is None and looks_encrypted(path) else ""
        )
        check.problems.append(f"cannot be read as a memory file{hint}: {exc}")
        if check.manifest is not None:
            _compare_manifest(check, check.manifest, rows=False)
        return _finished(check, started)
    # One line: SQLite's rows may hold several ("*** in database main ***\nTree 50 page 50 ...").
    check.integrity = "; ".join(line for row in facts["integrity"] for line in row.splitlines())
    check.schema_version = facts["schema_version"]
    if check.integrity != "ok":
        check.problems.append(f"SQLite's integrity check failed: {check.integrity[:500]}")
    if check.schema_version == 0:
        check.problems.append("a SQLite file, but not a memory file (no schema version, no memories table)")
        if check.manifest is not None:
            _compare_manifest(check, check.manifest, rows=False)
        return _finished(check, started)
    if check.schema_version > LATEST_VERSION:
        check.problems.append(
            f"schema version {check.schema_version} is newer than this dspy-memory knows "
            f"({LATEST_VERSION}); upgrade with: pip install -U dspy-memory"
        )
    check.embedder, check.dimension = facts["embedder"], facts["dimension"]
    check.tables, check.indexes = facts["tables"], facts["indexes"]
    memories = check.tables.get("memories", 0)
    for index, rows in check.indexes.items():
        if rows != memories:
            check.problems.append(f"the index {index} holds {rows} entries for {memories} memory rows")
    if check.manifest is not None:
        _compare_manifest(check, check.manifest, rows=True)
    return _finished(check, started)


def _finished(check: FileCheck, started: float) -> FileCheck:
    check.duration_s = round(time.perf_counter() - started, 4)
    return check


def ensure_ok(check: FileCheck, what: str) -> FileCheck:
    """`check`, or a VerificationError that lists its problems."""
    if not check.ok:
        raise VerificationError(
            f"{what} {check.path} failed verification: " + "; ".join(check.problems), check=check
        )
    return check


# -- replacing a file ---------------------------------------------------------------------------


def file_in_use(path: str, *, encryption_key: Any = None) -> bool:
    """Whether another connection (in this process or another) has `path` open. A WAL file's
    last connection moves the WAL into the file and deletes -wal and -shm when it closes: we
    open, checkpoint and close one; if they are still there, someone else holds the file."""
    if not _side_files(path):
        return False
    apply_key, driver = _key_applier(encryption_key, path)
    conn = driver.connect(path, isolation_level=None, check_same_thread=False)
    try:
        if apply_key is not None:
            apply_key(conn)
        sqlite_copy.checkpoint(conn)
    finally:
        conn.close()
    return _side_files(path)


def replace_file(
    new_path: str | os.PathLike[str], path: str | os.PathLike[str], *, encryption_key: Any = None
) -> None:
    """Put the (verified) file `new_path` in place of `path` atomically: os.replace in the same
    folder, after `path`'s WAL was moved into it and its -wal/-shm are gone (a WAL left next to
    the new file would be replayed into it). Refused while another connection has `path` open
    (`file_in_use`; `encryption_key` is the old file's): close every Memory on it first. A
    process that opens `path` between the check and the swap is not detected; stop writers."""
    new_path, path = os.fspath(new_path), os.fspath(path)
    if Path(new_path).resolve().parent != Path(path).resolve().parent:
        raise BackupError(f"{new_path} must be in the same folder as {path} to replace it atomically")
    for side in SIDE_FILES:
        if os.path.exists(new_path + side):
            raise BackupError(f"{new_path} still has a {side} file: it is open somewhere; close it first")
    if os.path.exists(path) and file_in_use(path, encryption_key=encryption_key):
        raise BackupError(
            f"{path} is open in another connection or process; close every Memory on it (and stop "
            "the service) before replacing it. Nothing was changed."
        )
    if os.path.exists(path + "-journal"):
        raise BackupError(f"{path} has an unfinished transaction ({path}-journal); open it once first")
    fsync(new_path)
    os.replace(new_path, path)
    fsync(str(Path(path).resolve().parent))


# -- backup and restore -------------------------------------------------------------------------


def backup(
    store: Any, dest: str | os.PathLike[str], *, overwrite: bool = False, encryption_key: Any = None
) -> BackupManifest:
    """Back up an open SQLite store to `dest` (see the module's docstring) and write
    `<dest>.manifest.json`. Safe while other processes write: the copy is one committed state."""
    started = time.perf_counter()
    if store.backend_name != "sqlite":
        raise BackupError(
            "backup() copies a SQLite file; back up a PostgreSQL store with pg_dump, or use "
            "memory.export(...) for a portable copy of its records"
        )
    if store.path == ":memory:" or store.path.startswith("file:"):
        raise BackupError(f"backup() copies a memory file; {store.path!r} is not one")
    dest = file_argument(dest, "dest")
    folder = Path(dest).resolve().parent
    if not folder.is_dir():
        raise MemoryFolderMissingError(
            f"cannot write the backup {dest!r}: folder {str(folder)!r} does not exist"
        )
    if Path(dest).resolve() == Path(store.path).resolve():
        raise BackupError(f"the backup {dest} would replace the memory file itself; give another name")
    if os.path.exists(dest) and not overwrite:
        raise BackupError(f"{dest} exists; give a new name, or overwrite=True (--overwrite) to replace it")
    encrypted = bool(getattr(store.backend, "encrypted", False))
    if encrypted and encryption_key is None:
        raise BackupError("this store is encrypted: give its encryption_key to check the (encrypted) backup")
    if store.backend.conns.in_transaction():
        raise BackupError("backup() cannot run inside a transaction: VACUUM INTO needs its own")
    with staged(dest, "partial") as temporary:
        with store.transaction() as conn:
            sqlite_copy.optimize_keywords(conn)
        with store.backend.conns.read() as conn:
            sqlite_copy.vacuum_into(conn, temporary)
        check = ensure_ok(verify_file(temporary, encryption_key=encryption_key, manifest=False), "the backup")
        os.replace(temporary, dest)
    from dspy_memory import __version__

    manifest = BackupManifest(
        file=os.path.basename(dest),
        sha256=check.sha256,
        size=os.path.getsize(dest),
        schema_version=check.schema_version,
        library_version=__version__,
        embedder=check.embedder,
        dimension=check.dimension,
        tables=check.tables,
        indexes=check.indexes,
        encrypted=encrypted,
        source=store.path,
        created_at=utcnow(),
        duration_s=round(time.perf_counter() - started, 4),
    )
    _write_manifest(manifest, manifest_path(dest))
    store.audit_log.receipt(
        "backup",
        counts={"memories": manifest.tables.get("memories", 0), "bytes": manifest.size},
        details={"file": manifest.file, "sha256": manifest.sha256, "encrypted": manifest.encrypted},
    )
    return manifest


def write_receipt(
    path: str, operation: str, *, encryption_key: str | None, check: FileCheck, details: dict[str, Any]
) -> None:
    """An audit log receipt in the file at `path` (now in place) for a whole-file operation:
    the swapped-in file carries its own record of how it got there."""
    from dspy_memory.store.store import Store

    store = Store(path, encryption_key=False if encryption_key is None else encryption_key)
    try:
        counts = {"memories": check.tables.get("memories", 0)}
        store.audit_log.receipt(operation, counts=counts, details={"sha256": check.sha256, **details})
    finally:
        store.close()


def _write_manifest(manifest: BackupManifest, path: str) -> None:
    with staged(path, "partial") as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(manifest.model_dump(mode="json"), handle, indent=2)
            handle.write("\n")
        os.replace(temporary, path)


def restore(
    src: str | os.PathLike[str], path: str | os.PathLike[str], *, encryption_key: str | None = None
) -> FileCheck:
    """Restore the backup `src` as the memory file `path`: `src` is verified (against its
    manifest when there is one), copied to a temporary file next to `path`, the copy verified
    (the same sha256), then swapped in with `replace_file`. `path` is untouched unless every
    step passed. Close every Memory on `path` first. Returns the check of the copy; the restored
    file then gets a "restore" receipt in its audit log (so its sha256 is no longer the
    backup's)."""
    src, path = file_argument(src, "src"), file_argument(path, "path")
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise MemoryFolderMissingError(f"cannot restore to {path!r}: folder {str(folder)!r} does not exist")
    source = ensure_ok(verify_file(src, encryption_key=encryption_key), "the backup")
    with staged(path, "restoring") as temporary:
        shutil.copyfile(src, temporary)
        copy = verify_file(temporary, encryption_key=encryption_key, manifest=False)
        if copy.ok and copy.sha256 != source.sha256:
            copy.problems.append("the copy's sha256 differs from the backup's: the copy was damaged")
        ensure_ok(copy, "the copy")
        replace_file(temporary, path, encryption_key=encryption_key)
    copy.path = path
    write_receipt(
        path, "restore", encryption_key=encryption_key, check=copy, details={"file": os.path.basename(src)}
    )
    return copy
