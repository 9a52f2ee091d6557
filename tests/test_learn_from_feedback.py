"""Learning from a memory's own feedback (docs/optimization.md): feedback records become examples
whose inputs are what the write run saw and whose labels are what people said was right; they
are split by time; `dspy-memory optimize write --from-feedback` compiles over seeds with the
learner LM as the student (evals/learner.py, no task knowledge), installs the program only when
it does not score lower on the held-out feedback than the program in use, and leaves a receipt."""

from __future__ import annotations

import json

import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InsufficientFeedbackError, InvalidInputError, ScopeError
from dspy_memory.learn.feedback import feedback_examples, split_by_time
from evals.learner import learner_lm

from .scripted import alias_of, fused_lm

THINGS = ["tea", "jazz", "chess", "rain", "pears", "sushi", "kites", "opera"]


def decide(turns, existing):
    """A write program with a habit: it ADDs each message as a fact, also a move (it should
    invalidate the old home), and it deletes what it was never asked to forget."""
    # Later runs are shown the old home too ("drop tea" below): the label goes to the run that
    # added a new home, not to the newest.
    text = turns[-1]["text"]
    if text.startswith("drop "):
        return [{"action": "DELETE", "target": alias_of(existing, text.removeprefix("drop "))}]
    for said in ("I moved to ", "I live in "):
        if text.startswith(said):
            city = text.removeprefix(said).rstrip(".")
            return [
                {
                    "action": "ADD",
                    "content": f"Ada lives in {city}.",
                    "subject": "Ada",
                    "predicate": "lives_in",
                }
            ]
    thing = text.removeprefix("I like ").rstrip(".")
    return [{"action": "ADD", "content": f"Ada likes {thing}.", "subject": "Ada", "predicate": "likes"}]


def opened(path, **settings):
    return Memory(path, embedder=HashEmbedder(64), write={"mode": "fused"}, lm=fused_lm(decide), **settings)


def likes(memory, things, *, start=1):
    return [
        memory.add(f"I like {thing}.", user_id="ada", at=f"2024-01-{start + i:02d}").ops[0].memory_id
        for i, thing in enumerate(things)
    ]


def test_each_kind_of_feedback_becomes_the_label_people_said_was_right(tmp_path):
    with opened(tmp_path / "m.db") as memory:
        tea, jazz, chess = likes(memory, THINGS[:3])
        boston = memory.add("I live in Boston.", user_id="ada", at="2024-02-01").ops[0].memory_id
        memory.add("I moved to Denver.", user_id="ada", at="2024-03-01")  # should have invalidated Boston
        refused = memory.add("drop tea", user_id="ada", at="2024-03-02")  # a DELETE nobody asked for
        raw = memory.add("a note to self", user_id="ada", infer=False).memories[0].id

        memory.feedback(tea, "useful", user_id="ada")
        memory.update(jazz, "Ada likes cool jazz.", reason="cool jazz only", user_id="ada")
        memory.feedback(chess, "wrong", note="I never said that", user_id="ada")
        memory.feedback(boston, "outdated", note="I moved", user_id="ada")
        memory.update(raw, "A note to self, kept.", reason="typo", user_id="ada")
        assert refused.rejected and refused.ops == []

        found = feedback_examples(memory.store, memory.feedback_records(user_id="ada"))
        # The ablation of evals/feedback_loop.py: the same runs labelled with what they did.
        uncorrected = feedback_examples(memory.store, memory.feedback_records(user_id="ada"), corrected=False)
        labels = {
            example.example.turns[-1].text: (example.sources, example.example.ops)
            for example in found.examples
        }

    assert labels["I like tea."][0] == ("useful",) and [op["action"] for op in labels["I like tea."][1]] == [
        "ADD"
    ]
    [corrected] = labels["I like jazz."][1]
    assert corrected["action"] == "ADD" and corrected["content"] == "Ada likes cool jazz."
    assert labels["I like chess."] == (("wrong",), [])
    # The move's run saw Boston under some alias and added instead: INVALIDATE of that alias.
    sources, [invalidate] = labels["I moved to Denver."]
    assert sources == ("outdated",) and invalidate["action"] == "INVALIDATE"
    move = next(e.example for e in found.examples if e.example.turns[-1].text == "I moved to Denver.")
    boston_alias = next(m.alias for m in move.existing_memories if "Boston" in m.content)
    assert invalidate["target"] == boston_alias and invalidate["content"] == "Ada lives in Denver."
    # The refused DELETE is out of the label: that run applied nothing.
    assert labels["drop tea"] == (("refused",), [])
    did = {example.example.turns[-1].text: example.example.ops for example in uncorrected.examples}
    assert [op["action"] for op in did["I like chess."]] == ["ADD"] and did["I like jazz."][0][
        "content"
    ] == "Ada likes jazz."
    assert [op["action"] for op in did["I moved to Denver."]] == ["ADD"]
    # A correction of a raw turn names no write run: counted, no example.
    assert sum(found.skipped.values()) == 1 and "no write run made" in next(iter(found.skipped))


