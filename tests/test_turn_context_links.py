"""The links from a raw turn to the episodes its keyword context quotes are stored by integers
(docs/benchmarks.md, "Disk per memory"), and still do what they are for: erasing an episode
takes its words out of every context that quoted it, also in a file from before (links by id,
migrated) and after the file was vacuumed; export and import see the links by episode id."""

from __future__ import annotations

import sqlean

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .leakscan import leaks, markers
from .old_files import as_left, migrated_to

WORDS = markers(6, seed=20261127)
AT = "2026-05-01T10:00:00Z"


def chat(words):
    return [
        {"role": "user", "name": "Ada", "content": f"turn {i} says {word}"} for i, word in enumerate(words)
    ]


def keyword_hits(memory, query, **scope):
    return sorted(hit.content for hit in memory.search(query, recipe="keyword", k=10, **scope))


def link_bytes(memory):
    """Payload bytes of the turn context links, table and indexes."""
    with memory.store.snapshot() as conn:
        return conn.execute("SELECT sum(payload) FROM dbstat WHERE name LIKE 'turn_context%'").fetchone()[0]


def test_a_turns_context_links_take_under_40_bytes_of_payload(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add([f"message {i} of a long chat" for i in range(300)], user_id="ada", at=AT)
        with memory.store.snapshot() as conn:
            links = conn.execute("SELECT count(*) FROM turn_context").fetchone()[0]
        assert links == 300 * 3 - 4  # two before and one after; the first two and the last have fewer
        # Three 36-character episode ids a turn, in the table and its index, were ~240 bytes.
        assert link_bytes(memory) / 300 < 40


def test_erasing_a_turn_of_a_migrated_file_takes_its_words_out_of_its_neighbours(tmp_path, monkeypatch):
    from dspy_memory.store.sqlite import backend

    path = str(tmp_path / "old.db")
    with monkeypatch.context() as old:
        old.setattr(backend, "migrate", migrated_to(10))
        with Memory(path, embedder=HashEmbedder(32)) as memory:
            memory.add(chat(WORDS), user_id="u", at=AT)
            with memory.store.snapshot() as conn:
                before = sorted(
                    tuple(row) for row in conn.execute("SELECT row_id, episode_id FROM turn_context")
                )
    as_left(path, 10)
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        with memory.store.snapshot() as conn:
            assert (
                sorted(tuple(row) for row in conn.execute("SELECT row_id, episode_id FROM turn_context"))
                == before
            )
        assert len(keyword_hits(memory, WORDS[2], user_id="u")) == 4
        answer = next(
            hit for hit in memory.search(WORDS[2], recipe="keyword", user_id="u") if WORDS[2] in hit.content
        )
        assert memory.delete(answer.id, user_id="u").counts["contexts_rebuilt"] == 3
        assert keyword_hits(memory, WORDS[2], user_id="u") == []
    assert leaks(path, [WORDS[2]]) == []


def test_after_a_vacuum_erasing_a_logged_message_still_rebuilds_the_contexts_that_quoted_it(tmp_path):
    path = str(tmp_path / "m.db")
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        memory.add("an earlier note", user_id="v", at="2026-05-01T09:00:00Z")
        memory.add(f"first {WORDS[0]}", user_id="u", at="2026-05-01T10:00:00Z")
        [logged] = memory.log(f"{WORDS[1]} in a logged message", user_id="u", at="2026-05-01T10:00:01Z")
        memory.add(f"third {WORDS[2]}", user_id="u", at="2026-05-01T10:00:02Z")
        memory.delete_scope(user_id="v")  # a gap in the rowids for VACUUM to close, if it renumbered
    vacuum = sqlean.connect(path)
    vacuum.execute("VACUUM")
    vacuum.close()
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        result = memory.store.erase.episodes([logged.id], scope=logged.scope, actor="user")
        assert result.counts["contexts_rebuilt"] == 2
        assert keyword_hits(memory, WORDS[1], user_id="u") == []
        assert keyword_hits(memory, WORDS[2], user_id="u") == sorted(
            [f"first {WORDS[0]}", f"third {WORDS[2]}"]
        )
        with memory.store.snapshot() as conn:
            # No link outlives its episode.
            assert (
                conn.execute(
                    "SELECT count(*) FROM turn_context_links WHERE episode_row NOT IN (SELECT rowid FROM episodes)"
                ).fetchone()[0]
                == 0
            )
    assert leaks(path, [WORDS[1]]) == []


def test_an_exported_store_imports_with_the_same_links_by_episode_id(tmp_path):
    with Memory(str(tmp_path / "a.db"), embedder=HashEmbedder(32)) as source:
        source.add(chat(WORDS), user_id="u", at=AT)
        source.export(str(tmp_path / "u.jsonl"), user_id="u")
        with source.store.snapshot() as conn:
            links = sorted(tuple(row) for row in conn.execute("SELECT row_id, episode_id FROM turn_context"))
        found = keyword_hits(source, WORDS[1], user_id="u")
    with Memory(str(tmp_path / "b.db"), embedder=HashEmbedder(32)) as target:
        target.import_(str(tmp_path / "u.jsonl"))
        with target.store.snapshot() as conn:
            assert (
                sorted(tuple(row) for row in conn.execute("SELECT row_id, episode_id FROM turn_context"))
                == links
            )
        assert len(links) == 6 * 3 - 4
        assert keyword_hits(target, WORDS[1], user_id="u") == found
