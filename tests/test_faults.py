"""A full disk is a StorageFullError that names the file and what to do, and loses nothing: what
was accepted before the fault stays findable, input saved before it stays pending for
reprocess(), the file passes check(), and the next add succeeds once there is space again.

The disk is filled without root by capping the file at its size (SQLite's PRAGMA max_page_count,
set on every connection the store opens), and with root by a 3 MB tmpfs (a real ENOSPC, WAL
included)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading

import pytest

from dspy_memory import Memory, StorageError, StorageFullError
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.faults import postgres_storage_error, sqlite_storage_error
from dspy_memory.store.sqlite import connection as sqlite_connection
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Scope

ADA = Scope(user_id="ada")
# Text that cannot fit in the pages a file already has: ~40 KB of distinct words.
BIG = " ".join(f"word{i}" for i in range(5000))
SMALL = "Ada likes green tea."
NOT_LOST = ("pending", "failed")


class SizeCap:
    """Every SQLite connection opened while installed, capped on demand at the size the file has
    (PRAGMA max_page_count is per connection and resets on reopen), and uncapped."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.capped = False
        self.connections: list = []
        self._lock = threading.Lock()
        opened = sqlite_connection.open_connection

        def tracked(*args, **kwargs):
            conn = opened(*args, **kwargs)
            with self._lock:
                self.connections.append(conn)
                if self.capped:
                    conn.execute("PRAGMA max_page_count = 1")  # never below the file's size
            return conn

        monkeypatch.setattr(sqlite_connection, "open_connection", tracked)

    def _each(self, pragma: str) -> None:
        for conn in self.connections:
            try:
                conn.execute(pragma)
            except Exception as exc:  # a closed connection
                assert "closed" in str(exc), exc

    def fill(self) -> None:
        with self._lock:
            self.capped = True
            self._each("PRAGMA max_page_count = 1")

    def free(self) -> None:
        with self._lock:
            self.capped = False
            self._each("PRAGMA max_page_count = 1073741823")


@pytest.fixture
def cap(monkeypatch):
    return SizeCap(monkeypatch)


class FillingEmbedder(HashEmbedder):
    """The disk fills while the embedder runs: after the episodes were saved, before the raw
    turns are written."""

    def __init__(self, cap: SizeCap) -> None:
        super().__init__(64, cache_size=0)
        self.cap = cap
        self.armed = False

    def _embed_batch(self, texts):
        if self.armed:
            self.armed = False
            self.cap.fill()
        return super()._embed_batch(texts)


def many_facts(call, prefix="Ada"):
    """Thirty long facts: more than the pages a file has spare."""
    return {
        "ops": [
            {"action": "ADD", "content": f"{prefix} fact {i}: " + " ".join(f"w{i}x{j}" for j in range(120))}
            for i in range(30)
        ]
    }


def statuses(memory) -> list[str]:
    return sorted(episode.status for episode in memory.store.episodes.list(ADA))


def found(memory, text: str) -> bool:
    return any(hit.memory.content == text for hit in memory.search(text, user_id="ada", k=5))


def assert_names_the_file(error: StorageFullError, path) -> None:
    message = str(error)
    assert str(path) in message and "free space" in message and "bytes" in message, message
    assert isinstance(error, OSError) and isinstance(error, StorageError)
    assert error.path == str(path)
    assert "full" in str(error.__cause__), "the driver's error is kept as the cause"


MESSAGES = {
    "one text": BIG,
    "a list of messages": [{"role": "user", "content": f"{i} {BIG}"} for i in range(3)],
}


@pytest.mark.parametrize("given", MESSAGES)
def test_a_full_disk_refuses_a_raw_add_and_stores_nothing_of_it(tmp_path, cap, given):
    path = tmp_path / "memory.db"
    with Memory(str(path), embedder=HashEmbedder(64)) as memory:
        memory.add(SMALL, user_id="ada")
        cap.fill()
        with pytest.raises(StorageFullError) as raised:
            memory.add(MESSAGES[given], user_id="ada")
        assert_names_the_file(raised.value, path)
        assert "nothing of it was written" in str(raised.value)
        assert statuses(memory) == ["done"], "only what was accepted before the fault"
        assert found(memory, SMALL)
        assert memory.check().ok
        cap.free()
        result = memory.add(MESSAGES[given], user_id="ada")
        assert {episode.status for episode in result.episodes} == {"done"}
        assert memory.check().ok


