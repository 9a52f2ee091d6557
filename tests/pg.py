"""PostgreSQL for the tests: one server per session, one schema per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

ENV = "DSPY_MEMORY_TEST_PG"
_schemas = itertools.count()


def server_url(folder: Path) -> tuple[str, Callable[[], None]]:
    external = os.environ.get(ENV)
    if external:
        return external, lambda: None
    try:
        import pgserver
    except ImportError:
        pytest.fail(f"pgserver is not installed: install the test extras, or name a server in {ENV}")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        # A throwaway server: durability buys nothing and costs each test's schema a few fsyncs.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    return server.get_uri(), server.cleanup


def with_options(url: str, search_path: str) -> str:
    option = quote(f"-csearch_path={search_path}")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


def fresh_schema(url: str) -> tuple[str, Callable[[], None]]:
    """A URL whose tables live in a new schema (pgvector's type stays reachable through public)."""
    import psycopg

    name = f"test_{os.getpid()}_{next(_schemas)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA {name}")

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")

    return with_options(url, f"{name},public"), drop


class Raw:
    """A plain connection to a test's store, outside the library (as another program would
    open it), in autocommit mode; takes the shared SQL of the store (SQLite style)."""

    def __init__(self, path: str) -> None:
        self.postgres = path.startswith("postgresql://")
        if self.postgres:
            import psycopg

            self.conn = psycopg.connect(path, autocommit=True)
        else:
            import sqlean

            self.conn = sqlean.connect(path, isolation_level=None)

    def execute(self, sql: str, params: Any = ()) -> Any:
        if not self.postgres:
            return self.conn.execute(sql, params)
        from dspy_memory.store.postgres.dialect import prepared, translate

        return self.conn.execute(*prepared(translate(sql), params))

    def hold_write_lock(self) -> None:
        """Take the store's write lock as a writer in another process would, until rollback()."""
        if not self.postgres:
            self.conn.execute("BEGIN IMMEDIATE")
            return
        from dspy_memory.store.postgres.schema import lock_key

        self.conn.execute("BEGIN")
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.conn),))

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
