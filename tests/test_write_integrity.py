"""The LM write path never loses input: batches respect their limits, refused operations and
truncated or late answers leave the input searchable, and an answer cannot retire an unrelated
fact. Each test reproduces a finding of the integrity review (issue 9)."""

from __future__ import annotations

import logging
import time

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from dspy_memory.util.tokens import count_tokens
from tests.pg import Raw

from .scripted import alias_of, fused_lm

pytestmark = pytest.mark.backends


def code(i: int) -> str:
    """A word that occurs in exactly one input (checkable by keyword search)."""
    return f"locker{i:03d}x{(i * 7919) % 1000:03d}"


def one_fact_per_turn(turns, existing):
    """A fake LM that extracts one fact from every turn it is shown, whatever the batch size."""
    return [
        {"action": "ADD", "content": f"{t['speaker']} said: {t['text']}", "subject": t["speaker"]}
        for t in turns
    ]


def down(call):
    raise ConnectionError("connection refused")


def findable(memory, text, user_id="ada"):
    return [h for h in memory.search(text, user_id=user_id, recipe="keyword", k=3) if text in h.content]


def test_reprocess_after_an_outage_keeps_every_input(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(down)) as memory:
        for i in range(120):
            assert memory.add(f"My locker code is {code(i)}.", user_id="ada").error
    lm = fused_lm(one_fact_per_turn)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm) as memory:
        memory.flush()
        results = memory.reprocess()
        assert all(result.error is None for result in results)
        sent = [len(call.inputs["turns"]) for call in lm.engine.calls]
        assert sum(sent) == 120 and max(sent) <= memory.config.write.max_batch
        found = [findable(memory, code(i)) for i in range(120)]
        assert sum(1 for hits in found if hits) == 120
        assert all(hits[0].memory.kind == "fact" for hits in found)
        assert memory.store.episodes.unfinished(ingested_before="9999").episodes == []


def test_a_long_add_is_split_into_batches_and_nothing_is_refused(db_path):
    lm = fused_lm(one_fact_per_turn)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm) as memory:
        result = memory.add([f"My locker code is {code(i)}." for i in range(60)], user_id="ada")
        assert result.error is None and result.rejected == []
        assert len(lm.engine.calls) == 3 and result.usage.lm_calls == 3
        assert [op.action for op in result.ops] == ["ADD"] * 60
        assert all(findable(memory, code(i)) for i in range(60))


def test_batches_are_split_to_fit_the_prompt_token_budget(db_path):
    lm = fused_lm(one_fact_per_turn)
    budget = 3000
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"max_prompt_tokens": budget}) as memory:
        long = " ".join(f"word{j}" for j in range(60))
        result = memory.add([f"{code(i)} {long}" for i in range(20)], user_id="ada")
        assert result.error is None
        prompts = [count_tokens(call.prompt) for call in lm.engine.calls]
        assert len(prompts) > 1 and max(prompts) <= budget, prompts
        assert all(findable(memory, code(i)) for i in range(20))


REFUSED = {
    "unknown alias": lambda turns, existing: [{"action": "UPDATE", "target": 7, "content": "Ada has a cat."}],
    "delete with nothing shown": lambda turns, existing: [{"action": "DELETE", "target": 1}],
    "ten megabytes": lambda turns, existing: [{"action": "ADD", "content": "cat " * 2_500_000}],
}


@pytest.mark.parametrize("answer", sorted(REFUSED))
def test_a_refused_operation_leaves_the_input_searchable(db_path, answer):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(REFUSED[answer])) as memory:
        result = memory.add("Ada: my cat is called Miso.", user_id="ada")
        assert result.rejected and result.ops == []
        [episode] = result.episodes
        assert episode.status == "done"
        [hit] = memory.search("Miso", user_id="ada")
        assert hit.memory.kind == "turn" and hit.provenance[0].episode_id == episode.id


