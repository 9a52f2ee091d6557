"""Encryption at rest with SQLCipher (docs/governance.md, "Encryption at rest").

A passphrase becomes a 256-bit key once per process (PBKDF2-HMAC-SHA512), and every connection
is keyed with that raw key: SQLCipher's own passphrase mode would run its KDF on every
connection (~300 ms each; a raw key costs ~1 ms).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from dspy_memory.errors import EncryptionKeyError, EncryptionUnavailableError

KEY_ENV = "DSPY_MEMORY_ENCRYPTION_KEY"
# The salt is fixed, not per file, so that one passphrase opens the file, its backups and the
# copies `encrypt`/`rekey` write without reading any header first. SQLCipher still salts each
# file (its first 16 bytes) when it derives the page HMAC key from ours. What a fixed salt
# gives up: one dictionary run against this salt serves every dspy-memory file, so a passphrase
# must be strong (or random: docs/governance.md); each guess costs KDF_ITERATIONS.
KDF_SALT = b"dspy-memory/encryption-at-rest/v1"
# SQLCipher 4's own default for its passphrase KDF (~0.15 s here, once per process).
KDF_ITERATIONS = 256_000
SQLITE_HEADER = b"SQLite format 3\x00"
_HEX_KEY = re.compile(r"[0-9a-f]{64}")


@functools.lru_cache(maxsize=16)
def _derive(passphrase: str) -> str:
    return hashlib.pbkdf2_hmac("sha512", passphrase.encode("utf-8"), KDF_SALT, KDF_ITERATIONS, dklen=32).hex()


def raw_key(passphrase: Any) -> str:
    """The 64 hex digits of the 256-bit key a passphrase (a str or a pydantic SecretStr) stands
    for; derived once per process and passphrase. `PRAGMA key = "x'<raw_key>'"` opens a file
    written with that passphrase."""
    if hasattr(passphrase, "get_secret_value"):
        passphrase = passphrase.get_secret_value()
    if not isinstance(passphrase, str) or not passphrase:
        raise EncryptionKeyError("an encryption key must be a non-empty string (a passphrase)")
    return _derive(passphrase)


def given_key(explicit: Any) -> str | None:
    """The passphrase to use: the one given, else $DSPY_MEMORY_ENCRYPTION_KEY, else None.
    False: a plaintext file, whatever the environment says (governance/backup.py writes a
    receipt into a file it has just decrypted while the old key is still in the environment)."""
    if explicit is False:
        return None
    if hasattr(explicit, "get_secret_value"):
        explicit = explicit.get_secret_value()
    if explicit is not None:
        return explicit
    return os.environ.get(KEY_ENV) or None


def key_statement(key_hex: str) -> str:
    """`PRAGMA key` with a raw key (validated: only hex digits reach the SQL text)."""
    if not _HEX_KEY.fullmatch(key_hex):
        raise EncryptionKeyError("a raw encryption key is 64 lowercase hex digits (see raw_key)")
    return f"PRAGMA key = \"x'{key_hex}'\""


def file_header(path: str) -> bytes | None:
    """The first 16 bytes of an existing, non-empty file, else None."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16) or None
    except OSError:
        return None


def looks_encrypted(path: str) -> bool:
    """Whether `path` looks like a SQLCipher file: no plain SQLite header, whole pages (a
    SQLCipher file starts with its random salt, so nothing in it can be checked without the key)."""
    header = file_header(path)
    if header is None or header == SQLITE_HEADER:
        return False
    size = Path(path).stat().st_size
    return size >= 1024 and size % 512 == 0


def missing_key_error(path: str) -> EncryptionKeyError:
    return EncryptionKeyError(
        f"{path!r} looks encrypted (it does not start with the SQLite header) and no encryption "
        f"key was given: pass encryption_key=... to Memory (MemoryConfig.encryption_key) or set "
        f"{KEY_ENV}. The file was not changed."
    )


def apply_key(conn: Any, key_hex: str, path: str) -> None:
    """Key a new connection: this must run before anything reads the file. One read checks the
    key at once, so a wrong key fails here with a clear error, not at some later statement."""
    # SQLCipher logs a failed HMAC check to stderr; the error below says what it means.
    conn.execute("PRAGMA cipher_log_level = NONE")
    conn.execute(key_statement(key_hex))
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except Exception as exc:
        conn.close()
        raise wrong_key_error(path, exc) from None


