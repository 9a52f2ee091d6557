"""What a memory costs on disk (docs/benchmarks.md, "Disk per memory"): a new file has 8 kB pages,
so a float32 vector row does not leave half a page empty; indexes hold no entries for ids a row
does not have. A file from before (schema 9, 4 kB
pages) opens, is migrated and finds the same memories."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.sqlite import backend, connection
from dspy_memory.store.sqlite.migrations import MIGRATIONS

from .old_files import as_left, migrated_to

AT = "2026-05-01T10:00:00Z"
CHAT = [
    "Should we plan the hike for Saturday?",
    "Yes, the weather looks dry then.",
    "I will bring sandwiches.",
]


def pages(memory, name):
    """(bytes of pages, cells) of one table or index."""
    with memory.store.snapshot() as conn:
        row = conn.execute("SELECT sum(pgsize), sum(ncell) FROM dbstat WHERE name = ?", (name,)).fetchone()
    return row[0], row[1]


def keyword_hits(memory, query, **scope):
    return sorted(hit.memory.content for hit in memory.search(query, recipe="keyword", k=10, **scope))


def test_a_vector_row_of_a_new_file_takes_under_1700_bytes_of_pages(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(384)) as memory:
        memory.add([f"note number {i} about the garden" for i in range(500)], user_id="ada")
        size, rows = pages(memory, "memory_vectors")
        with memory.store.snapshot() as conn:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
    assert rows >= 500
    assert size / 500 < 1700  # 4 kB pages held two 1.6 kB rows each: 2 kB a row


def test_rows_without_an_agent_or_run_take_no_index_entries_and_agent_scopes_still_find_context(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(64)) as memory:
        memory.add(CHAT, user_id="ada")
        memory.add(CHAT, agent_id="planner")
        for index in ("memories_agent", "memories_run", "episodes_agent", "episodes_run"):
            expected = 3 if index.endswith("agent") else 0
            assert pages(memory, index)[1] == expected, index
        # "weather" is only in the second message: the first is found by its neighbour's word.
        assert keyword_hits(memory, "weather", agent_id="planner") == sorted(CHAT[:3])


def test_a_file_from_schema_9_with_4k_pages_is_migrated_and_finds_the_same_turns(tmp_path, monkeypatch):
    path = str(tmp_path / "old.db")
    with monkeypatch.context() as old:
        old.setattr(connection, "PAGE_SIZE", 4096)
        old.setattr(backend, "migrate", migrated_to(9))
        with Memory(path, embedder=HashEmbedder(64)) as memory:
            memory.add(CHAT, user_id="ada", at=AT)
            memory.add(CHAT, agent_id="planner", run_id="r1")
            before = [
                keyword_hits(memory, "weather", user_id="ada"),
                keyword_hits(memory, "sandwiches", agent_id="planner"),
            ]
    as_left(path, 9)
    with Memory(path, embedder=HashEmbedder(64)) as memory:
        with memory.store.snapshot() as conn:
            assert (
                conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
                == MIGRATIONS[-1].version
            )
            assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096  # an existing file keeps its pages
            assert (
                "WHERE agent_id IS NOT NULL"
                in conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'memories_agent'").fetchone()[0]
            )
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        after = [
            keyword_hits(memory, "weather", user_id="ada"),
            keyword_hits(memory, "sandwiches", agent_id="planner"),
        ]
        assert after == before == [sorted(CHAT), sorted(CHAT[1:])]
        # A turn said again (same text, scope and time) is found by its hash through the new
        # index, and not stored twice.
        memory.add(CHAT[:1], user_id="ada", at=AT)
        with memory.store.snapshot() as conn:
            assert conn.execute("SELECT count(*) FROM memories WHERE user_id = 'ada'").fetchone()[0] == 3


def test_the_raw_turn_index_holds_a_hash_prefix_not_the_whole_hash(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(64)) as memory:
        memory.add(CHAT, user_id="ada")
        with memory.store.snapshot() as conn:
            payload = conn.execute(
                "SELECT sum(payload) FROM dbstat WHERE name = ?", ("memories_turns",)
            ).fetchone()[0]
    assert payload / len(CHAT) < 64  # the hex hash alone is 64 bytes
