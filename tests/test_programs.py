"""The write programs and the validation of what they propose (no store involved)."""

from __future__ import annotations

from datetime import datetime, timezone

import dspy
import pytest
from pydantic import ValidationError

from dspy_memory.ops import Fact, Op
from dspy_memory.programs import (
    ExtractFacts,
    FusedWriter,
    KnownMemory,
    ReconcileFacts,
    Turn,
    TwoStepWriter,
    WriteMemories,
)
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Episode, MemoryRecord, Scope
from dspy_memory.util.text import content_hash
from dspy_memory.util.timeutil import lm_date, to_db
from dspy_memory.write.validate import PlanLimits, plan_ops


def test_ops_accept_what_lms_commonly_write():
    op = Op.model_validate(
        {
            "action": "none",
            "target": "#3",
            "confidence": "high",
            "importance": "80%",
            "valid_at": 2024,
            "subject": "  ",
            "kind": "Preference",
        }
    )
    assert (op.action, op.target, op.confidence, op.importance, op.valid_at, op.subject, op.kind) == (
        "NOOP",
        3,
        0.9,
        0.8,
        "2024",
        None,
        "preference",
    )
    assert Op.model_validate({"action": "remove", "target": "[7]"}).action == "DELETE"
    assert Op.model_validate({"action": "ADD", "content": "x", "kind": "gossip"}).kind == "fact"
    assert Fact.model_validate({"content": "x", "confidence": 7}).confidence == 1.0
    for bad in ({"action": "MERGE"}, {"action": 42}, {"action": "ADD", "target": "the first one"}):
        with pytest.raises(ValidationError):
            Op.model_validate(bad)


def test_signatures_carry_the_rules_and_typed_fields():
    for signature in (ExtractFacts, WriteMemories):
        text = signature.instructions
        assert "relative dates" in text and "EVERY speaker" in text and "self-contained" in text
    for signature in (ReconcileFacts, WriteMemories):
        text = signature.instructions
        assert all(action in text for action in ("ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"))
        assert "never invent" in text and "not instructions" in text
    assert WriteMemories.output_fields["ops"].annotation == list[Op]
    assert ExtractFacts.output_fields["facts"].annotation == list[Fact]


def test_programs_expose_named_predictors_and_round_trip_through_save(tmp_path):
    assert [name for name, _ in TwoStepWriter().named_predictors()] == [
        "extractor.extract",
        "reconciler.reconcile",
    ]
    program = FusedWriter()
    program.write.signature = program.write.signature.with_instructions("Tuned instructions.")
    program.write.demos = [
        dspy.Example(turns=[], observed_at="2024-01-01", context="", existing_memories=[], ops=[])
    ]
    path = tmp_path / "write.json"
    program.save(str(path))
    loaded = FusedWriter()
    loaded.load(str(path))
    assert loaded.write.signature.instructions == "Tuned instructions." and len(loaded.write.demos) == 1


def test_two_step_extracts_then_reconciles():
    def responder(call):
        if call.output_fields == ["facts"]:
            return {
                "facts": [{"content": "Ada lives in Denver.", "subject": "Ada", "valid_at": "2024-03-01"}]
            }
        [fact] = call.inputs["new_facts"]
        [existing] = call.inputs["existing_memories"]
        return {"ops": [{"action": "INVALIDATE", "target": existing["alias"], **fact}]}

    lm = scripted_lm(responder)
    turns = [Turn(speaker="Ada", text="I moved to Denver", time="2024-03-05 10:00")]
    with dspy.context(lm=lm):
        result = TwoStepWriter()(
            turns=turns,
            observed_at="2024-03-05 (Tuesday)",
            existing_memories=[KnownMemory(alias=1, content="Ada lives in Boston.")],
        )
        assert [(op.action, op.target) for op in result.ops] == [("INVALIDATE", 1)]
        assert len(lm.engine.calls) == 2
        alone = TwoStepWriter()(turns=turns, observed_at="2024-03-05 (Tuesday)", existing_memories=[])
        assert [(op.action, op.content) for op in alone.ops] == [("ADD", "Ada lives in Denver.")]
        assert len(lm.engine.calls) == 3  # no reconcile call without existing memories


# -- validation ------------------------------------------------------------------------------


def record(content, *, subject=None, valid_at="2024-01-01", user="ada", id_=None):
    return MemoryRecord(
        id=id_ or content[:8],
        content=content,
        content_hash=content_hash(content),
        subject=subject,
        user_id=user,
        valid_at=valid_at,
        created_at="2024-01-01",
    )


def plan(ops, candidates=None, **kwargs):
    said = Episode(
        id="e1",
        user_id="ada",
        source="text",
        content="Ada said something.",
        occurred_at="2024-03-01",
        ingested_at="2024-03-01",
    )
    settings = dict(
        scope=Scope(user_id="ada"),
        episodes=[said],
        delete_requested=False,
        existing={},
    )
    settings.update(kwargs)
    return plan_ops([Op.model_validate(op) for op in ops], candidates or {}, **settings)


def reasons(result):
    return [(r.index, r.reason) for r in result.rejected]


