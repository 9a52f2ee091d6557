"""Copies of a SQLite memory file and what a check of one reads (governance/backup.py).

A backup is `VACUUM INTO`: it reads one snapshot (writers in other processes go on) and writes
the live rows only, so no freed page or deleted cell of the source reaches the copy. A page
copy (`Connection.backup`) would carry the freed pages, i.e. erased content, and a stepwise one
starts over on every commit of another writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from dspy_memory.store.checksums import TABLES
from dspy_memory.store.sqlite.connection import load_sqlite_vec

# Tables counted in a backup's manifest besides the logical ones of store/checksums.py.
COUNTED = ("meta", "schema_migrations", *(table.name for table in TABLES))


def optimize_keywords(conn: Any) -> None:
    """Merge the keyword index's segments: an idle file kept fragments of deleted rows inside
    FTS5 segments until this ran (measured), and the copy would carry them."""
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")


def vacuum_into(conn: Any, dest: str) -> None:
    """Write a compacted copy of the database (one read snapshot) to the new file `dest`. On an
    encrypted file (SQLCipher) the copy is encrypted with the same key (checked by tests)."""
    conn.execute("VACUUM INTO ?", (dest,))


def readonly_uri(path: str) -> str:
    """A URI that opens `path` read-only: checking a file never changes it."""
    return "file:" + quote(str(Path(path).resolve())) + "?mode=ro"


def open_readonly(path: str, driver: Any, apply_key: Any = None) -> Any:
    """A read-only connection with sqlite-vec loaded; `apply_key(conn)`, when given, runs first
    (an encrypted file is unreadable until its key is set)."""
    conn = driver.connect(readonly_uri(path), isolation_level=None, check_same_thread=False, uri=True)
    try:
        conn.row_factory = driver.Row
        if apply_key is not None:
            apply_key(conn)
        load_sqlite_vec(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _has_table(conn: Any, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def integrity(conn: Any) -> list[str]:
    """The lines of SQLite's integrity check ("ok" alone when the file is sound)."""
    return [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]


def index_rows(conn: Any) -> dict[str, int]:
    """Entries of each search index: float vectors, keyword entries, the vec0 index (each holds
    one per memory row)."""
    rows = {
        "vectors": int(conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0]),
        "keyword_entries": int(conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0]),
    }
    if _has_table(conn, "memory_vec"):
        rows["vector_index"] = int(conn.execute("SELECT count(*) FROM memory_vec").fetchone()[0])
    return rows


def file_facts(conn: Any) -> dict[str, Any]:
    """What a check compares, read in one snapshot: integrity_check's lines, the schema version
    (0 when the file has none: not a memory file), the bound embedder, rows per table and the
    rows of the indexes."""
    conn.execute("BEGIN")
    try:
        lines = integrity(conn)
        if not _has_table(conn, "schema_migrations") or not _has_table(conn, "memories"):
            return {"integrity": lines, "schema_version": 0}
        version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
        meta = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')"
            ).fetchall()
        )
        tables = {
            name: int(conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0])
            for name in COUNTED
            if _has_table(conn, name)
        }
        indexes = index_rows(conn)
    finally:
        conn.execute("COMMIT")
    dim = meta.get("embedder_dim")
    return {
        "integrity": lines,
        "schema_version": int(version),
        "embedder": meta.get("embedder_name"),
        "dimension": int(dim) if dim is not None else None,
        "tables": tables,
        "indexes": indexes,
    }


def checkpoint(conn: Any) -> tuple[int, int, int]:
    """Move the WAL into the file and truncate it: (busy, frames, frames moved)."""
    return tuple(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
