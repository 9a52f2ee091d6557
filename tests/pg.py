"""PostgreSQL for the tests: one server per session, one schema per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
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
