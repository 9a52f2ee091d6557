"""Erased means gone, at scale: 500 memories of one user interleaved with 500 of another, in raw
mode and with a (scripted) LM, then `delete_scope` or `delete(id)`. Every table (shadow tables of
the vector and keyword indexes included) and the raw bytes of the file and its WAL are scanned
for the erased words, the user id and the float32 vectors; the other user's data must be intact.

The LM-mode file also holds each way a write can quote a memory elsewhere: the INVALIDATE event
of the memory a new fact replaced, a correction's event metadata, one message that gave two
facts, a raw turn retired by `reprocess()`, and a request to forget."""

from __future__ import annotations

import shutil

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import MemoryNotFoundError
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Scope

from .leakscan import leaks, markers
from .scripted import alias_of, fused_lm

N = 500
BATCH = 50
WORDS = markers(2 * N + 20, seed=20261123)
A_WORDS, B_WORDS = WORDS[:N], WORDS[N : 2 * N]
USER_A, USER_B = "user-" + WORDS[2 * N], "user-" + WORDS[2 * N + 1]
# The words of the special cases in the LM file, one per fact.
HOME_1, HOME_2, JOB_WRONG, JOB_RIGHT, PAIR_1, PAIR_2, LOCKER, FORGOTTEN = WORDS[2 * N + 2 : 2 * N + 10]


def embedder():
    return HashEmbedder(64)


def vectors(texts):
    return [vector.tobytes() for vector in embedder().embed(texts)]


def copy_of(built, tmp_path):
    """A fresh copy of a file built once for the module (built files are closed: no WAL)."""
    path = str(tmp_path / "copy.db")
    shutil.copyfile(built, path)
    return path


