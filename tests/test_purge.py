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
from .leakscan import file_bytes, leaks, markers, unseen
from .scripted import fused_lm

pytestmark = [pytest.mark.backends, pytest.mark.encrypted]

SECRET_USER = "ada-secret-user"
SECRET_WORDS = ("zanzibarquartz", "aubergineprotocol", "velvetlighthouse")
# Words only feedback holds: a verdict's note on the first memory, and on the third.
FEEDBACK_WORDS = ("marmaladecompass", "tangerinelattice")


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
    memory.feedback(ada[0].id, "wrong", note=f"it said {FEEDBACK_WORDS[0]}", user_id=SECRET_USER)
    memory.feedback(ada[2].id, "useful", note=f"{FEEDBACK_WORDS[1]} helps", user_id=SECRET_USER)
    memory.search(SECRET_WORDS[2], user_id=SECRET_USER)
    # Settings kept for the user name it: they go with the scope.
    memory.lifecycle_settings(user_id=SECRET_USER, min_age_days=9)
    memory.retention(user_id=SECRET_USER, run_id="session-1", erase_after="90d")
    memory.add("Bob keeps his own notes about gardening.", user_id="bob")
    vectors = [embedder.embed([record.content])[0].tobytes() for record in ada]
    return ada, vectors


def test_delete_scope_leaves_nothing_of_the_user(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        ada, vectors = fill(memory)
        assert unseen(db_path, (*SECRET_WORDS, *FEEDBACK_WORDS, SECRET_USER), vectors) == [], (
            "the scan must see it first"
        )
        # ... in the feedback table too: the notes, and the corrected text a correction record keeps.
        found = leaks(db_path, (*FEEDBACK_WORDS, SECRET_WORDS[0]))
        assert {f"feedback: {word}" for word in (*FEEDBACK_WORDS, SECRET_WORDS[0])} <= set(found), found
        result = memory.delete_scope(user_id=SECRET_USER)
        assert result.counts["memories"] == 4 and result.counts["episodes"] == 3
        assert result.counts["feedback"] == 3  # the correction and two verdicts
        assert memory.feedback_records(user_id=SECRET_USER) == []
        assert result.counts["memory_events"] >= 4 and result.counts["vectors"] == 4
        assert memory.get_all(user_id=SECRET_USER) == []
        assert memory.search(SECRET_WORDS[0], user_id=SECRET_USER) == []
        assert memory.get(ada[0].id, all_scopes=True) is None
        assert memory.history(ada[0].id, all_scopes=True) == []
        # The other user is untouched.
        assert memory.search("gardening", user_id="bob")[0].content.startswith("Bob keeps")
        assert leaks(db_path, (*SECRET_WORDS, *FEEDBACK_WORDS, SECRET_USER), vectors) == []
        # Nothing is left in in-process caches either.
        cached = set(memory.embedder._cache)
        assert not any(text_hash(record.content) in cached for record in ada)
        assert not getattr(memory.store.keywords, "_frequencies_cache", None)
    if db_path.startswith("postgresql://"):
        return  # the server's files: docs/scaling.md, "Erasure"
    raw = b"".join(file_bytes(db_path).values())  # an encrypted file's pages decrypted
    for needle in (*SECRET_WORDS, *FEEDBACK_WORDS, SECRET_USER):
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
        assert unseen(db_path, (SECRET_WORDS[0], FEEDBACK_WORDS[0]), vectors[:1]) == [], (
            "the scan must see it first"
        )
        assert f"feedback: {FEEDBACK_WORDS[0]}" in leaks(db_path, FEEDBACK_WORDS[:1])  # in its table
        result = memory.delete(ada[0].id, user_id=SECRET_USER)
        assert result.counts["feedback"] == 2  # its correction and its verdict
        remaining = {m.id for m in memory.get_all(user_id=SECRET_USER)}
        assert remaining == {ada[1].id, ada[2].id}
        # Its words (all versions, the update reason, the metadata, its feedback) are gone; the
        # others stay.
        assert leaks(db_path, (SECRET_WORDS[0], FEEDBACK_WORDS[0]), vectors[:1]) == []
        assert leaks(db_path, (SECRET_WORDS[2], FEEDBACK_WORDS[1]), ())
        assert [f.memory_id for f in memory.feedback_records(user_id=SECRET_USER)] == [ada[2].id]
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


def test_a_request_to_forget_leaves_a_label_without_anything_it_quoted(db_path):
    secret, relation = markers(2, seed=28)

    def write(turns, existing):
        if "forget" not in turns[-1]["text"]:
            fact = f"Ada's passport number is {secret}."
            return [{"action": "ADD", "content": fact, "subject": "Ada", "predicate": "passport_number"}]
        alias = existing[0]["alias"]
        return [
            # Refused (another relation): its reason names the relation the LM read in the request.
            {
                "action": "UPDATE",
                "target": alias,
                "content": "Ada has one.",
                "subject": "Ada",
                "predicate": relation,
            },
            {"action": "DELETE", "target": alias},
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(write)) as memory:
        memory.add(f"Ada: my passport number is {secret}", user_id=SECRET_USER)
        assert unseen(db_path, (secret,)) == [], "the scan must see the number before it is forgotten"
        result = memory.add(f"Ada: please forget my passport number and my {relation}", user_id=SECRET_USER)
        assert [op.action for op in result.ops] == ["DELETE"] and relation in result.rejected[0].reason
        records = {record.source: record for record in memory.feedback_records(user_id=SECRET_USER)}
        assert sorted(records) == ["forget", "refused"]
        forget, refused = records["forget"], records["refused"]
        assert (forget.memory_id, forget.note, forget.expected, forget.op_index) == (
            None,
            None,
            {"action": "DELETE"},
            1,
        )
        # The refusal is kept as a label, naming neither the erased memory nor what it read.
        assert (refused.memory_id, refused.note, refused.op_index) == (None, None, 0)
        assert refused.write_run_id == forget.write_run_id
        run = memory.store.runs.get(forget.write_run_id, scope=None)
        assert [(op.action, op.applied, op.refused) for op in run.ops] == [
            ("UPDATE", None, "mismatch"),
            ("DELETE", "DELETE", None),
        ]
        assert leaks(db_path, (secret, relation)) == []