def test_only_the_inputs_without_a_fact_are_kept_as_raw_turns(db_path):
    def decide(turns, existing):
        return [{"action": "ADD", "content": "Ada's cat is called Miso.", "subject": "Ada"}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide)) as memory:
        result = memory.add(
            ["Ada: my cat is called Miso.", "Ada: by the way, the zeppelin passed at noon."], user_id="ada"
        )
        kinds = sorted((m.kind, m.content) for m in memory.get_all(user_id="ada"))
        assert kinds == [
            ("fact", "Ada's cat is called Miso."),
            ("turn", "Ada: by the way, the zeppelin passed at noon."),
        ]
        assert [e.status for e in result.episodes] == ["done", "done"]


TRUNCATED = {
    "json cut after a field": '{"ops": [ {"action": "ADD", "content": "x"',
    "chat cut mid-field": '[[ ## ops ## ]]\n[{"action": "ADD", "content": "Ada lives in Lis',
    "chat cut mid-list": '[[ ## ops ## ]]\n[{"action": "ADD", "content": "Ada lives in Lisbon."}, {"act',
}


@pytest.mark.parametrize("answer", sorted(TRUNCATED))
def test_a_truncated_answer_fails_the_batch_and_stores_no_fragment(db_path, answer):
    lm = scripted_lm(lambda call: TRUNCATED[answer])
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm) as memory:
        result = memory.add("Ada: I moved to Lisbon in May.", user_id="ada")
        assert result.error and result.ops == []
        assert [e.status for e in result.episodes] == ["failed"]
        assert [(m.kind, m.content) for m in memory.get_all(user_id="ada")] == [
            ("turn", "Ada: I moved to Lisbon in May.")
        ]


def test_an_answer_cannot_retire_a_fact_of_another_relation(db_path):
    seed = [
        {
            "action": "ADD",
            "content": "Ada has a dog named Biscuit.",
            "subject": "Ada",
            "predicate": "owns",
            "object": "Biscuit",
            "valid_at": "2024-01-01",
        }
    ]

    def careless(turns, existing):
        if not existing:
            return seed
        return [
            {
                "action": "INVALIDATE",
                "target": alias_of(existing, "Biscuit"),
                "content": "Ada lives in Denver.",
                "subject": "Ada",
                "predicate": "lives_in",
                "valid_at": "2024-03-01",
            }
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(careless)) as memory:
        memory.add("Ada: my dog Biscuit is great.", user_id="ada", at="2024-01-01")
        result = memory.add(
            "Ada: I moved to Denver, my dog Biscuit loves it.", user_id="ada", at="2024-03-01"
        )
        assert "lives_in" in result.rejected[0].reason and "owns" in result.rejected[0].reason
        current = {m.content: m.status for m in memory.get_all(user_id="ada")}
        assert current == {"Ada has a dog named Biscuit.": "current", "Ada lives in Denver.": "current"}


def test_a_late_older_fact_is_history_not_a_second_truth(db_path):
    """An INVALIDATE whose new fact is older than its target (it arrived late) is kept as a fact
    that ended when the newer one began: one current value per slot."""

    def decide(turns, existing):
        city, day = turns[-1]["text"].split(" on ")
        fact = {
            "content": f"Ada lives in {city}.",
            "subject": "Ada",
            "predicate": "lives_in",
            "valid_at": day,
        }
        target = alias_of(existing, "lives in")
        return [{"action": "INVALIDATE", "target": target, **fact} if target else {"action": "ADD", **fact}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide)) as memory:
        memory.add("Denver on 2024-05-01", user_id="ada", at="2024-05-01")
        memory.add("Boston on 2024-01-01", user_id="ada", at="2024-01-01")
        timeline = memory.timeline(subject="Ada", predicate="lives_in", user_id="ada")
        assert [(m.content, m.status) for m in timeline] == [
            ("Ada lives in Boston.", "superseded"),
            ("Ada lives in Denver.", "current"),
        ]
        assert timeline[0].invalid_at == timeline[1].valid_at
        assert (
            memory.search("Ada lives", user_id="ada", as_of="2024-02-01")[0].content == "Ada lives in Boston."
        )


