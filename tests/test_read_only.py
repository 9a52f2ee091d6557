"""Memory(..., read_only=True): a search-only Memory. It opens an existing store without DDL or
migration (a missing or older schema is a clear SchemaError), writes nothing (no recall counts,
no claims, nothing resumed), and every write raises ReadOnlyError; the same on SQLite (mode=ro)
and PostgreSQL, where it opens through a SELECT-only role, read-only transactions, and a real
streaming replica (pg_basebackup -R and a second server)."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import ConfigError, MemoryFileError, ReadOnlyError, SchemaError, StorageError
from dspy_memory.store.sqlite.migrations import MIGRATIONS

from .pg import Raw

pytestmark = pytest.mark.backends

EMBEDDER = HashEmbedder(64)
FACTS = ["Ada lives in Denver.", "Ada likes green tea.", "Ada's sister is called Grace."]


def filled(path: str) -> str:
    """`path` holding a store with FACTS for ada, a block and an API key; closed again."""
    with Memory(path, embedder=EMBEDDER) as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        memory.blocks.set("persona", "a careful assistant", user_id="ada")
    return path


def state(path: str) -> tuple[object, ...]:
    """What a write would change: every memory row's version, recall count and archive mark,
    the episodes and the audit log's length."""
    with Raw(path) as raw:
        return (
            raw.execute(
                "SELECT id, version, access_count, last_accessed_at, archived_at, pinned FROM memories ORDER BY row_id"
            ).fetchall(),
            raw.execute("SELECT id, status, claimed_by FROM episodes ORDER BY id").fetchall(),
            raw.execute("SELECT count(*) FROM audit_log").fetchone()[0],
        )


WRITES = {
    "add": lambda m, mid: m.add("Ada moved to Oslo.", user_id="ada"),
    "log": lambda m, mid: m.log("a step", user_id="ada"),
    "update": lambda m, mid: m.update(mid, "Ada lives in Oslo.", user_id="ada"),
    "delete": lambda m, mid: m.delete(mid, user_id="ada"),
    "delete_scope": lambda m, mid: m.delete_scope(user_id="ada"),
    "pin": lambda m, mid: m.pin(mid, user_id="ada"),
    "feedback": lambda m, mid: m.feedback(mid, "wrong", user_id="ada"),
    "lifecycle_settings": lambda m, mid: m.lifecycle_settings(user_id="ada", min_age_days=9),
    "maintain": lambda m, mid: m.maintain(user_id="ada"),
    "reprocess": lambda m, mid: m.reprocess(),
    "block": lambda m, mid: m.blocks.set("persona", "changed", user_id="ada"),
    "api key": lambda m, mid: m.keys.create(None, admin=True),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_through_a_read_only_memory_raises_read_only_error_and_changes_nothing(db_path, write):
    filled(db_path)
    before = state(db_path)
    with Memory(db_path, embedder=EMBEDDER, read_only=True) as memory:
        [hit] = memory.search("where does ada live?", user_id="ada", k=1)
        with pytest.raises(ReadOnlyError, match="read-only"):
            WRITES[write](memory, hit.memory.id)
        assert isinstance(ReadOnlyError("x"), PermissionError)
    assert state(db_path) == before


def test_a_read_only_memory_searches_and_reads_without_counting_recalls(db_path):
    filled(db_path)
    before = state(db_path)
    with Memory(db_path, embedder=EMBEDDER, read_only=True) as memory:
        hits = memory.search("where does ada live?", user_id="ada", k=3)
        assert {hit.memory.content for hit in hits} == set(FACTS)
        assert memory.get(hits[0].memory.id, user_id="ada").content == hits[0].memory.content
        assert memory.context("ada's family", user_id="ada").text
        assert memory.blocks.get("persona", user_id="ada").value == "a careful assistant"
        assert len(memory.get_all(user_id="ada")) == 3 and memory.history(hits[0].memory.id, user_id="ada")
        assert memory.maintain(user_id="ada", dry_run=True).archived == 0
    assert state(db_path) == before


def test_a_read_only_memory_refuses_a_store_that_is_not_there_or_not_this_version(db_path):
    if db_path.startswith("postgresql://"):
        with pytest.raises(SchemaError, match="no dspy-memory store yet"):
            Memory(db_path, embedder=EMBEDDER, read_only=True)
    else:
        with pytest.raises(MemoryFileError, match="no memory file"):
            Memory(db_path, embedder=EMBEDDER, read_only=True)
        assert not os.path.exists(db_path)
    filled(db_path)
    latest = MIGRATIONS[-1].version
    with Raw(db_path) as raw:
        raw.execute("DELETE FROM schema_migrations WHERE version = ?", (latest,))
    with pytest.raises(SchemaError, match=f"schema version {latest - 1}, older.*without read_only"):
        Memory(db_path, embedder=EMBEDDER, read_only=True)
    with Raw(db_path) as raw:  # nothing was migrated by the attempt
        assert raw.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == latest - 1


def test_read_only_cannot_be_combined_with_scheduled_maintenance(tmp_path):
    with pytest.raises(ConfigError, match="maintenance_every"):
        Memory(str(tmp_path / "m.db"), embedder=EMBEDDER, read_only=True, maintenance_every="1d")


@pytest.mark.sqlite_only("the bytes of the file")
def test_a_read_only_sqlite_file_keeps_its_bytes(db_path):
    filled(db_path)
    files = sorted(Path(db_path).parent.glob(Path(db_path).name + "*"))

    def digest() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}

    before = digest()
    with Memory(db_path, embedder=EMBEDDER, read_only=True) as memory:
        memory.search("tea", user_id="ada")
        with pytest.raises(ReadOnlyError):
            memory.add("more", user_id="ada")
    assert digest() == before


