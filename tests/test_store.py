import sqlite3
import sys
import types

import pytest

from dspy_memory import EmbedderMismatchError, ExtensionLoadError, Memory, SchemaError
from dspy_memory.embed import HashEmbedder
from dspy_memory.store import Store, resolve_driver
from dspy_memory.store.sqlite.migrations import LATEST_VERSION, MIGRATIONS, Migration, migrate

pytestmark = [pytest.mark.backends, pytest.mark.encrypted]

EXPECTED_TABLES = {
    "meta",
    "schema_migrations",
    "episodes",
    "entities",
    "memories",
    "memory_sources",
    "memory_events",
    "blocks",
    "block_versions",
    "memories_fts",
    "turn_context",
    "memory_vectors",
    "vector_partitions",
    "memory_vec",
}


def tables(store):
    with store._conns.read() as conn:
        return {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        }


def columns(store, table):
    with store._conns.read() as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


@pytest.mark.sqlite_only(reason="reads sqlite_master (tests/test_postgres.py checks the PostgreSQL schema)")
def test_schema_has_every_table_and_the_four_temporal_columns(db_path):
    store = Store(db_path)
    store.bind_embedder("test-hash-v1:64", 64)
    assert EXPECTED_TABLES <= tables(store)
    assert {"valid_at", "invalid_at", "created_at", "expired_at"} <= columns(store, "memories")
    assert {
        "subject_id",
        "predicate",
        "object_id",
        "confidence",
        "importance",
        "strength",
        "access_count",
        "last_accessed_at",
        "content_hash",
        "metadata",
    } <= columns(store, "memories")
    assert {"occurred_at", "ingested_at", "status", "error", "source", "role", "name"} <= columns(
        store, "episodes"
    )
    assert {"label", "value", "char_limit", "read_only", "description", "version"} <= columns(store, "blocks")
    assert {"event", "old_content", "new_content", "reason", "actor", "episode_id"} <= columns(
        store, "memory_events"
    )
    store.close()


@pytest.mark.sqlite_only(reason="SQLite pragmas")
def test_wal_busy_timeout_and_foreign_keys(db_path):
    store = Store(db_path, busy_timeout_ms=4321)
    with store._conns.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 4321
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    store.close()


@pytest.mark.sqlite_only(reason="SQLite migrations (tests/test_postgres.py checks the PostgreSQL versions)")
def test_migrations_run_once_and_are_recorded(db_path):
    Store(db_path).close()
    store = Store(db_path)
    with store._conns.read() as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == [m.version for m in MIGRATIONS]
        assert migrate(conn) == []
    store.close()


@pytest.mark.sqlite_only(reason="SQLite migrations")
def test_a_new_migration_is_applied_to_an_old_file(db_path):
    Store(db_path).close()
    extra = Migration(LATEST_VERSION + 1, "add a column", ("ALTER TABLE blocks ADD COLUMN color TEXT",))
    store = Store(db_path)
    with store._conns.read() as conn:
        assert migrate(conn, (*MIGRATIONS, extra)) == [LATEST_VERSION + 1]
    assert "color" in columns(store, "blocks")
    store.close()


def test_a_file_from_a_newer_version_is_refused(db_path):
    store = Store(db_path)
    with store.transaction() as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', '2030-01-01')")
    store.close()
    with pytest.raises(SchemaError, match="pip install -U dspy-memory"):
        Store(db_path)


def test_embedder_is_recorded_and_a_different_one_is_refused(db_path):
    Memory(db_path, embedder=HashEmbedder(64)).close()
    with pytest.raises(EmbedderMismatchError) as info:
        Memory(db_path, embedder=HashEmbedder(128))
    message = str(info.value)
    assert "test-hash-v1:64" in message and "test-hash-v1:128" in message and "embedder=" in message
    # Left out, the embedder is the one the file was built with.
    with Memory(db_path) as memory:
        assert memory.embedder.name == "test-hash-v1:64"


def test_a_file_naming_its_embedder_without_a_dimension_is_refused_as_a_mismatch(db_path):
    store = Store(db_path)
    try:
        store.bind_embedder("test-hash-v1:64", 64)
        with store.transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = 'embedder_dim'")
        with pytest.raises(EmbedderMismatchError, match="test-hash-v1:64"):
            store.bind_embedder("test-hash-v1:64", 64)
    finally:
        store.close()


def test_driver_that_cannot_load_extensions_gives_an_actionable_error(monkeypatch):
    fake = types.ModuleType("fake_stdlib_sqlite")

    class Connection:
        def execute(self, *args):
            return None

        def close(self):
            return None

    fake.connect = lambda *args, **kwargs: Connection()
    monkeypatch.setitem(sys.modules, "fake_stdlib_sqlite", fake)
    with pytest.raises(ExtensionLoadError) as info:
        resolve_driver("fake_stdlib_sqlite")
    message = str(info.value)
    assert "sqlite-vec could not be loaded" in message
    assert "cannot load extensions" in message
    assert "pip install sqlean.py" in message


def test_stdlib_sqlite_is_reported_when_it_is_the_only_driver(monkeypatch):
    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions")
    with pytest.raises(ExtensionLoadError, match="sqlean.py"):
        resolve_driver("sqlite3")


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Store(str(tmp_path / "no" / "such" / "dir" / "m.db"))


def test_store_never_imports_dspy():
    import ast
    import pathlib

    import dspy_memory.store as package

    for path in pathlib.Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        names = [
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        ]
        names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not any(name == "dspy" or name.startswith("dspy.") for name in names), path


def test_sql_lives_only_in_the_store():
    import pathlib
    import re

    import dspy_memory

    root = pathlib.Path(dspy_memory.__file__).parent
    pattern = re.compile(r"\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE TABLE)\b")
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "store" not in path.relative_to(root).parts and pattern.search(path.read_text())
    ]
    assert offenders == []