def assert_b_intact(memory, path):
    records = memory.get_all(user_id=USER_B, limit=2 * N)
    assert len(records) == N
    for word in (B_WORDS[0], B_WORDS[N // 2], B_WORDS[-1]):
        [hit] = memory.search(word, user_id=USER_B, k=1, recipe="keyword")
        assert word in hit.content
        dense = memory.search(f"Bob note {word}", user_id=USER_B, k=3, recipe="dense")
        assert any(word in hit.content for hit in dense)
    # The scan does see what is still there.
    assert leaks(path, B_WORDS[:3]) != []
    report = memory.check()  # SQLite's integrity check; rows, vectors and keyword entries agree
    assert report.integrity == "ok" and not report.index_mismatch, report
    with memory.store.snapshot() as conn:
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")


# -- raw mode --------------------------------------------------------------------------------


def a_note(word):
    return f"Ada note {word}: the {word} code opens the shed."


@pytest.fixture(scope="module")
def raw_file(tmp_path_factory):
    """500 raw turns of user A (every fifth updated, with a reason quoting it) interleaved with
    500 of user B."""
    path = str(tmp_path_factory.mktemp("raw") / "memory.db")
    ids = []
    with Memory(path, embedder=embedder()) as memory:
        for start in range(0, N, BATCH):
            words = A_WORDS[start : start + BATCH]
            added = memory.add([a_note(w) for w in words], user_id=USER_A, metadata={"tag": words[0]})
            ids += [record.id for record in added.memories]
            memory.add(
                [f"Bob note {w}: gardening in {w}." for w in B_WORDS[start : start + BATCH]], user_id=USER_B
            )
        for index in range(0, N, 5):
            word = A_WORDS[index]
            memory.update(ids[index], f"Ada note {word}, revised.", reason=f"because {word}", user_id=USER_A)
        memory.search(A_WORDS[7], user_id=USER_A)  # access statistics: rows rewritten in place
    return path, ids


def test_delete_scope_raw_leaves_nothing_of_the_user(raw_file, tmp_path):
    built, _ = raw_file
    path = copy_of(built, tmp_path)
    secrets = [*A_WORDS, USER_A]
    a_vectors = vectors([a_note(w) for w in A_WORDS])
    assert leaks(path, secrets[:3], a_vectors[:1]), "the scan must see the data before the purge"
    with Memory(path, embedder=embedder()) as memory:
        result = memory.delete_scope(user_id=USER_A)
        assert result.counts["memories"] == N + N // 5 and result.counts["episodes"] == N
        assert leaks(path, secrets, a_vectors) == []
        assert_b_intact(memory, path)
    assert leaks(path, secrets, a_vectors) == []


def test_delete_by_id_raw_leaves_nothing_of_those_memories(raw_file, tmp_path):
    built, ids = raw_file
    path = copy_of(built, tmp_path)
    # 60 of 500, updated ones among them; not the first of a batch, whose word tags the batch.
    chosen = [index for index in range(0, N, 8) if index % BATCH]
    erased = [A_WORDS[i] for i in chosen]
    erased_vectors = vectors([a_note(A_WORDS[i]) for i in chosen])
    with Memory(path, embedder=embedder()) as memory:
        for index in chosen:
            memory.delete(ids[index], user_id=USER_A)
        assert leaks(path, erased, erased_vectors) == []
        kept = [word for index, word in enumerate(A_WORDS) if index not in chosen]
        assert len(leaks(path, kept[:20])) > 0
        assert len(memory.get_all(user_id=USER_A, limit=N)) == N - len(erased)
        assert [e.event for e in memory.history(ids[40], user_id=USER_A)] == ["ADD", "UPDATE", "DELETE"]
        assert_b_intact(memory, path)


# -- LM mode ---------------------------------------------------------------------------------


def decide(turns, existing):
    """A scripted write LM. Each turn says "<kind> <words>"; the speaker's name is the subject."""
    ops = []
    for turn in turns:
        name, (kind, *words) = turn["speaker"], turn["text"].split()
        fact = {"subject": name, "reason": f"{name} said {' '.join(words)}"}
        if kind == "note":
            ops.append({"action": "ADD", "content": f"{name} keeps a note on {words[0]}.", **fact})
        elif kind == "home":
            op = {"content": f"{name} lives in {words[0]}.", "predicate": "lives_in", **fact}
            target = alias_of(existing, "lives in")
            if target:  # an LM's reason often quotes the fact it replaces
                old = next(m["content"] for m in existing if m["alias"] == target)
                op.update(action="INVALIDATE", target=target, reason=f"moved: no longer '{old}'")
            ops.append({"action": "ADD", **op} if not target else op)
        elif kind == "job":
            op = {"content": f"{name} works at {words[0]}.", "predicate": "works_at", **fact}
            target = alias_of(existing, "works at")
            if target:
                op.update(action="INVALIDATE", target=target, correction=True)
            ops.append({"action": "ADD", **op} if not target else op)
        elif kind == "pair":
            ops.append({"action": "ADD", "content": f"{name} plays {words[0]}.", **fact})
            ops.append({"action": "ADD", "content": f"{name} reads {words[1]}.", **fact})
        elif kind == "locker":
            ops.append({"action": "ADD", "content": f"{name}'s locker code is {words[0]}.", **fact})
        elif kind == "please" and words[0] == "forget":
            ops.append({"action": "DELETE", "target": alias_of(existing, words[-1]), "reason": turn["text"]})
    return ops


def said(name, texts):
    return [{"role": "user", "name": name, "content": text} for text in texts]


def lm_memory(path, lm=None):
    return Memory(path, embedder=embedder(), lm=lm or fused_lm(decide), write={"max_batch": BATCH})


@pytest.fixture(scope="module")
def lm_file(tmp_path_factory):
    """500 LM-made facts of user A interleaved with 500 of user B, then A's special cases."""
    path = str(tmp_path_factory.mktemp("lm") / "memory.db")
    with lm_memory(path) as memory:
        for start in range(0, N, BATCH):
            result = memory.add(
                said("Ada", [f"note {w}" for w in A_WORDS[start : start + BATCH]]), user_id=USER_A
            )
            assert result.error is None and len(result.ops) == BATCH, result.rejected
            result = memory.add(
                said("Bob", [f"note {w}" for w in B_WORDS[start : start + BATCH]]), user_id=USER_B
            )
            assert result.error is None and len(result.ops) == BATCH
        for text in (f"home {HOME_1}", f"home {HOME_2}", f"job {JOB_WRONG}", f"job {JOB_RIGHT}"):
            memory.add(said("Ada", [text]), user_id=USER_A)
        memory.add(said("Ada", [f"pair {PAIR_1} {PAIR_2}"]), user_id=USER_A)
        memory.add(said("Ada", [f"note {FORGOTTEN}"]), user_id=USER_A)
        forget = memory.add(said("Ada", [f"please forget {FORGOTTEN}"]), user_id=USER_A)
        assert [op.action for op in forget.ops] == ["DELETE"] and forget.episodes == []
    with lm_memory(path, scripted_lm(lambda call: "nope")) as memory:
        failed = memory.add(said("Ada", [f"locker {LOCKER}"]), user_id=USER_A)
        assert failed.error is not None
        [turn] = failed.memories
    with lm_memory(path) as memory:
        before_reprocess = memory.get(turn.id, user_id=USER_A).created_at
        memory.flush()
        [result] = memory.reprocess()
        assert [op.action for op in result.ops] == ["ADD"]
        assert memory.get(turn.id, user_id=USER_A).status == "expired"
    return path, {"turn": turn.id, "before_reprocess": before_reprocess}


def fact(memory, word):
    """User A's memory whose content holds `word` (current, superseded or expired)."""
    with memory.store.snapshot() as conn:
        [(memory_id,)] = conn.execute(
            "SELECT DISTINCT id FROM memories WHERE content LIKE ? AND kind != 'turn'", (f"%{word}%",)
        ).fetchall()
    return memory.get(memory_id, user_id=USER_A)


def test_delete_scope_lm_leaves_nothing_of_the_user(lm_file, tmp_path):
    built, _ = lm_file
    path = copy_of(built, tmp_path)
    secrets = [*A_WORDS, *WORDS[2 * N + 2 : 2 * N + 10], USER_A]
    a_vectors = vectors([f"Ada keeps a note on {w}." for w in A_WORDS])
    assert leaks(path, secrets[:3], a_vectors[:1])
    with lm_memory(path) as memory:
        memory.delete_scope(user_id=USER_A)
        assert memory.get_all(user_id=USER_A) == []
        assert leaks(path, secrets, a_vectors) == []
        assert_b_intact(memory, path)


def test_delete_by_id_lm_leaves_nothing_of_those_facts(lm_file, tmp_path):
    built, _ = lm_file
    path = copy_of(built, tmp_path)
    chosen = A_WORDS[1::8]
    with lm_memory(path) as memory:
        for word in chosen:
            memory.delete(fact(memory, word).id, user_id=USER_A)
        erased_vectors = vectors([f"Ada keeps a note on {w}." for w in chosen])
        assert leaks(path, chosen, erased_vectors) == []
        assert len(leaks(path, A_WORDS[2:4])) > 0
        assert_b_intact(memory, path)


def test_deleting_a_fact_scrubs_the_invalidate_event_of_the_fact_it_replaced(lm_file, tmp_path):
    path = copy_of(lm_file[0], tmp_path)
    with lm_memory(path) as memory:
        old, new = fact(memory, HOME_1), fact(memory, HOME_2)
        assert old.superseded_by == new.id
        assert HOME_2 in memory.history(old.id, user_id=USER_A)[-1].new_content
        memory.delete(new.id, user_id=USER_A)
        assert leaks(path, [HOME_2]) == []
        # The old fact keeps its own words and its history, without the erased one's.
        assert HOME_1 in memory.get(old.id, user_id=USER_A).content
        last = memory.history(old.id, user_id=USER_A)[-1]
        assert (last.event, last.new_content, last.reason) == ("INVALIDATE", None, None)
        assert leaks(path, [HOME_1])


def test_deleting_a_replaced_fact_scrubs_reasons_that_quote_it(lm_file, tmp_path):
    path = copy_of(lm_file[0], tmp_path)
    with lm_memory(path) as memory:
        old, new = fact(memory, HOME_1), fact(memory, HOME_2)
        assert HOME_1 in memory.history(new.id, user_id=USER_A)[0].reason
        memory.delete(old.id, user_id=USER_A)
        assert leaks(path, [HOME_1]) == []
        assert memory.get(new.id, user_id=USER_A).status == "current"


def test_deleting_a_correction_scrubs_the_metadata_of_the_corrected_fact(lm_file, tmp_path):
    path = copy_of(lm_file[0], tmp_path)
    with lm_memory(path) as memory:
        wrong, right = fact(memory, JOB_WRONG), fact(memory, JOB_RIGHT)
        assert memory.history(wrong.id, user_id=USER_A)[-1].metadata["new_content"] == right.content
        memory.delete(right.id, user_id=USER_A)
        assert leaks(path, [JOB_RIGHT]) == []
        last = memory.history(wrong.id, user_id=USER_A)[-1]
        assert last.metadata == {"correction": True, "superseded_by": right.id}
        assert JOB_WRONG in memory.get(wrong.id, user_id=USER_A).content


def test_deleting_one_of_two_facts_from_one_message_deletes_the_message(lm_file, tmp_path):
    path = copy_of(lm_file[0], tmp_path)
    with lm_memory(path) as memory:
        one, other = fact(memory, PAIR_1), fact(memory, PAIR_2)
        memory.delete(one.id, user_id=USER_A)
        assert leaks(path, [PAIR_1]) == []
        # The other fact stays, searchable, without the provenance link to the erased message.
        [hit] = memory.search(PAIR_2, user_id=USER_A, k=1, recipe="keyword")
        assert hit.memory.id == other.id and hit.provenance == []


def test_deleting_an_extracted_fact_erases_the_raw_turn_it_retired(lm_file, tmp_path):
    built, made = lm_file
    path = copy_of(built, tmp_path)
    with lm_memory(path) as memory:
        extracted = fact(memory, LOCKER)
        before = made["before_reprocess"]
        believed = memory.search(LOCKER, user_id=USER_A, known_at=before, recipe="keyword")
        assert [hit.memory.id for hit in believed] == [made["turn"]]
        memory.delete(extracted.id, user_id=USER_A)
        assert memory.search(LOCKER, user_id=USER_A, known_at=before, recipe="keyword") == []
        dense = memory.search(f"locker {LOCKER}", user_id=USER_A, known_at=before, recipe="dense", k=50)
        assert made["turn"] not in {hit.memory.id for hit in dense}
        assert memory.get(made["turn"], user_id=USER_A) is None
        assert leaks(path, [LOCKER]) == []


def test_a_request_to_forget_leaves_nothing_in_a_large_file(lm_file, tmp_path):
    """The write path erased the forgotten fact and the "please forget X" message that quotes it
    (`Eraser.episodes`) while building the file: nothing of X is left among 1,000 memories."""
    built, _ = lm_file
    path = copy_of(built, tmp_path)
    with lm_memory(path) as memory:
        assert leaks(path, [FORGOTTEN]) == []
        assert memory.search(FORGOTTEN, user_id=USER_A, recipe="keyword") == []
        assert_b_intact(memory, path)
        assert memory.check().ok


def test_erasing_episodes_erases_their_turns_inside_the_callers_transaction(db_path):
    with Memory(db_path, embedder=embedder()) as memory:
        [kept, gone] = memory.add([f"note {A_WORDS[0]}", f"note {A_WORDS[1]}"], user_id=USER_A).memories
        with memory.store.snapshot() as conn:
            [episode_id] = [
                row[0]
                for row in conn.execute(
                    "SELECT episode_id FROM memory_sources WHERE memory_id = ?", (gone.id,)
                )
            ]
        with pytest.raises(RuntimeError), memory.store.transaction():
            memory.store.erase.episodes([episode_id], scope=Scope.of(USER_A), actor="user")
            raise RuntimeError("the caller fails: nothing is erased")
        assert memory.get(gone.id, user_id=USER_A) is not None
        with pytest.raises(MemoryNotFoundError):  # scopes are walls
            memory.store.erase.episodes([episode_id], scope=Scope.of(USER_B), actor="user")
        with memory.store.transaction():
            result = memory.store.erase.episodes([episode_id], scope=Scope.of(USER_A), actor="user")
        assert leaks(db_path, [A_WORDS[1]]) != [], "the WAL holds it until the caller's compact()"
        memory.store.erase.compact()
        assert result.counts["episodes"] == 1 and result.counts["memories"] == 1
        assert memory.get(gone.id, user_id=USER_A) is None
        assert memory.get(kept.id, user_id=USER_A) is not None
        assert [e.event for e in memory.history(gone.id, user_id=USER_A)] == ["ADD", "DELETE"]
        assert leaks(db_path, [A_WORDS[1]]) == []


def test_a_request_to_forget_is_itself_forgotten(db_path):
    with lm_memory(db_path) as memory:
        memory.add(said("Ada", [f"note {FORGOTTEN}"]), user_id=USER_A)
        result = memory.add(said("Ada", [f"please forget {FORGOTTEN}"]), user_id=USER_A)
        assert [op.action for op in result.ops] == ["DELETE"]
        assert leaks(db_path, [FORGOTTEN]) == []