@pytest.mark.parametrize("given", MESSAGES)
def test_a_full_disk_after_the_episodes_were_saved_leaves_them_pending_for_reprocess(tmp_path, cap, given):
    path = tmp_path / "memory.db"
    embedder = FillingEmbedder(cap)
    with Memory(str(path), embedder=embedder) as memory:
        memory.add(SMALL, user_id="ada")
        embedder.armed = True
        with pytest.raises(StorageFullError) as raised:
            memory.add(MESSAGES[given], user_id="ada")
        assert_names_the_file(raised.value, path)
        assert "reprocess()" in str(raised.value) and "saved" in str(raised.value)
        saved = [e for e in memory.store.episodes.list(ADA) if e.content != SMALL]
        assert saved and all(e.status in NOT_LOST for e in saved), [e.status for e in saved]
        assert memory.check().ok
        cap.free()
        [result] = memory.reprocess()
        assert {episode.status for episode in result.episodes} == {"done"}
        assert statuses(memory) == ["done"] * (len(saved) + 1)
        assert found(memory, SMALL) and memory.check().ok
        assert memory.add("Ada moved to Denver.", user_id="ada").memories


def test_a_full_disk_during_the_lm_write_keeps_the_episode_for_reprocess(tmp_path, cap):
    path = tmp_path / "memory.db"
    fills = {"left": 1}

    def responder(call):
        if fills["left"]:
            fills["left"] -= 1
            cap.fill()  # while the LM thinks, the disk fills up
        return many_facts(call)

    lm = scripted_lm(responder)
    with Memory(str(path), embedder=HashEmbedder(64), lm=lm) as memory:
        memory.add(SMALL, user_id="ada", infer=False)
        with pytest.raises(StorageFullError) as raised:
            memory.add([{"role": "user", "content": "Ada: I have thirty things to tell you."}], user_id="ada")
        assert_names_the_file(raised.value, path)
        assert "reprocess()" in str(raised.value)
        [pending] = [e for e in memory.store.episodes.list(ADA) if e.infer]
        assert pending.status in NOT_LOST, "never done with nothing"
        assert memory.get_all(user_id="ada", kinds=["fact"]) == []
        assert memory.check().ok
        cap.free()
        [result] = memory.reprocess()
        assert result.error is None and len(result.memories) == 30
        assert statuses(memory) == ["done", "done"] and memory.check().ok


def test_a_full_disk_before_the_lm_write_stores_nothing_and_calls_no_lm(tmp_path, cap):
    lm = scripted_lm(many_facts)
    with Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(64), lm=lm) as memory:
        cap.fill()
        with pytest.raises(StorageFullError, match="nothing of it was written"):
            memory.add([{"role": "user", "content": BIG}] * 2, user_id="ada")
        assert lm.engine.calls == [] and statuses(memory) == []
        cap.free()
        assert len(memory.add("Ada: one more.", user_id="ada").memories) == 30


@pytest.mark.parametrize("infer", [False, True], ids=["raw", "lm"])
def test_a_full_disk_in_the_background_writer_surfaces_in_flush_and_loses_nothing(
    tmp_path, cap, caplog, infer
):
    lm = scripted_lm(many_facts)
    settings = {"debounce_seconds": 60, "max_wait_seconds": 60}
    with Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(64), lm=lm, write=settings) as memory:
        memory.add(SMALL, user_id="ada", infer=False)
        queued = memory.add(BIG, user_id="ada", background=True, infer=infer)
        assert queued.queued
        cap.fill()
        with caplog.at_level(logging.WARNING, logger="dspy_memory"):
            [result] = memory.flush(timeout=60)
        assert result.error and "full" in result.error and "reprocess()" in result.error
        assert [e.id for e in result.episodes] == [e.id for e in queued.episodes]
        assert all(e.status in NOT_LOST for e in result.episodes)
        assert "full" in caplog.text
        [episode] = [e for e in memory.store.episodes.list(ADA) if e.id == queued.episodes[0].id]
        assert episode.status in NOT_LOST
        assert memory.check().ok
        cap.free()
        [again] = memory.reprocess()
        assert {e.status for e in again.episodes} == {"done"} and memory.check().ok
        assert found(memory, SMALL)


def test_storage_errors_are_library_errors_that_name_what_the_driver_said():
    import sqlean

    def driver_error(code: int, text: str):
        error = sqlean.OperationalError(text)
        error.sqlite_errorcode = code
        return error

    full = sqlite_storage_error("/x/memory.db", driver_error(13, "database or disk is full"))
    assert isinstance(full, StorageFullError) and "/x/memory.db" in str(full)
    io = sqlite_storage_error("/x/memory.db", driver_error(10 | (3 << 8), "disk I/O error"))
    assert type(io) is StorageError and "disk I/O error" in str(io) and "/x/memory.db" in str(io)
    corrupt = sqlite_storage_error("/x/m.db", driver_error(11, "database disk image is malformed"))
    assert type(corrupt) is StorageError and "backup" in str(corrupt) and "verify /x/m.db" in str(corrupt)
    readonly = sqlite_storage_error("/x/m.db", driver_error(8, "attempt to write a readonly database"))
    assert type(readonly) is StorageError and "read-only" in str(readonly)
    assert sqlite_storage_error("/x/m.db", driver_error(19, "UNIQUE constraint failed")) is None
    assert sqlite_storage_error("/x/m.db", driver_error(5, "database is locked")) is None