def test_a_hung_lm_fails_the_batch_within_the_timeout(db_path):
    def hung(call):
        time.sleep(5)
        return {"ops": []}

    with Memory(
        db_path, embedder=HashEmbedder(64), lm=scripted_lm(hung), write={"lm_timeout_s": 0.3}
    ) as memory:
        started = time.monotonic()
        result = memory.add("Ada: I moved to Denver.", user_id="ada")
        assert time.monotonic() - started < 3
        assert "0.3" in result.error and "answer" in result.error
        assert [e.status for e in result.episodes] == ["failed"]
        assert memory.search("Denver", user_id="ada")[0].memory.kind == "turn"


def test_reads_do_not_fail_while_another_process_holds_the_write_lock(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), busy_timeout_ms=300) as memory:
        memory.add("Ada likes tea.", user_id="ada")
        other = Raw(db_path)
        other.hold_write_lock()
        try:
            for _ in range(3):
                assert memory.search("tea", user_id="ada")[0].content == "Ada likes tea."
                [record] = memory.get_all(user_id="ada")  # writes pending recall counts first
                memory.get(record.id, user_id="ada")
        finally:
            other.rollback()
            other.close()
        memory.get_all(user_id="ada")
        # 3 searches and 3 gets while the file was busy, none lost, and this get.
        assert memory.get(record.id, user_id="ada").access_count == 7


def test_an_unreadable_episode_does_not_block_recovery_of_others(db_path, caplog):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(down)) as memory:
        memory.add("Bob: I play the oboe.", user_id="bob")
    with Raw(db_path) as conn:  # a row as the 0.1 writer left it for add(at="0999-06-01")
        conn.execute(
            "INSERT INTO episodes (id, user_id, source, content, metadata, occurred_at, ingested_at, status, "
            "infer) VALUES ('poison', 'mallory', 'text', 'x', '{}', '999-06-01T00:00:00.000000Z', "
            "'2024-01-01T00:00:00.000000Z', 'pending', 1)"
        )
    good = fused_lm(
        lambda turns, existing: [{"action": "ADD", "content": "Bob plays the oboe.", "subject": "Bob"}]
    )
    with caplog.at_level(logging.WARNING, logger="dspy_memory"):
        with Memory(db_path, embedder=HashEmbedder(64), lm=good) as memory:
            memory.flush()
            results = memory.reprocess()
            assert [op.content for result in results for op in result.ops] == ["Bob plays the oboe."]
            assert findable(memory, "oboe", user_id="bob")[0].memory.kind == "fact"
    assert "poison" in caplog.text and "cannot be read" in caplog.text


def test_an_answer_with_a_lone_surrogate_is_refused_not_a_crash(db_path):
    def broken(turns, existing):
        return [{"action": "ADD", "content": "Ada likes caf\ud800 au lait.", "subject": "Ada\udfff"}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(broken)) as memory:
        result = memory.add("Ada: I like café au lait.", user_id="ada")
        assert "not valid text" in result.rejected[0].reason and result.ops == []
        assert [(m.kind, m.content) for m in memory.get_all(user_id="ada")] == [
            ("turn", "Ada: I like café au lait.")
        ]
        assert memory.check().ok


@pytest.mark.sqlite_only(reason="a file written by 0.1")
def test_opening_a_file_of_0_1_repairs_its_three_digit_years(db_path):
    from dspy_memory.store.sqlite.connection import open_connection, resolve_driver
    from dspy_memory.store.sqlite.migrations import MIGRATIONS, migrate

    conn = open_connection(db_path, resolve_driver(), busy_timeout_ms=1000)
    migrate(conn, MIGRATIONS[:2])  # the schema 0.1 wrote, with the row its add(at="0999-06-01") left
    conn.execute(
        "INSERT INTO episodes (id, user_id, source, content, metadata, occurred_at, ingested_at, status) "
        "VALUES ('old', 'ada', 'text', 'Ada: an old note', '{}', '999-06-01T00:00:00.000000Z', "
        "'2024-01-01T00:00:00.000000Z', 'pending')"
    )
    conn.close()
    with Memory(db_path, embedder=HashEmbedder(64), pending_grace_seconds=0) as memory:
        assert memory.resume() == 1
        [episode] = memory.store.episodes.get_many(["old"])
        assert episode.occurred_at.year == 999 and episode.status == "done"
        [turn] = memory.get_all(user_id="ada")
        assert turn.valid_at.year == 999 and turn.content == "Ada: an old note"