# -- PostgreSQL: a SELECT-only role, read-only transactions, a streaming replica ---------------


@pytest.fixture
def pg_store(postgres_server, request):
    from .pg import fresh_schema

    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return filled(url)


def with_option(url: str, option: str) -> str:
    head, _, options = url.partition("options=")
    return f"{head}options={options}{quote(' ' + option)}" if options else f"{url}&options={quote(option)}"


def schema_of(url: str) -> str:
    with Raw(url) as raw:
        return raw.execute("SELECT current_schema()").fetchone()[0]


def test_a_read_only_memory_opens_as_a_select_only_role(pg_store):
    schema = schema_of(pg_store)
    role = f"reader_{schema}"
    with Raw(pg_store) as raw:
        raw.execute(f"CREATE ROLE {role} LOGIN")
        raw.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        raw.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    try:
        as_reader = pg_store.replace("postgresql://postgres:", f"postgresql://{role}:", 1)
        assert as_reader != pg_store, "the test server's URL names the postgres user"
        with Memory(as_reader, embedder=EMBEDDER, read_only=True) as memory:
            assert {hit.memory.content for hit in memory.search("tea", user_id="ada")} == set(FACTS)
            with pytest.raises(ReadOnlyError):
                memory.add("Ada moved.", user_id="ada")
    finally:
        with Raw(pg_store) as raw:
            raw.execute(f"DROP OWNED BY {role}")
            raw.execute(f"DROP ROLE {role}")


def test_a_read_only_memory_opens_where_transactions_are_read_only_by_default(pg_store):
    read_only_url = with_option(pg_store, "-cdefault_transaction_read_only=on")
    with pytest.raises(StorageError, match="read-only"):
        Memory(read_only_url, embedder=EMBEDDER)
    before = state(pg_store)
    with Memory(read_only_url, embedder=EMBEDDER, read_only=True) as memory:
        assert len(memory.search("where does ada live?", user_id="ada")) == 3
    assert state(pg_store) == before


class Replica:
    """A streaming replica of the test server: pg_basebackup -R of its data folder, started as
    a second server (a unix socket in its own folder) with the same binaries."""

    def __init__(self, primary: str) -> None:
        with Raw(primary) as raw:
            self.data = Path(raw.execute("SHOW data_directory").fetchone()[0])
            socket_dir = raw.execute("SHOW unix_socket_directories").fetchone()[0].split(",")[0].strip()
        if not self.data.is_dir():
            pytest.skip("the test server's files are not on this machine")
        try:
            from pgserver._commands import POSTGRES_BIN_PATH
        except ImportError:
            pytest.skip("no pgserver binaries for a second server")
        self.bin = Path(POSTGRES_BIN_PATH)
        owner = pwd.getpwuid(self.data.stat().st_uid).pw_name
        self.user = owner if os.geteuid() == 0 and owner != "root" else None
        self.folder = Path(tempfile.mkdtemp(prefix="dspy-replica-"))
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        self.pgdata = self.folder / "data"
        self.run(
            "pg_basebackup",
            "-D",
            str(self.pgdata),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            socket_dir,
            "-U",
            "postgres",
        )
        self.run(
            "pg_ctl", "-D", str(self.pgdata), "-l", str(self.folder / "log"), "-w", "start",
            "-o", f"-p 5499 -k {self.pgdata} -h ''",
        )  # fmt: skip
        self.url = f"postgresql://postgres:@/postgres?host={self.pgdata}&port=5499"

    def run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin / tool), *args], capture_output=True, text=True, timeout=120, user=self.user
        )
        if done.returncode:
            raise RuntimeError(f"{tool} failed: {done.stderr.strip()}")

    def caught_up(self, primary: str) -> None:
        with Raw(primary) as raw:
            lsn = raw.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        with Raw(self.url) as raw:
            for _ in range(300):
                if raw.execute("SELECT pg_last_wal_replay_lsn() >= ?::pg_lsn", (lsn,)).fetchone()[0]:
                    return
                time.sleep(0.1)
        raise AssertionError("the replica did not catch up in 30 s")

    def stop(self) -> None:
        try:
            self.run("pg_ctl", "-D", str(self.pgdata), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def test_a_read_only_memory_searches_a_streaming_replica_while_the_primary_writes(pg_store):
    replica = Replica(pg_store)
    try:
        on_replica = f"{replica.url}&options={pg_store.split('options=', 1)[1]}"  # the test's schema
        with Raw(replica.url) as raw:
            assert raw.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        with pytest.raises(StorageError, match="read-only"):  # what happened before read_only
            Memory(on_replica, embedder=EMBEDDER)
        with (
            Memory(on_replica, embedder=EMBEDDER, read_only=True) as reader,
            Memory(pg_store, embedder=EMBEDDER) as writer,
        ):
            assert len(reader.search("where does ada live?", user_id="ada")) == 3
            writer.add("Ada moved to Oslo in May.", user_id="ada", infer=False)
            replica.caught_up(pg_store)
            assert "Ada moved to Oslo in May." in {
                hit.memory.content for hit in reader.search("Oslo", user_id="ada")
            }
            with pytest.raises(ReadOnlyError):
                reader.add("Ada moved again.", user_id="ada")
    finally:
        replica.stop()
