"""delete_scope / delete: the GDPR path. Proven by scanning every table (shadow tables of the
vector and keyword indexes included) and the raw bytes of the file (decrypted, on an encrypted
file), after the same scan found the content there before the erasure (`unseen`): a scan that
cannot see the data would find nothing afterwards either."""

import logging
import threading
from pathlib import Path

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder, text_hash

from .encrypted import connect
from .leakscan import file_bytes, leaks, unseen

pytestmark = [pytest.mark.backends, pytest.mark.encrypted]

SECRET_USER = "ada-secret-user"
SECRET_WORDS = ("zanzibarquartz", "aubergineprotocol", "velvetlighthouse")


def fill(memory):
    embedder = memory.embedder
    ada = []
    for word in SECRET_WORDS:
        result = memory.add(
            [{"role": "user", "name": "Ada", "content": f"My password hint is {word}."}],
            user_id=SECRET_USER,
            run_id="session-1",
            metadata={"note": word},
        )
        ada.extend(result.memories)
    memory.update(
        ada[0].id,
        f"My password hint is {SECRET_WORDS[0]} twice.",
        reason=f"because {SECRET_WORDS[1]}",
        user_id=SECRET_USER,
    )
    memory.search(SECRET_WORDS[2], user_id=SECRET_USER)
    memory.add("Bob keeps his own notes about gardening.", user_id="bob")
    vectors = [embedder.embed([record.content])[0].tobytes() for record in ada]
    return ada, vectors


def test_delete_scope_leaves_nothing_of_the_user(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        ada, vectors = fill(memory)
        assert unseen(db_path, (*SECRET_WORDS, SECRET_USER), vectors) == [], "the scan must see it first"
        result = memory.delete_scope(user_id=SECRET_USER)
        assert result.counts["memories"] == 4 and result.counts["episodes"] == 3
        assert result.counts["memory_events"] >= 4 and result.counts["vectors"] == 4
        assert memory.get_all(user_id=SECRET_USER) == []
        assert memory.search(SECRET_WORDS[0], user_id=SECRET_USER) == []
        assert memory.get(ada[0].id, all_scopes=True) is None
        assert memory.history(ada[0].id, all_scopes=True) == []
        # The other user is untouched.
        assert memory.search("gardening", user_id="bob")[0].content.startswith("Bob keeps")
        assert leaks(db_path, (*SECRET_WORDS, SECRET_USER), vectors) == []
        # Nothing is left in in-process caches either.
        cached = set(memory.embedder._cache)
        assert not any(text_hash(record.content) in cached for record in ada)
        assert not getattr(memory.store.keywords, "_frequencies_cache", None)
    if db_path.startswith("postgresql://"):
        return  # the server's files: docs/scaling.md, "Erasure"
    raw = b"".join(file_bytes(db_path).values())  # an encrypted file's pages decrypted
    for needle in (*SECRET_WORDS, SECRET_USER):
        assert needle.encode() not in raw.lower(), needle
    for vector in vectors:
        assert vector not in raw


def test_delete_scope_by_run_only_removes_that_run(memory):
    memory.add("first run note", user_id="ada", run_id="r1")
    memory.add("second run note", user_id="ada", run_id="r2")
    memory.delete_scope(user_id="ada", run_id="r1")
    assert [m.content for m in memory.get_all(user_id="ada")] == ["second run note"]


def test_delete_one_memory_erases_its_content_everywhere(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        ada, vectors = fill(memory)
        assert unseen(db_path, (SECRET_WORDS[0],), vectors[:1]) == [], "the scan must see it first"
        memory.delete(ada[0].id, user_id=SECRET_USER)
        remaining = {m.id for m in memory.get_all(user_id=SECRET_USER)}
        assert remaining == {ada[1].id, ada[2].id}
        # Its words (all versions, the update reason, the metadata) are gone; the others stay.
        assert leaks(db_path, (SECRET_WORDS[0],), vectors[:1]) == []
        assert leaks(db_path, (SECRET_WORDS[2],), ())
        assert [e.event for e in memory.history(ada[0].id, user_id=SECRET_USER)] == [
            "ADD",
            "UPDATE",
            "DELETE",
        ]


@pytest.mark.sqlite_only(reason="the SQLite WAL")
def test_idle_connections_of_other_threads_do_not_keep_erased_pages_in_the_wal(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        ada, vectors = fill(memory)
        assert unseen(db_path, (SECRET_WORDS[0],), vectors[:1]) == [], "the scan must see it first"
        ready, done = threading.Barrier(3), threading.Event()

        def reader():  # each thread has its own connection, left idle after these reads
            memory.search(SECRET_WORDS[0], user_id=SECRET_USER)
            memory.get(ada[0].id, user_id=SECRET_USER)
            memory.history(ada[0].id, user_id=SECRET_USER)
            ready.wait()
            done.wait()

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for thread in threads:
            thread.start()
        try:
            ready.wait()
            memory.delete(ada[0].id, user_id=SECRET_USER)
            assert Path(db_path + "-wal").stat().st_size == 0
            assert leaks(db_path, (SECRET_WORDS[0],), vectors[:1]) == []
        finally:
            done.set()
            for thread in threads:
                thread.join()


@pytest.mark.sqlite_only(reason="the SQLite WAL")
def test_a_reader_holding_the_wal_is_reported_and_the_next_purge_empties_it(db_path, caplog):
    with Memory(db_path, embedder=HashEmbedder(64), busy_timeout_ms=100) as memory:
        ada, vectors = fill(memory)
        assert unseen(db_path, SECRET_WORDS[:2], vectors[:2]) == [], "the scan must see it first"
        reader = connect(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM episodes").fetchone()  # a snapshot from before
        with caplog.at_level(logging.WARNING, logger="dspy_memory"):
            memory.delete(ada[0].id, user_id=SECRET_USER)
        assert "could not be moved out of" in caplog.text
        reader.execute("COMMIT")
        reader.close()
        memory.delete(ada[1].id, user_id=SECRET_USER)
        assert leaks(db_path, SECRET_WORDS[:2], vectors[:2]) == []
