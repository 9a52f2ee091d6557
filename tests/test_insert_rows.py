"""The batch-insert hook (`Connections.insert_rows`, store/backend.py), on each backend: SQLite
inserts with its statements, PostgreSQL by COPY (binary for vectors). Either way a batch's rows
are stored exactly as given (unicode, None, JSON text), the ids of an identity column come back
in the rows' order, NUL is refused on PostgreSQL and kept on SQLite, and a refused batch leaves
nothing behind."""

from __future__ import annotations

import json

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError

pytestmark = pytest.mark.backends

COLUMNS = (
    "memory_id",
    "user_id",
    "agent_id",
    "run_id",
    "event",
    "version",
    "new_content",
    "actor",
    "metadata",
    "created_at",
)
ODD = [
    "plain",
    "日本語のテキスト",
    "emoji 🦜 and \u200b zero width",
    "quote ' \" \\ backslash",
    "tab\tnew\nline",
    "%s ? $1",
]


def event_rows(count: int) -> list[tuple]:
    """Events with odd text, None values and JSON metadata, each row told apart by its memory id."""
    return [
        (
            f"m-{i:05d}",
            None if i % 3 else f"user {ODD[i % len(ODD)]}",
            None,
            "run" if i % 2 else None,
            "ADD",
            i % 7 + 1,
            ODD[i % len(ODD)] + f" #{i}",
            "test",
            json.dumps({"i": i, "text": ODD[i % len(ODD)], "nested": {"list": [1, None, "x"]}}),
            f"2026-11-27T00:00:{i % 60:02d}.000000Z",
        )
        for i in range(count)
    ]


def stored_events(memory: Memory, ids: list[int]) -> dict[int, tuple]:
    with memory.store.snapshot() as conn:
        rows = conn.execute(
            f"SELECT id, {', '.join(COLUMNS)} FROM memory_events WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def test_a_batch_is_stored_exactly_and_its_new_ids_come_back_in_the_rows_order(db_path):
    rows = event_rows(1200)  # past one SQLite statement's parameters: several statements
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        with memory.store.transaction() as conn:
            ids = memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, rows, generated="id")
            again = memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, rows[:5], generated="id")
        assert len(ids) == len(set(ids)) == 1200
        assert ids == sorted(ids) and again == sorted(again) and again[0] > ids[-1]
        stored = stored_events(memory, ids)
        assert [stored[row_id] for row_id in ids] == rows
        assert json.loads(stored[ids[4]][8]) == {"i": 4, "text": ODD[4], "nested": {"list": [1, None, "x"]}}


def test_a_batch_without_generated_ids_returns_none_and_an_empty_batch_inserts_nothing(db_path):
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        with memory.store.transaction() as conn:
            assert memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, event_rows(3)) == []
            assert memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, [], generated="id") == []
        with memory.store.snapshot() as conn:
            assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 3


@pytest.mark.parametrize("count", [3, 10])  # a small batch is one INSERT on PostgreSQL, a larger one COPY
def test_nul_in_a_batch_is_refused_on_postgres_with_nothing_stored_and_kept_exactly_on_sqlite(db_path, count):
    rows = event_rows(count)
    rows[-2] = (*rows[-2][:6], "before\x00after", *rows[-2][7:])
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        if memory.store.backend_name == "postgres":
            with pytest.raises(InvalidInputError, match="U\\+0000"):
                with memory.store.transaction() as conn:
                    memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, rows, generated="id")
            with memory.store.snapshot() as conn:
                assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 0
            return
        with memory.store.transaction() as conn:
            ids = memory.store._conns.insert_rows(conn, "memory_events", COLUMNS, rows, generated="id")
        assert stored_events(memory, ids)[ids[-2]][6] == "before\x00after"


def test_memories_added_in_a_batch_get_row_ids_in_order_with_their_vectors_and_keyword_rows(db_path):
    texts = [f"{ODD[i % len(ODD)]} note {i} about orchids" for i in range(700)]
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        result = memory.add(texts, user_id="ada", infer=False)
        with memory.store.snapshot() as conn:
            rows = conn.execute(
                "SELECT m.row_id, m.content FROM memories m JOIN memory_vectors v ON v.row_id = m.row_id "
                "WHERE m.user_id = ? ORDER BY m.row_id",
                ("ada",),
            ).fetchall()
        assert [row[1] for row in rows] == [record.content for record in result.memories] == texts
        hits = memory.search("note 123 orchids", user_id="ada", recipe="keyword", k=3)
        assert hits and hits[0].memory.content == texts[123]