def moves(turns, existing):
    """A careful LM that dates facts by day, as the instructions ask: a move invalidates the
    current home it is shown."""
    ops = []
    for turn in turns:
        city = turn["text"].split()[-1].rstrip(".")
        fact = {
            "content": f"Ada lives in {city}.",
            "subject": "Ada",
            "predicate": "lives_in",
            "valid_at": turn["time"][:10],
        }
        home = alias_of(existing, "lives in")
        ops.append({"action": "INVALIDATE", "target": home, **fact} if home else {"action": "ADD", **fact})
    return ops


def test_two_moves_on_one_day_leave_one_current_home(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        memory.add("Ada: I moved to Lisbon.", user_id="ada", at="2024-05-01T09:00:00")
        memory.add("Ada: I moved to Porto.", user_id="ada", at="2024-05-01T17:00:00")
        timeline = memory.timeline(subject="Ada", predicate="lives_in", user_id="ada")
        assert [(m.object or m.content, m.status) for m in timeline] == [
            ("Ada lives in Lisbon.", "superseded"),
            ("Ada lives in Porto.", "current"),
        ]
        assert (
            memory.search("Ada lives", user_id="ada", as_of="2024-05-01T12:00:00")[0].content
            == "Ada lives in Lisbon."
        )
        assert memory.check().ok


def test_a_replayed_batch_dates_each_fact_by_its_own_message(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(down)) as memory:
        memory.add("Ada: I adopted a cat named Miso.", user_id="ada", at="2024-01-05")
        memory.add("Ada: I started learning the oboe.", user_id="ada", at="2024-03-09")

    def undated(turns, existing):
        return [{"action": "ADD", "content": f"Ada said: {t['text']}", "subject": "Ada"} for t in turns]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(undated)) as memory:
        memory.flush()
        memory.reprocess()
        dated = {m.content: m.valid_at.date().isoformat() for m in memory.get_all(user_id="ada")}
    assert dated == {
        "Ada said: Ada: I adopted a cat named Miso.": "2024-01-05",
        "Ada said: Ada: I started learning the oboe.": "2024-03-09",
    }


def test_a_current_fact_the_lm_was_not_shown_is_shown_on_a_second_try(db_path):
    """Retrieval can miss the current value of a slot (here: more similar memories fill the
    candidates). Writing that slot without having seen it plans again with it shown."""

    def note(turns, existing):
        return [{"action": "ADD", "content": t["text"], "subject": "Ada"} for t in turns]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        memory.add("Ada: I moved to Lisbon.", user_id="ada", at="2024-01-01")
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(note)) as memory:
        memory.add([f"Ada moved the piano {i} times." for i in range(3)], user_id="ada", at="2024-02-01")
    lm = fused_lm(moves)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"max_candidates": 2}) as memory:
        result = memory.add("Ada: I moved to Porto.", user_id="ada", at="2024-06-01")
        first, second = lm.engine.calls
        assert not any("Lisbon" in m["content"] for m in first.inputs["existing_memories"])
        assert any("Lisbon" in m["content"] for m in second.inputs["existing_memories"])
        assert [op.action for op in result.ops] == ["INVALIDATE"] and result.usage.lm_calls == 2
        homes = [m.content for m in memory.get_all(user_id="ada") if m.predicate == "lives_in"]
        assert homes == ["Ada lives in Porto."] and memory.check().ok
