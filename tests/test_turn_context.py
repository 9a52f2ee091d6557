"""Raw turns are keyword-indexed with their conversation: a reply is found by its question's words,
while a hit still names the one turn. The context stays inside the turn's exact scope and its
stretch of conversation, and erasing a turn takes its words out of its neighbours' contexts."""

from __future__ import annotations

import sqlean

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store import Store
from dspy_memory.store.sqlite.keywords import indexed_entries
from dspy_memory.store.sqlite.migrations import MIGRATIONS, migrate

from .leakscan import leaks, markers

WORDS = markers(12, seed=20261125)


def keyword_hits(memory, query, **scope):
    return [hit.content for hit in memory.search(query, recipe="keyword", k=10, **scope)]


def conversation(words):
    """A question, its answer, and small talk around them; each turn carries one marker."""
    return [
        {"role": "user", "name": "Ada", "content": f"Morning! {words[0]} weather today."},
        {"role": "user", "name": "Ada", "content": f"Where did you hike with {words[1]} last week?"},
        {"role": "user", "name": "Bob", "content": f"Up the ridge trail, {words[2]} views."},
        {"role": "user", "name": "Ada", "content": f"Lovely, {words[3]}."},
        {"role": "user", "name": "Bob", "content": f"Then coffee, {words[4]}."},
        {"role": "user", "name": "Ada", "content": f"Bye, {words[5]}."},
    ]


