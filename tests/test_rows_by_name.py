"""Rows are read by column name in store/: the order of a SELECT's columns, or a column added
after them, changes nothing."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.queries import MEMORY_COLUMNS, MEMORY_FROM, TimeView, record_from_row


def test_a_memory_reads_the_same_whatever_the_column_order(db_path):
    with Memory(db_path, embedder=HashEmbedder(32)) as memory:
        [record] = memory.add("Ada lives in Denver.", user_id="ada", metadata={"topic": "home"}).memories
        columns = [column.strip() for column in MEMORY_COLUMNS.split(",")]
        shuffled = ", ".join(["m.subject_id AS extra", *reversed(columns)])
        with memory.store.snapshot() as conn:
            row = conn.execute(
                f"SELECT {shuffled} FROM {MEMORY_FROM} WHERE m.id = ?", (record.id,)
            ).fetchone()
        assert record_from_row(row, TimeView.at()) == record


def test_core_records_come_back_whole(db_path):
    with Memory(db_path, embedder=HashEmbedder(32)) as memory:
        result = memory.add(
            {"role": "user", "content": "Ada: hi", "name": "Ada"}, user_id="ada", metadata={"k": 1}
        )
        [episode] = memory.store.episodes.list(result.episodes[0].scope)
        assert (episode.role, episode.name, episode.metadata, episode.status) == (
            "user",
            "Ada",
            {"k": 1},
            "done",
        )
        [event] = memory.history(result.memories[0].id, user_id="ada")
        assert (event.event, event.memory_id, event.version) == ("ADD", result.memories[0].id, 1)
        [hit] = memory.search("hi", user_id="ada")
        [source] = hit.provenance
        assert (source.episode_id, source.role, source.name, source.content) == (
            episode.id,
            "user",
            "Ada",
            "Ada: hi",
        )
