"""`dspy-memory doctor`'s storage checks (dspy_memory/doctor.py runs them): the SQLite driver
and sqlite-vec, the encryption driver (SQLCipher) and an encrypted --db, a PostgreSQL server."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f"  -> fix: {self.fix}" if self.fix else ""
        return f"{self.status:<5} {self.name:<10} {self.detail}{fix}"


def check_sqlite_vec() -> Check:
    try:
        import sqlite_vec
    except ImportError:
        return Check("sqlite-vec", "fail", "sqlite-vec is not installed", "pip install sqlite-vec")
    return Check("sqlite-vec", "ok", f"sqlite-vec {sqlite_vec.__version__} installed")


def check_sqlite() -> Check:
    import sqlite3

    from dspy_memory.errors import ExtensionLoadError
    from dspy_memory.store import resolve_driver

    try:
        driver = resolve_driver()
    except ExtensionLoadError as exc:
        fix = "pip install sqlean.py (or pysqlite3-binary on Linux)"
        return Check("sqlite", "fail", str(exc).split(". ")[0], fix)
    detail = f"driver {driver.__name__} (SQLite {driver.sqlite_version}) loads sqlite-vec and has FTS5"
    if driver is not sqlite3 and not hasattr(sqlite3.Connection, "enable_load_extension"):
        detail += f"; this Python's own sqlite3 ({sqlite3.sqlite_version}) cannot load extensions"
    return Check("sqlite", "ok", detail)


def check_postgres(db: str) -> Check:
    """The server a postgresql:// --db names: reachable, pgvector, the store's schema."""
    from dspy_memory.store.postgres.backend import INSTALL, probe, redacted

    try:
        found = probe(db)
    except ImportError:
        return Check(
            "postgres",
            "fail",
            "the PostgreSQL driver is not installed",
            INSTALL.removeprefix("install the PostgreSQL backend with: "),
        )
    except Exception as exc:
        return Check(
            "postgres",
            "fail",
            f"cannot connect to {redacted(db)}: {str(exc).strip().splitlines()[0]}",
            "check the URL, the server and its pg_hba.conf",
        )
    detail = f"PostgreSQL {found['server']} at {redacted(db)}"
    if found["pgvector"] is None:
        if found["pgvector_available"] is None:
            return Check(
                "postgres",
                "fail",
                f"{detail} has no pgvector",
                "install pgvector on the server (https://github.com/pgvector/pgvector)",
            )
        detail += f"; pgvector {found['pgvector_available']} available, created on first use (needs the right to CREATE EXTENSION)"
    else:
        detail += f", pgvector {found['pgvector']}"
    schema = found["schema_version"]
    detail += (
        f", store schema version {schema}" if schema is not None else ", no store yet (made on first use)"
    )
    return Check("postgres", "ok", detail)


def check_encryption(db: str | None) -> Check:
    """Whether encrypted files can be opened here (SQLCipher's driver), and whether --db needs a
    key it was not given. Without a key in use, a missing driver is not a problem."""
    from dspy_memory.store.sqlite.cipher import KEY_ENV, cipher_version, looks_encrypted
    from dspy_memory.store.sqlite.connection import cipher_driver

    keyed = bool(os.environ.get(KEY_ENV))
    encrypted_db = (
        db is not None and not db.startswith(("postgresql://", "postgres://")) and looks_encrypted(db)
    )
    if encrypted_db and not keyed:
        return Check(
            "encryption",
            "fail",
            f"{db} looks encrypted and no key is set",
            f"set {KEY_ENV} to the file's passphrase",
        )
    driver, why = cipher_driver()
    if driver is None:
        fix = "pip install 'dspy-memory[encryption]'"
        if not (keyed or encrypted_db):
            return Check("encryption", "skip", "no SQLCipher driver: needed only for encrypted files", fix)
        return Check("encryption", "fail", f"no SQLite driver that can encrypt (sqlcipher3: {why})", fix)
    conn = driver.connect(":memory:")
    try:
        version = cipher_version(conn)
    finally:
        conn.close()
    detail = f"driver {driver.__name__} (SQLCipher {version}) can encrypt files"
    if keyed:
        detail += f"; {KEY_ENV} is set"
    return Check("encryption", "ok", detail)
