"""Zeroing the free space inside pages: what `PRAGMA secure_delete` leaves behind."""

from __future__ import annotations

import random
from pathlib import Path

import sqlean

from dspy_memory.store.sqlite.freespace import zero_free_space


def filled(path):
    """Rows inserted in random order (pages split in the middle, cells move between pages),
    every other one holding a secret, then the secrets deleted with secure_delete on."""
    conn = sqlean.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("CREATE INDEX t_body ON t (body)")
    order = list(range(3000))
    random.Random(1).shuffle(order)
    conn.execute("BEGIN")
    for i in order:
        word = "keep" if i % 2 else "secret"
        conn.execute("INSERT INTO t (id, body) VALUES (?, ?)", (i, f"{word}{i:04d} " * 20))
    conn.execute("COMMIT")
    conn.execute("DELETE FROM t WHERE body LIKE 'secret%'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def test_secure_delete_leaves_copies_in_rebuilt_pages_and_zeroing_removes_them(tmp_path):
    path = str(tmp_path / "t.db")
    conn = filled(path)
    try:
        rows = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
        assert b"secret" in Path(path).read_bytes(), "SQLite changed: secure_delete alone now suffices"
        conn.execute("BEGIN IMMEDIATE")
        assert zero_free_space(conn) > 0
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert b"secret" not in Path(path).read_bytes()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == rows
        assert conn.execute("SELECT count(*) FROM t WHERE body >= 'keep2' AND body < 'keep3'").fetchone() == (
            500,
        )
        conn.execute("BEGIN IMMEDIATE")
        assert zero_free_space(conn) == 0  # nothing left to do
        conn.execute("COMMIT")
    finally:
        conn.close()
