"""Several threads, and several Memory objects, on one file."""

import threading

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

pytestmark = pytest.mark.backends


def test_threads_write_and_read_concurrently(db_path):
    memory = Memory(db_path, embedder=HashEmbedder(64))
    errors = []

    def writer(user):
        try:
            for i in range(25):
                memory.add(f"{user} note {i} about threads", user_id=user)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader(user):
        try:
            for _ in range(25):
                for hit in memory.search("note about threads", user_id=user):
                    assert hit.memory.user_id == user
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=f, args=(f"user{i}",)) for i in range(4) for f in (writer, reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for i in range(4):
        assert len(memory.get_all(user_id=f"user{i}")) == 25
    memory.close()


def test_two_memories_on_one_file_see_each_other(db_path):
    first = Memory(db_path, embedder=HashEmbedder(64))
    second = Memory(db_path, embedder=HashEmbedder(64))
    barrier = threading.Barrier(2)

    def add(memory, user):
        barrier.wait()
        for i in range(20):
            memory.add(f"{user} fact {i}", user_id="shared", metadata={"by": user})

    threads = [threading.Thread(target=add, args=(m, name)) for m, name in ((first, "a"), (second, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(first.get_all(user_id="shared")) == 40
    assert {h.memory.metadata["by"] for h in second.search("fact", user_id="shared", k=40)} == {"a", "b"}
    first.close()
    second.close()


def test_a_failed_write_rolls_back_everything(memory, monkeypatch):
    memory.add("before", user_id="ada")

    insert = memory.store.keywords.insert

    def boom(conn, rows):
        # Only the new memory's own entry fails: rewriting "before"'s conversation context,
        # which persisting the episode does first (a contentless index re-inserts it), works.
        if any(row[1] == "during" for row in rows):
            raise RuntimeError("disk on fire")
        return insert(conn, rows)

    monkeypatch.setattr(memory.store.keywords, "insert", boom)
    try:
        memory.add("during", user_id="ada")
    except RuntimeError:
        pass
    assert [m.content for m in memory.get_all(user_id="ada")] == ["before"]
    with memory.store.snapshot() as conn:
        assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 1
    # The episode itself was persisted before the failure and is still pending.
    assert memory.store.episodes.unfinished(ingested_before="9999").episodes[0].content == "during"