def test_a_damaged_file_is_a_storage_error_that_says_how_to_find_and_restore_it(tmp_path):
    import sqlean

    path = tmp_path / "memory.db"
    with Memory(str(path), embedder=HashEmbedder(64)) as memory:
        for i in range(40):
            memory.add(f"Ada fact number {i} " + "lorem ipsum " * 50, user_id="ada")
    with sqlean.connect(str(path)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [
            row[0]
            for row in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memories' AND pagetype = 'leaf'")
        ]
    with open(path, "r+b") as handle:  # cell pointers of two pages of memory rows overwritten
        for page in pages[1:3]:
            handle.seek((page - 1) * page_size + 8)
            handle.write(b"\xff" * 60)
    with Memory(str(path), embedder=HashEmbedder(64), process_pending_on_open=False) as memory:
        with pytest.raises(StorageError) as raised:
            memory.get_all(user_id="ada")
    assert not isinstance(raised.value, StorageFullError)
    assert f"{path} is damaged" in str(raised.value) and "restore-backup" in str(raised.value)
    assert "malformed" in str(raised.value.__cause__)


def test_postgres_error_classes_map_to_storage_errors():
    pytest.importorskip("psycopg")
    from psycopg import errors

    where = "postgresql://ada:***@db.example/memories"
    full = postgres_storage_error(where, errors.DiskFull("could not extend file: No space left on device"))
    assert isinstance(full, StorageFullError) and where in str(full) and "free space" in str(full)
    for error in (errors.IoError("could not read block"), errors.DataCorrupted("invalid page")):
        mapped = postgres_storage_error(where, error)
        assert type(mapped) is StorageError and where in str(mapped), error
    assert type(postgres_storage_error(where, errors.ReadOnlySqlTransaction("read-only"))) is StorageError
    for other in (errors.UniqueViolation("dup"), errors.OutOfMemory("oom"), errors.LockNotAvailable("x")):
        assert postgres_storage_error(where, other) is None, other


def test_a_disk_full_reported_by_postgres_is_a_storage_full_error(postgres_server):
    from dspy_memory.store import Store
    from tests.pg import fresh_schema

    url, drop = fresh_schema(postgres_server)
    store = Store(url)
    try:
        with pytest.raises(StorageFullError) as raised:
            with store.transaction() as conn:
                conn.execute(
                    "DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$"
                )
        assert store.path in str(raised.value) and "could not extend file" in str(raised.value)
        assert type(raised.value.__cause__).__name__ == "DiskFull"
        with store.transaction() as conn:  # the connection is usable again
            assert conn.execute("SELECT 1").fetchone()[0] == 1
    finally:
        store.close()
        drop()


def _mount_tmpfs(folder) -> bool:
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    folder = tmp_path / "disk"
    folder.mkdir()
    if not _mount_tmpfs(folder):
        pytest.skip("needs root to mount a 3 MB tmpfs (the max_page_count tests above run anywhere)")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def fill_up(folder) -> os.PathLike:
    filler = folder / "filler"
    handle = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(handle, b"\0" * 4096):
            pass
    except OSError:  # no space left
        pass
    finally:
        os.close(handle)
    return filler


def test_a_really_full_disk_loses_nothing_and_recovers_when_space_returns(small_disk):
    path = small_disk / "memory.db"
    lm = scripted_lm(many_facts)
    with Memory(str(path), embedder=HashEmbedder(64), lm=lm) as memory:
        memory.add(SMALL, user_id="ada", infer=False)
        filler = fill_up(small_disk)
        with pytest.raises(StorageFullError) as raised:
            memory.add([{"role": "user", "content": BIG}] * 3, user_id="ada")
        assert str(path) in str(raised.value) and "free space" in str(raised.value)
        assert all(status in ("done", *NOT_LOST) for status in statuses(memory))
        assert found(memory, SMALL)
        os.remove(filler)
        memory.reprocess()
        assert memory.add("Ada: one more thing.", user_id="ada").error is None
        assert memory.check().ok
        assert set(statuses(memory)) == {"done"}
