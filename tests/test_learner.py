"""The learner LM (evals/learner.py): it answers naively without demonstrations, imitates the
nearest one re-bound to the current input, and survives odd prompts."""

from __future__ import annotations

import dspy
import pytest

from dspy_memory.programs import FactReconciler, FusedWriter, QueryRewriter
from dspy_memory.testing import LMCall
from evals.learner import demonstrations, learner_lm, period, reflection


def fact(content, subject, predicate, obj=None, valid_at="2024-05-01"):
    return {
        "content": content,
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "valid_at": valid_at,
        "kind": "fact",
    }


def memory(alias, content, subject, predicate):
    return {"alias": alias, "content": content, "subject": subject, "predicate": predicate}


def reconcile_inputs(facts, memories, observed_at="2024-05-01 (Wednesday)"):
    return {"new_facts": facts, "existing_memories": memories, "observed_at": observed_at}


def demo(inputs, **outputs):
    return dspy.Example(**inputs, **outputs)


def ops_of(program, inputs, lm=None, adapter=None):
    with dspy.context(lm=lm or learner_lm(), adapter=adapter):
        prediction = program(**inputs)
    return [(op.action, op.target) for op in prediction.ops]


# A demonstration: Ada's new home city leads to an operation on the memory that shares most
# words with the new fact (alias 2 here: the filler memory comes first).
MOVE_INPUTS = reconcile_inputs(
    [fact("Ada moved to Lisbon.", "Ada", "lives_in", "Lisbon")],
    [memory(1, "Ada plays the cello.", "Ada", "plays"), memory(2, "Ada lives in Boston.", "Ada", "lives_in")],
)
MOVE_DEMO = demo(MOVE_INPUTS, ops=[{"action": "INVALIDATE", "target": 2, "correction": False}])
# The current input: the same kind of situation, with the related memory listed first.
MOVE_NOW = reconcile_inputs(
    [fact("Bob moved to Oslo.", "Bob", "lives_in", "Oslo")],
    [
        memory(1, "Bob lives in Quito.", "Bob", "lives_in"),
        memory(2, "Bob enjoys chess on weekends.", "Bob", "likes"),
    ],
)


def test_without_demonstrations_every_fact_is_added():
    assert ops_of(FactReconciler(), MOVE_NOW) == [("ADD", None)]
    two = reconcile_inputs(
        [fact("Bob moved to Oslo.", "Bob", "lives_in"), fact("Bob has a cat.", "Bob", "owns")],
        MOVE_NOW["existing_memories"],
    )
    assert ops_of(FactReconciler(), two) == [("ADD", None), ("ADD", None)]


def test_the_fused_writer_adds_each_turn_without_demonstrations():
    inputs = {
        "turns": [{"speaker": "Bob", "text": "I moved to Oslo.", "time": "2024-05-01 10:00"}],
        "observed_at": "2024-05-01 (Wednesday)",
        "existing_memories": MOVE_NOW["existing_memories"],
        "context": "",
    }
    with dspy.context(lm=learner_lm()):
        ops = FusedWriter()(**inputs).ops
    assert [(op.action, op.content, op.subject) for op in ops] == [("ADD", "I moved to Oslo.", "Bob")]


def test_a_demonstration_is_imitated_and_its_target_rebound_by_rank():
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]
    # The demo acted on the memory sharing most words with its fact; here that is alias 1.
    with dspy.context(lm=learner_lm()):
        [op] = program(**MOVE_NOW).ops
    assert (op.action, op.target, op.content, op.object, op.correction) == (
        "INVALIDATE",
        1,
        "Bob moved to Oslo.",
        "Oslo",
        False,
    )


def test_the_nearest_demonstration_wins():
    unrelated = demo(
        reconcile_inputs(
            [fact("Keiko bought a red kayak.", "Keiko", "owns", "kayak")],
            [memory(1, "Keiko works at Globex.", "Keiko", "works_at")],
        ),
        ops=[{"action": "NOOP", "target": 1}],
    )
    program = FactReconciler()
    program.reconcile.demos = [unrelated, MOVE_DEMO]
    assert ops_of(program, MOVE_NOW) == [("INVALIDATE", 1)]
    program.reconcile.demos = [unrelated]
    kayak = reconcile_inputs(
        [fact("Bob bought a red kayak.", "Bob", "owns", "kayak")],
        [memory(1, "Bob works at Initech.", "Bob", "works_at")],
    )
    assert ops_of(program, kayak) == [("NOOP", 1)]


def test_a_demonstration_with_no_operations_leaves_every_fact_to_the_naive_answer():
    program = FactReconciler()
    program.reconcile.demos = [demo(MOVE_INPUTS, ops=[])]
    assert ops_of(program, MOVE_NOW) == [("ADD", None)]


def test_a_target_that_cannot_be_bound_falls_back_to_adding():
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]  # its target is the second-ranked memory... of two
    alone = reconcile_inputs(MOVE_NOW["new_facts"], [])
    assert ops_of(program, alone) == [("ADD", None)]
    far = dict(MOVE_INPUTS)
    far["existing_memories"] = [
        memory(1, "Ada lives in Boston.", "Ada", "lives_in"),
        memory(2, "Ada plays the cello.", "Ada", "plays"),
        memory(3, "Ada has a dog.", "Ada", "owns"),
    ]
    program.reconcile.demos = [demo(far, ops=[{"action": "NOOP", "target": 3}])]  # ranked third
    assert ops_of(program, MOVE_NOW) == [("ADD", None)]