def test_a_reply_is_found_by_its_questions_words_and_the_hit_is_the_reply(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        memory.add(conversation(WORDS), user_id="u", at="2026-05-01T10:00:00Z")
        hits = keyword_hits(memory, WORDS[1], user_id="u")
        # The question itself first (its own text), then the turn before it (whose window
        # reaches one turn ahead) and the two after it (whose windows reach two turns back).
        assert hits[0] == f"Ada: Where did you hike with {WORDS[1]} last week?"
        assert f"Bob: Up the ridge trail, {WORDS[2]} views." in hits
        assert set(hits) == {
            f"Ada: Morning! {WORDS[0]} weather today.",
            f"Ada: Where did you hike with {WORDS[1]} last week?",
            f"Bob: Up the ridge trail, {WORDS[2]} views.",
            f"Ada: Lovely, {WORDS[3]}.",
        }
        # Three places after is out of every window.
        assert not any(WORDS[5] in hit for hit in keyword_hits(memory, WORDS[2], user_id="u"))


def test_a_later_add_extends_the_context_of_the_turns_before_it(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        turns = conversation(WORDS)
        memory.add(turns[:2], user_id="u", at="2026-05-01T10:00:00Z")
        memory.add(turns[2:], user_id="u", at="2026-05-01T10:01:00Z")
        # The question, stored before its answer arrived, is found by the answer's words.
        assert f"Ada: Where did you hike with {WORDS[1]} last week?" in keyword_hits(
            memory, WORDS[2], user_id="u"
        )


def test_context_stops_at_scope_walls_and_at_a_pause(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        at = "2026-05-01T10:00:00Z"
        memory.add(f"Ada's turn {WORDS[0]}", user_id="ada", at=at)
        memory.add(f"Bob's turn {WORDS[1]}", user_id="bob", at=at)
        memory.add(f"Ada in a run {WORDS[2]}", user_id="ada", run_id="r1", at=at)
        memory.add(f"Ada again {WORDS[3]}", user_id="ada", at=at)
        memory.add(f"Ada after lunch {WORDS[4]}", user_id="ada", at="2026-05-01T13:00:00Z")
        assert keyword_hits(memory, WORDS[1], user_id="ada") == []
        # A user's reads include the user's runs; the run's turn is found by its own words only.
        assert keyword_hits(memory, WORDS[2], user_id="ada") == [f"Ada in a run {WORDS[2]}"]
        assert keyword_hits(memory, WORDS[0], user_id="ada", run_id="r1") == []
        # Neighbours in time within the same scope do share context; a three-hour pause does not.
        assert keyword_hits(memory, WORDS[3], user_id="ada") == [
            f"Ada again {WORDS[3]}",  # its own text ranks above a context match
            f"Ada's turn {WORDS[0]}",
        ]
        assert keyword_hits(memory, WORDS[4], user_id="ada") == [f"Ada after lunch {WORDS[4]}"]


def test_erasing_a_turn_takes_its_words_out_of_its_neighbours_contexts(tmp_path):
    path = str(tmp_path / "m.db")
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        added = memory.add(conversation(WORDS), user_id="u", at="2026-05-01T10:00:00Z")
        answer = next(record for record in added.memories if WORDS[2] in record.content)
        # Its own row, the question before it, and the two turns after it (two turns before
        # and one after is the default window).
        assert len(keyword_hits(memory, WORDS[2], user_id="u")) == 4
        result = memory.delete(answer.id, user_id="u")
        assert result.counts["contexts_rebuilt"] == 3
        assert keyword_hits(memory, WORDS[2], user_id="u") == []
        # The window closes over the gap: the question now reaches two turns further.
        assert any(WORDS[4] in hit for hit in keyword_hits(memory, WORDS[1], user_id="u"))
    assert leaks(path, [WORDS[2]]) == []
    assert leaks(path, [WORDS[1]]) != []  # the scan sees what is still there


def test_an_erased_episode_that_made_no_turn_leaves_the_contexts_too(tmp_path):
    """A logged message (no memory of its own) is its neighbours' context; erased as a forget
    request erases its episode, its words leave those contexts and the file."""
    path = str(tmp_path / "m.db")
    with Memory(path, embedder=HashEmbedder(32)) as memory:
        memory.add(f"first {WORDS[0]}", user_id="u", at="2026-05-01T10:00:00Z")
        [logged] = memory.log(f"{WORDS[1]} in a logged message", user_id="u", at="2026-05-01T10:00:01Z")
        memory.add(f"third {WORDS[2]}", user_id="u", at="2026-05-01T10:00:02Z")
        assert sorted(keyword_hits(memory, WORDS[1], user_id="u")) == [
            f"first {WORDS[0]}",
            f"third {WORDS[2]}",
        ]
        result = memory.store.erase.episodes([logged.id], scope=logged.scope, actor="user")
        assert result.counts["contexts_rebuilt"] == 2
        assert keyword_hits(memory, WORDS[1], user_id="u") == []
        assert keyword_hits(memory, WORDS[2], user_id="u") == [f"third {WORDS[2]}", f"first {WORDS[0]}"]
    assert leaks(path, [WORDS[1]]) == []


def test_a_file_from_before_turn_context_gets_it_when_opened(tmp_path):
    """A schema-4 file (keyword index without a context column) is upgraded in place: the index
    is rebuilt with the column and every current raw turn gets its context."""
    path = str(tmp_path / "old.db")
    conn = sqlean.connect(path, isolation_level=None)
    conn.row_factory = sqlean.Row
    migrate(conn, MIGRATIONS[:4])
    at = "2026-05-01T10:00:00.000000Z"
    for index, text in enumerate(
        [f"question {WORDS[0]}", f"answer {WORDS[1]}", f"aside {WORDS[2]}"], start=1
    ):
        conn.execute(
            "INSERT INTO episodes (id, user_id, source, content, occurred_at, ingested_at, status) "
            "VALUES (?, 'u', 'message', ?, ?, ?, 'done')",
            (f"e{index}", text, at, at),
        )
        conn.execute(
            "INSERT INTO memories (row_id, id, version, user_id, content, kind, confidence, importance, "
            "strength, access_count, content_hash, metadata, valid_at, created_at) "
            "VALUES (?, ?, 1, 'u', ?, 'turn', 1, 0.5, 1, 0, ?, '{}', ?, ?)",
            (index, f"m{index}", text, f"h{index}", at, at),
        )
        conn.execute(
            "INSERT INTO memory_sources (memory_id, episode_id, created_at) VALUES (?, ?, ?)",
            (f"m{index}", f"e{index}", at),
        )
        conn.execute("INSERT INTO memories_fts (rowid, content, scope) VALUES (?, ?, '')", (index, text))
    conn.close()
    store = Store(path, turn_context_before=1, turn_context_after=1)
    with store.snapshot() as conn:
        contexts = {entry[0]: entry[2] for entry in indexed_entries(conn, [1, 2, 3])}
        links = conn.execute("SELECT row_id, episode_id FROM turn_context ORDER BY 1, 2").fetchall()
        # The index holds what those links name (it stores no text: asked by a term).
        quoting = [
            [
                row[0]
                for row in conn.execute(
                    "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (f'context : "{word}"',)
                )
            ]
            for word in WORDS[:3]
        ]
    store.close()
    assert contexts == {
        1: f"answer {WORDS[1]}",
        2: f"question {WORDS[0]}\naside {WORDS[2]}",
        3: f"answer {WORDS[1]}",
    }
    assert [tuple(link) for link in links] == [(1, "e2"), (2, "e1"), (2, "e3"), (3, "e2")]
    assert quoting == [[2], [1, 3], [2]]


def contexts(memory):
    """{content: the context the keyword index was given}: the index stores no text, so from the
    links it was written with (store/sqlite/keywords.py)."""
    with memory.store.snapshot() as conn:
        entries = indexed_entries(conn, [row[0] for row in conn.execute("SELECT row_id FROM memories")])
    return {entry[1]: entry[2] for entry in entries}


def test_history_added_out_of_order_gets_the_same_contexts(tmp_path, monkeypatch):
    """Sessions added newest first, one message at a time, or in one batch read in pieces:
    every turn ends with the context of its own stretch of conversation."""
    sessions = [
        ("2026-05-01T10:00:00Z", [f"early {WORDS[i]}" for i in range(0, 4)]),
        ("2026-05-03T10:00:00Z", [f"late {WORDS[i]}" for i in range(4, 8)]),
    ]
    with Memory(str(tmp_path / "in_order.db"), embedder=HashEmbedder(32)) as memory:
        for at, texts in sessions:
            memory.add(texts, user_id="u", at=at)
        expected = contexts(memory)
    assert expected[f"early {WORDS[1]}"] == f"early {WORDS[0]}\nearly {WORDS[2]}"
    assert expected[f"late {WORDS[4]}"] == f"late {WORDS[5]}"  # the other session is days away
    with Memory(str(tmp_path / "reversed.db"), embedder=HashEmbedder(32)) as memory:
        for at, texts in reversed(sessions):
            memory.add(texts, user_id="u", at=at)
        assert contexts(memory) == expected
    monkeypatch.setattr("dspy_memory.store.turns._SPAN_LIMIT", 1)  # every window read on its own
    with Memory(str(tmp_path / "one_by_one.db"), embedder=HashEmbedder(32)) as memory:
        for at, texts in sessions:
            for text in texts:
                memory.add(text, user_id="u", at=at)
        assert contexts(memory) == expected