def test_the_newest_examples_are_held_out():
    class Item:
        def __init__(self, at, example):
            self.at, self.example = at, example

    items = [Item(at, f"example {at}") for at in (3, 1, 4, 2, 5)]
    train, held = split_by_time(items, held_out=0.25)
    assert train == ["example 1", "example 2", "example 3"] and held == ["example 4", "example 5"]
    with pytest.raises(ValueError):
        split_by_time(items, held_out=1.0)


def _optimize(db, out, *extra):
    return main(
        ["optimize", "write", "--from-feedback", "--db", str(db), "--user", "ada", "--lm", "fake/student",
         "--seeds", "3", "--out", str(out), *extra]
    )  # fmt: skip


@pytest.fixture
def student(monkeypatch):
    monkeypatch.setattr("dspy_memory.util.lm.checked_lm", lambda spec, *args, **kwargs: learner_lm(spec))


def test_a_program_that_does_not_regress_is_installed_and_memory_loads_it(tmp_path, student, capsys):
    db, out = tmp_path / "m.db", tmp_path / "programs"
    with opened(db) as memory:
        for memory_id in likes(memory, THINGS[:6]):
            memory.feedback(memory_id, "useful", user_id="ada")
    assert _optimize(db, out) == 0
    printed = capsys.readouterr().out
    assert "6 examples: 4 to train on, 0 to select on, 2 held out" in printed
    # Uncompiled, the learner adds nothing (0 on the held-out ADDs); compiled it copies an ADD.
    assert "in use 0.0; compiled 100.0 [100.0, 100.0] over 3 seeds" in printed and "installed" in printed
    numbers = json.loads((out / "write.optimize.json").read_text())
    assert numbers["installed"] and numbers["summary"]["runs"] == [100.0, 100.0, 100.0]
    with Memory(db, embedder=HashEmbedder(64), write={"mode": "fused"}, programs=out) as memory:
        assert memory.programs_in_use == {"write": str(out / "write.json")}
        [receipt] = memory.audit(user_id="ada", operation="optimize")
        assert receipt.details["installed"] and receipt.details["compiled"] == 100.0
        assert "tea" not in json.dumps(receipt.details)  # numbers only, no content


def test_the_gate_refuses_a_program_that_scores_lower_and_force_installs_it(tmp_path, student, capsys):
    """The older feedback says the ADDs were right; the newest says two ADDs were wrong. The
    program in use adds nothing, which is right on those two; the compile copies an ADD."""
    db, out = tmp_path / "m.db", tmp_path / "programs"
    with opened(db) as memory:
        made = likes(memory, THINGS[:6])
        for memory_id in made[:4]:
            memory.feedback(memory_id, "useful", user_id="ada")
        for memory_id in made[4:]:
            memory.feedback(memory_id, "wrong", note="not me", user_id="ada")
    assert _optimize(db, out) == 1
    printed = capsys.readouterr().out
    assert "in use 100.0; compiled 0.0" in printed and "below the program in use" in printed
    assert not out.exists()
    with Memory(db, embedder=HashEmbedder(64)) as memory:
        [receipt] = memory.audit(user_id="ada", operation="optimize")
        assert receipt.details["installed"] is False

    assert _optimize(db, out, "--force", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["installed"] and report["forced"] and (out / "write.json").exists()


def test_too_little_feedback_or_a_shared_file_is_a_clear_error(tmp_path, student, capsys):
    db = tmp_path / "m.db"
    with opened(db) as memory:
        [tea] = likes(memory, THINGS[:1])
        memory.feedback(tea, "useful", user_id="ada")
        with pytest.raises(InsufficientFeedbackError, match="at least 2"):
            memory.learn_from_feedback(lm=learner_lm(), user_id="ada")
        with pytest.raises(InvalidInputError, match="held_out"):
            memory.learn_from_feedback(lm=learner_lm(), held_out=2, user_id="ada")
        memory.add("I like hats.", user_id="bob")
        # Two users in the file: the demos would quote ada's words in bob's writes.
        with pytest.raises(ScopeError, match="share_across_users"):
            memory.learn_from_feedback(lm=learner_lm(), user_id="ada")
    assert _optimize(db, tmp_path / "programs") == 2
    assert "--share-across-users" in capsys.readouterr().err


def test_the_teacher_is_only_the_one_given_never_dspys_configured_lm(tmp_path, monkeypatch):
    """learn_from_feedback(lm=...) without a teacher compiles without one, even when dspy has an
    LM configured (that LM is not a stronger model the caller chose)."""
    import dspy

    import dspy_memory.learn.from_feedback as from_feedback

    seen = {}
    monkeypatch.setattr(from_feedback, "optimize_from_feedback", lambda *args, **kwargs: seen.update(kwargs))
    with opened(tmp_path / "m.db") as memory, dspy.context(lm=learner_lm("configured/elsewhere")):
        memory.learn_from_feedback(lm=learner_lm(), user_id="ada")
    assert seen["teacher_lm"] is None and seen["reflection_lm"] is None
    assert seen["lm"].model == "learner/student"