def wrong_key_error(path: str, exc: BaseException) -> EncryptionKeyError:
    if file_header(path) == SQLITE_HEADER:
        return EncryptionKeyError(
            f"{path!r} is not encrypted, but an encryption key was given: open it without one "
            f"(unset {KEY_ENV}), or encrypt it first with `dspy-memory encrypt`. The file was not changed."
        )
    return EncryptionKeyError(
        f"cannot read {path!r} with this encryption key: wrong key or not an encrypted file ({exc}). "
        "Check the passphrase; without the key it was written with, the file cannot be read. "
        "The file was not changed."
    )


def cipher_version(conn: Any) -> str | None:
    """SQLCipher's version, or None when the driver cannot encrypt (a plain SQLite ignores the
    PRAGMA, and would accept `PRAGMA key` and write plaintext)."""
    try:
        row = conn.execute("PRAGMA cipher_version").fetchone()
    except Exception:
        return None
    return row[0] if row else None


def no_cipher_error(tried: str) -> EncryptionUnavailableError:
    from dspy_memory.store.sqlite.connection import DRIVER_ENV

    return EncryptionUnavailableError(
        f"an encryption key was given, but no SQLite driver that can encrypt is available (tried "
        f"{tried}). Install SQLCipher's driver: pip install 'dspy-memory[encryption]' "
        f"(sqlcipher3), and leave {DRIVER_ENV} unset or set it to sqlcipher3. Nothing was written."
    )


def postgres_key_error() -> EncryptionUnavailableError:
    return EncryptionUnavailableError(
        "an encryption key was given for a PostgreSQL store: dspy-memory encrypts SQLite files "
        "only; on PostgreSQL encryption at rest is the server's job (an encrypted disk or "
        "volume, or the provider's storage encryption). Remove encryption_key for this store."
    )


def export_database(source: Any, dest: str, dest_key: str | None, *, source_key: str | None = None) -> None:
    """Write a copy of a database to the new file `dest`: encrypted with the raw key `dest_key`
    (hex, see `raw_key`), or plaintext when None. `source` is a connection opened by sqlcipher3
    (keyed or not), or a path, then opened with sqlcipher3 and the raw key `source_key` (None: a
    plaintext file). `dest` must not exist. `sqlcipher_export` is the only way between plaintext
    and encrypted (PRAGMA rekey works on encrypted files only); the caller verifies the copy."""
    if os.path.exists(dest):
        raise FileExistsError(f"{dest!r} exists; export_database writes a new file")
    if dest_key is not None:
        key_statement(dest_key)  # validates it: only hex digits reach the SQL text
    if isinstance(source, (str, os.PathLike)):
        from dspy_memory.store.sqlite.connection import open_connection, resolve_driver

        path = os.fspath(source)
        if source_key is None and looks_encrypted(path):
            raise missing_key_error(path)
        conn = open_connection(path, resolve_driver(encrypted=True), busy_timeout_ms=10_000, key=source_key)
        try:
            _export(conn, dest, dest_key)
        finally:
            conn.close()
    else:
        _export(source, dest, dest_key)


def _export(conn: Any, dest: str, dest_key: str | None) -> None:
    if cipher_version(conn) is None:
        raise no_cipher_error("the connection given: it is not SQLCipher's")
    key_sql = "''" if dest_key is None else f"\"x'{dest_key}'\""
    conn.execute(f"ATTACH DATABASE ? AS export_target KEY {key_sql}", (dest,))
    try:
        conn.execute("SELECT sqlcipher_export('export_target')").fetchall()
        # A header field sqlcipher_export may not copy.
        version = conn.execute("PRAGMA main.user_version").fetchone()[0]
        conn.execute(f"PRAGMA export_target.user_version = {int(version)}")
    except BaseException:
        conn.execute("DETACH DATABASE export_target")
        for leftover in (dest, dest + "-wal", dest + "-shm", dest + "-journal"):
            if os.path.exists(leftover):
                os.remove(leftover)
        raise
    conn.execute("DETACH DATABASE export_target")