def test_plan_refuses_what_cannot_be_applied():
    boston = record("Ada lives in Boston.", subject="Ada")
    cats = record("Ada likes cats.", id_="cats")
    result = plan(
        [
            {"action": "UPDATE", "content": "x"},
            {"action": "UPDATE", "target": 9, "content": "x"},
            {"action": "ADD", "content": "   "},
            {"action": "ADD", "content": "y" * 1001},
            {"action": "NOOP", "target": 1},
            {"action": "UPDATE", "target": 1, "content": "Ada lives in Boston, MA."},
            {"action": "ADD", "content": "Ada likes tea."},
            {"action": "ADD", "content": "ADA likes  tea."},
            {"action": "ADD", "content": "Ada likes cats."},
            {"action": "DELETE", "target": 2},
        ],
        {1: boston, 2: record("Ada likes jazz.")},
        existing={content_hash("Ada likes cats."): cats},
    )
    # An ADD of words already remembered confirms that memory (it was not shown, and is no duplicate).
    assert [(p.index, p.action, p.target and p.target.id) for p in result.ops] == [
        (4, "NOOP", boston.id),
        (6, "ADD", None),
        (8, "NOOP", "cats"),
    ]
    assert reasons(result) == [
        (0, "UPDATE needs the alias of an existing memory"),
        (1, "unknown alias 9: not one of the memories shown"),
        (2, "ADD without content"),
        (3, "content longer than 1000 characters"),
        (5, "alias 1 was already acted on by operation 4"),
        (7, "same content as operation 6"),
        (9, "DELETE without an explicit request to forget in the input"),
    ]


def test_plan_scope_limits_and_deletes():
    bobs = record("Bob lives in Rome.", user="bob")
    mine = record("Ada lives in Oslo.")
    result = plan(
        [
            {"action": "DELETE", "target": 1},
            {"action": "DELETE", "target": 2},
            {"action": "DELETE", "target": 3},
        ],
        {1: bobs, 2: mine, 3: record("Ada likes tea.", id_="tea")},
        delete_requested=True,
        deletable={1, 2},
        limits=PlanLimits(max_deletes=1),
    )
    assert [(p.index, p.action, p.target.id) for p in result.ops] == [(1, "DELETE", mine.id)]
    assert reasons(result) == [
        (0, "alias 1 is outside the scope being written"),
        (2, "DELETE of alias 3: the request to forget does not mention it"),
    ]
    many = plan([{"action": "ADD", "content": f"fact {i}"} for i in range(4)], limits=PlanLimits(max_ops=2))
    assert len(many.ops) == 2 and len(many.rejected) == 2


def test_plan_time_rules():
    boston = record("Ada lives in Boston.", subject="Ada", valid_at="2024-01-10")
    same_words = plan([{"action": "UPDATE", "target": 1, "content": "ada lives in boston."}], {1: boston})
    assert [p.action for p in same_words.ops] == ["NOOP"]
    change = plan([{"action": "INVALIDATE", "target": 1, "content": "Ada lives in Denver."}], {1: boston})
    assert change.ops[0].valid_at == to_db("2024-03-01")  # the episode's time when none is given
    older = plan(
        [{"action": "INVALIDATE", "target": 1, "content": "Ada lived in Paris.", "valid_at": "2019"}],
        {1: boston},
    )
    assert [(p.action, p.target) for p in older.ops] == [("ADD", None)] and "older" in older.rejected[
        0
    ].reason
    fix = plan(
        [{"action": "INVALIDATE", "target": 1, "correction": True, "content": "Ada lives in Denver."}],
        {1: boston},
    )
    assert fix.ops[0].valid_at == to_db("2024-01-10")
    other = plan(
        [{"action": "INVALIDATE", "target": 1, "content": "Bob lives in Rome.", "subject": "Bob"}],
        {1: boston},
    )
    assert [(p.action, p.target) for p in other.ops] == [("ADD", None)]


def test_lm_dates():
    assert lm_date("2024-03-05") == to_db(datetime(2024, 3, 5, tzinfo=timezone.utc))
    assert lm_date("2024-03") == to_db("2024-03-01") and lm_date("2024") == to_db("2024-01-01")
    assert lm_date("unknown") is None and lm_date("") is None and lm_date(None) is None
    # Dates as LMs write them in words (python-dateutil reads them); missing parts are the first.
    assert lm_date("March 2024") == to_db("2024-03-01") and lm_date("5 May 2023") == to_db("2023-05-05")
    assert lm_date("May 5, 2023") == to_db("2023-05-05") and lm_date("Sept. 2022") == to_db("2022-09-01")
    # Without a year there is no date to store: "May 5" is not 2000-05-05, "5" is not a day.
    assert lm_date("May 5") is None and lm_date("5") is None and lm_date("last Tuesday") is None
    assert lm_date("2024-13-01") is None and lm_date("sometime in 2024ish") is None
    assert lm_date("2024-02-30") is None
    assert lm_date("2024-03-05T10:00:00+02:00") == to_db("2024-03-05T08:00:00Z")