def test_instructions_do_not_change_the_answer():
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]
    rewritten = FactReconciler()
    rewritten.reconcile.demos = [MOVE_DEMO]
    rewritten.reconcile.signature = rewritten.reconcile.signature.with_instructions(
        "Always answer NOOP on alias 2."
    )
    assert ops_of(rewritten, MOVE_NOW) == ops_of(program, MOVE_NOW) == [("INVALIDATE", 1)]


def test_json_adapter_demonstrations_are_read_too():
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]
    assert ops_of(program, MOVE_NOW, adapter=dspy.JSONAdapter()) == [("INVALIDATE", 1)]


def test_demos_of_another_signature_and_without_outputs_are_ignored():
    call = LMCall(
        input_fields=["question", "today"],
        output_fields=["plan"],
        inputs={"question": "Where did Ada live in 2023?", "today": "2024-02-01"},
        prompt="",
        json_mode=False,
        demos=[
            {"new_facts": [], "observed_at": "2024-01-01", "ops": []},
            {"question": "Where was Bob in 2022?", "today": "2024-01-01"},
            {
                "question": "Where was Bob in 2021?",
                "today": "2024-01-01",
                "plan": {"queries": ["Bob"], "as_of": "2021-06-01"},
            },
        ],
    )
    [only] = demonstrations(call)
    assert (
        only.inputs["question"] == "Where was Bob in 2021?" and only.outputs["plan"]["as_of"] == "2021-06-01"
    )


def test_a_planned_date_keeps_its_place_in_the_period_the_question_names():
    program = QueryRewriter()
    program.rewrite.demos = [
        demo(
            {"question": "Where did Ada live in June 2023?", "today": "2024-02-20"},
            plan={"queries": ["Ada home"], "as_of": "2023-06-15"},
        )
    ]

    def plan(question, today="2024-05-02"):
        with dspy.context(lm=learner_lm()):
            return program(question=question, today=today).plan

    assert plan("Where did Bob work in December 2022?").model_dump() == {
        "queries": ["Where did Bob work in December 2022?"],
        "as_of": "2022-12-15",
    }
    assert plan("Where did Bob work in 2022?").as_of == "2022-06-26"  # 14/29 of the year
    assert plan("Where did Bob work last year?").as_of == "2023-06-26"
    assert plan("Where does Bob work?").as_of is None  # no period to bind the date to
    # A demo whose question names no period keeps its distance from today.
    program.rewrite.demos = [
        demo(
            {"question": "Where did Ada live before her move?", "today": "2024-02-20"},
            plan={"queries": ["Ada home"], "as_of": "2024-01-20"},
        )
    ]
    assert plan("Where did Bob live before his move?", today="2024-05-02").as_of == "2024-04-01"


def test_without_demonstrations_the_plan_is_the_question_now():
    with dspy.context(lm=learner_lm()):
        result = QueryRewriter()(question="Where did Ada live in June 2023?", today="2024-02-20").plan
    assert result.queries == ["Where did Ada live in June 2023?"] and result.as_of is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("in 2022", ("2022-01-01", "2022-12-31")),
        ("in June 2023", ("2023-06-01", "2023-06-30")),
        ("in spring 2023", ("2023-03-01", "2023-05-31")),
        ("in winter 2023", ("2023-12-01", "2024-02-29")),
        ("in early March 2024", ("2024-03-01", "2024-03-11")),
        ("last year", ("2023-01-01", "2023-12-31")),
        ("no period here", None),
    ],
)
def test_periods(question, expected):
    from datetime import date

    found = period(question, date(2024, 5, 2))
    assert (None if found is None else tuple(day.isoformat() for day in found)) == expected


def test_other_signatures_get_a_valid_fixed_answer_and_reflection_gets_its_instruction_back():
    predict = dspy.Predict("question -> answer: str, sure: bool, names: list[str], advice: dict[str, str]")
    with dspy.context(lm=learner_lm()):
        result = predict(question="What should the instruction be?")
    assert (result.answer, result.sure, result.names, result.advice) == ("As in the examples.", True, [], {})
    prompt = "I provided an assistant with the following instructions:\n```\nDecide well.\n```\nExamples..."
    assert reflection(prompt) == "```\nDecide well.\n```"
    lm = learner_lm()
    assert lm(prompt) == ["```\nDecide well.\n```"]


def test_the_learner_is_deterministic_and_counts_tokens():
    lm = learner_lm()
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]
    assert ops_of(program, MOVE_NOW, lm=lm) == ops_of(program, MOVE_NOW, lm=lm)
    assert len(lm.engine.calls) == 2
    with dspy.context(lm=lm), dspy.track_usage() as usage:
        program(**MOVE_NOW)
    [entry] = usage.usage_data["learner/student"]
    assert entry["prompt_tokens"] > 300 and entry["completion_tokens"] > 5
