"""A memory's links to the episodes it came from, and the index of current memories by content
hash, are keyed by less on SQLite (docs/benchmarks.md, "Disk per memory", third round), and
still do what they are for: provenance is the same in a file from before (migrated), a turn
said again links its new episode once, erasing an episode leaves no link behind, and a link to
an episode that does not exist is refused."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .old_files import as_left, migrated_to

AT = "2026-05-01T10:00:00Z"
CHAT = [
    {"role": "user", "name": "Ada", "content": "Should we plan the hike for Saturday?"},
    {"role": "user", "name": "Bo", "content": "Yes, the weather looks dry then."},
    {"role": "user", "name": "Ada", "content": "I will bring sandwiches."},
]


def payload(memory, pattern):
    """Payload bytes of the tables and indexes whose names match `pattern` (LIKE)."""
    with memory.store.snapshot() as conn:
        return conn.execute("SELECT sum(payload) FROM dbstat WHERE name LIKE ?", (pattern,)).fetchone()[0]


def sources(memory):
    with memory.store.snapshot() as conn:
        return sorted(tuple(row) for row in conn.execute("SELECT memory_id, episode_id FROM memory_sources"))


def provenance(memory, query, **scope):
    return sorted(
        (hit.content, tuple(source.episode_id for source in hit.provenance))
        for hit in memory.search(query, recipe="keyword", k=10, **scope)
    )


def test_a_memorys_link_to_its_episode_takes_under_50_bytes_of_payload(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add([f"message {i} of a long chat" for i in range(300)], user_id="ada", at=AT)
        assert len(sources(memory)) == 300
        # Two 36-character ids and a time, in the table and again in its episode index, were ~180.
        assert payload(memory, "memory_source%") / 300 < 50


def test_the_index_of_current_memories_by_hash_holds_a_prefix_not_the_whole_hash(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add([f"message {i} of a long chat" for i in range(300)], user_id="ada", at=AT)
        assert payload(memory, "memories_hash") / 300 < 40  # the hex hash alone is 64 bytes


def test_a_file_from_schema_12_keeps_its_sources_and_erasing_an_episode_leaves_no_link(tmp_path, monkeypatch):
    from dspy_memory.store.sqlite import backend

    path = str(tmp_path / "old.db")
    with monkeypatch.context() as old:
        old.setattr(backend, "migrate", migrated_to(13))
        with Memory(path, embedder=HashEmbedder(32)) as memory:
            memory.add(CHAT, user_id="ada", at=AT)
            memory.add(CHAT[:1], user_id="bo", at=AT)
            before = sources(memory), provenance(memory, "hike", user_id="ada")
            bo_before = provenance(memory, "hike", user_id="bo")
    as_left(path, 13)
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        assert (sources(memory), provenance(memory, "hike", user_id="ada")) == before
        assert len(before[0]) == 4
        # The same turn said again (same text, scope and time) is one memory with two sources.
        memory.add(CHAT[:1], user_id="ada", at=AT)
        memory.add(CHAT[:1], user_id="ada", at=AT)
        [(content, episodes)] = [
            pair for pair in provenance(memory, "hike", user_id="ada") if pair[0].endswith(CHAT[0]["content"])
        ]
        assert len(set(episodes)) == len(episodes) == 3
        result = memory.store.erase.episodes([episodes[0]], scope=None, actor="user")
        assert result.counts["sources"] == 3
        assert [pair[0] for pair in provenance(memory, "hike", user_id="ada")] == []
        assert provenance(memory, "hike", user_id="bo") == bo_before  # another scope's turn is untouched
        assert len(bo_before) == 1 and len(bo_before[0][1]) == 1
        with memory.store.snapshot() as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            orphans = conn.execute(
                "SELECT count(*) FROM memory_source_links WHERE memory_row NOT IN (SELECT row_id FROM memories) "
                "OR episode_row NOT IN (SELECT rowid FROM episodes)"
            ).fetchone()[0]
        assert orphans == 0
        assert len(sources(memory)) == 3  # bo's turn and ada's two other turns


def test_a_link_to_an_episode_that_does_not_exist_is_refused(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        record = memory.add("a note", user_id="ada").memories[0]
        with pytest.raises(Exception, match="(?i)episode|foreign key"):
            with memory.store.transaction() as conn:
                conn.execute(
                    "INSERT INTO memory_sources (memory_id, episode_id, created_at) VALUES (?, 'nope', ?)",
                    (record.id, AT),
                )
        assert len(sources(memory)) == 1


def test_current_memories_are_found_by_their_whole_hash_in_their_scope_only(tmp_path):
    from dspy_memory.types import Scope
    from dspy_memory.util.text import content_hash

    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add([f"message {i} of a long chat" for i in range(50)], user_id="ada", at=AT)
        memory.add("message 7 of a long chat", user_id="bo", at=AT)
        digest = content_hash("message 7 of a long chat")
        # Same first 16 hex digits, another hash: the prefix picks rows, the whole hash decides.
        twin = digest[:16] + "0" * 48
        found = memory.store.current_by_hash([digest, twin], Scope(user_id="ada"))
        assert list(found) == [digest] and found[digest].user_id == "ada"
        assert found[digest].content == "message 7 of a long chat"


def test_events_without_an_agent_or_run_take_no_entries_in_those_indexes_and_agent_scopes_still_erase(
    tmp_path,
):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add(CHAT, user_id="ada", at=AT)
        memory.add(CHAT, agent_id="planner", at=AT)
        with memory.store.snapshot() as conn:
            cells = {
                name: conn.execute("SELECT sum(ncell) FROM dbstat WHERE name = ?", (name,)).fetchone()[0]
                for name in ("memory_events_agent", "memory_events_run")
            }
        assert cells == {"memory_events_agent": 3, "memory_events_run": 0}
        memory.delete_scope(agent_id="planner")
        with memory.store.snapshot() as conn:
            assert (
                conn.execute("SELECT count(*) FROM memory_events WHERE agent_id = 'planner'").fetchone()[0]
                == 0
            )
            assert conn.execute("SELECT count(*) FROM memory_events WHERE user_id = 'ada'").fetchone()[0] == 3


def test_source_links_are_read_for_checksums_in_key_order_a_batch_of_memories_at_a_time(tmp_path):
    from dataclasses import replace

    from dspy_memory.store import checksums

    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add([f"message {i} of a long chat" for i in range(40)], user_id="ada", at=AT)
        memory.add(["message 3 of a long chat", "message 5 of a long chat"], user_id="ada", at=AT)
        [table] = [table for table in checksums.TABLES if table.name == "memory_sources"]
        with memory.store.snapshot() as conn:
            columns = checksums.column_names(conn, table.name)
            pages = list(checksums.pages(conn, table, columns, 7))
            in_key_order = checksums.digest(conn, replace(table, lead=None), columns, 1000)
            assert checksums.digest(conn, table, columns, 7) == in_key_order
    keys = [table.key_of(row) for page in pages for row in page]
    assert len(keys) == in_key_order[0] == 42 and keys == sorted(keys)
    assert len(pages) == 6  # 40 memories, 7 a page; two of them have two sources
