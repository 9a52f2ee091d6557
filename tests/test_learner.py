"""The learner LM (evals/learner.py), the student of every offline optimization claim. It must
hold no task knowledge: these tests pin that by behaviour, not by reading its code.

- Without demonstrations it answers the fixed minimal value of each output type, so it scores
  the naive baseline (`naive_lm`) on every task, example by example.
- Renaming every word and digit of a task consistently renames its answers and nothing else: no
  word (an action, a month, a field value) means anything to it.
- Demonstrations of made-up, irrelevant examples do not move any task beyond the seed spread.
- It copies the nearest demonstration re-bound to the current input, and survives odd prompts.
"""

from __future__ import annotations

import random
import re
import string

import dspy
import pytest

from dspy_memory.programs import (
    FactReconciler,
    FusedWriter,
    MemoryAnswerer,
    MemoryConsolidator,
    QueryRewriter,
)
from dspy_memory.programs.write import FactExtractor
from dspy_memory.testing import LMCall
from evals.ablations import irrelevant_demos, with_demos
from evals.doc_tables import recorded
from evals.learner import (
    FIXED_TEXT,
    answer,
    demonstrations,
    learner_lm,
    naive_lm,
    nearest,
    reflection,
)
from evals.optimize import per_example
from evals.tasks import get_task, split_examples

OFFLINE_TASKS = ("reconcile", "write", "write_compact", "query", "consolidate")


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


@pytest.fixture(scope="module")
def task_splits():
    splits = {}
    for name in OFFLINE_TASKS:
        task = get_task(name, embedder=None)
        splits[name] = (task, split_examples(task.examples(task.default_data, None)))
    return splits


# -- no task knowledge ---------------------------------------------------------------------------


def test_without_demonstrations_every_output_is_the_minimal_value_of_its_type():
    with dspy.context(lm=learner_lm()):
        assert FactReconciler()(**MOVE_NOW).ops == []
        turns = [{"speaker": "Bob", "text": "I moved to Oslo.", "time": "2024-05-01 10:00"}]
        assert (
            FusedWriter()(turns=turns, observed_at="2024-05-01", existing_memories=[], context="").ops == []
        )
        assert FactExtractor()(turns=turns, observed_at="2024-05-01", context="").facts == []
        plan = QueryRewriter()(question="Where did Ada live in June 2023?", today="2024-02-20").plan
        assert (plan.queries, plan.as_of) == ([], None)
        cluster = [
            {"alias": 1, "content": "Ada lives in Oslo."},
            {"alias": 2, "content": "Ada's home is Oslo."},
        ]
        assert MemoryConsolidator()(memories=cluster, today="2024-05-01").decisions == []
        answered = MemoryAnswerer()(
            question="Where does Ada live?", context="Ada lives in Oslo.", today="2024-05-01"
        )
        assert answered.answer == FIXED_TEXT


def test_with_no_demonstrations_it_scores_the_naive_baseline_on_every_task(task_splits):
    for name, (task, splits) in task_splits.items():
        examples = splits["dev"] + splits["test"]
        learner = per_example(task.make_program(), examples, learner_lm(), metric=task.metric)
        naive = per_example(task.make_program(), examples, naive_lm(), metric=task.metric)
        assert learner == naive, name


def _renaming(values, seed):
    """A bijection on the words and digits of `values`: every word becomes a made-up word of the
    same length and letter case, every digit another digit (one permutation), so a number keeps
    its length and nothing else."""
    rng = random.Random(seed)
    vocabulary = set()

    def collect(value):
        if isinstance(value, str):
            vocabulary.update(word.lower() for word in re.findall(r"[A-Za-z]+", value))
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    collect(values)
    taken, words = set(vocabulary), {}
    for word in sorted(vocabulary):
        new = word
        while new in taken:
            new = "".join(rng.choice(string.ascii_lowercase) for _ in word)
        taken.add(new)
        words[word] = new
    digits = list(string.digits)
    rng.shuffle(digits)
    table = str.maketrans(string.digits, "".join(digits))

    def word(match):
        token = match.group(0)
        if token.isdigit():
            return token.translate(table)
        new = words[token.lower()]
        return "".join(n.upper() if o.isupper() else n for o, n in zip(token, new))

    def rename(value):
        if isinstance(value, str):
            return re.sub(r"[A-Za-z]+|\d+", word, value)
        if isinstance(value, dict):
            return {key: rename(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rename(item) for item in value]
        return value

    return rename


def _as_data(value):
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list):
        return [_as_data(item) for item in value]
    return value


def test_renaming_every_word_and_digit_consistently_renames_the_answers(task_splits):
    """An answer re-bound from demonstrations can only depend on which words are the same, never
    on what they are: no action name, month, weekday or field value means anything to it."""
    for name in ("reconcile", "write", "query", "consolidate"):
        task, splits = task_splits[name]
        program = task.make_program()
        [(_, predictor)] = program.named_predictors()
        inputs, outputs = list(predictor.signature.input_fields), list(predictor.signature.output_fields)
        shown = [
            {key: _as_data(example[key]) for key in [*inputs, *outputs]} for example in splits["train"][:8]
        ]
        imitated = 0
        for index, example in enumerate(splits["test"][:12]):
            current = {key: _as_data(example[key]) for key in inputs}
            call = LMCall(inputs, outputs, current, prompt="", json_mode=False, demos=shown)
            rename = _renaming({"call": current, "demos": shown}, seed=index)
            renamed = LMCall(
                inputs, outputs, rename(current), prompt="", json_mode=False, demos=rename(shown)
            )
            original = answer(call, demonstrations(call))
            copied = nearest(current, demonstrations(call)) is not None
            # Nothing to imitate: the same fixed answer before and after renaming.
            expected = rename(original) if copied else original
            assert answer(renamed, demonstrations(renamed)) == expected, (name, example)
            imitated += copied
        assert imitated, f"{name}: no test example imitated a demo, so nothing was shown"


def test_irrelevant_made_up_demonstrations_do_not_move_any_task_beyond_the_seed_spread(task_splits):
    """Demos whose inputs are made-up sentences about nothing the task is about (with real train
    labels): the score stays within the spread of the recorded BootstrapFewShot compiles over
    the same five seeds (docs/results/optimize_offline.json, checked in tests/test_optimize.py)."""
    spread = {
        row["program"]: row["test"]["max"] - row["test"]["min"]
        for program in recorded("optimize_offline")["programs"]
        for row in program["rows"]
        if (row["optimizer"], row["teacher"]) == ("bootstrap", "none")
    }
    for name in ("reconcile", "write", "query", "consolidate"):
        task, splits = task_splits[name]
        baseline = per_example(task.make_program(), splits["test"], learner_lm(), metric=task.metric)
        for seed in range(5):
            demos = irrelevant_demos(splits["train"], count=8, seed=seed)
            program = with_demos(task.make_program(), demos)
            scores = per_example(program, splits["test"], learner_lm(), metric=task.metric)
            moved = 100 * abs(sum(scores) - sum(baseline)) / len(baseline)
            assert moved <= spread[name], (name, seed, moved, spread[name])


# -- copying a demonstration ---------------------------------------------------------------------


def test_a_demonstration_is_copied_with_its_target_rebound_by_rank():
    program = FactReconciler()
    program.reconcile.demos = [MOVE_DEMO]
    # The demo acted on the memory sharing most words with its fact; here that is alias 1.
    with dspy.context(lm=learner_lm()):
        [op] = program(**MOVE_NOW).ops
    assert (op.action, op.target, op.correction) == ("INVALIDATE", 1, False)


def test_the_nearest_demonstration_wins_and_a_dissimilar_one_is_not_imitated():
    kayak_demo = demo(
        reconcile_inputs(
            [fact("Keiko bought a red kayak.", "Keiko", "owns", "kayak")],
            [memory(1, "Keiko works at Globex.", "Keiko", "works_at")],
        ),
        ops=[{"action": "NOOP", "target": 1}],
    )
    program = FactReconciler()
    program.reconcile.demos = [kayak_demo, MOVE_DEMO]
    assert ops_of(program, MOVE_NOW) == [("INVALIDATE", 1)]
    kayak = reconcile_inputs(
        [fact("Bob bought a red kayak.", "Bob", "owns", "kayak")],
        [memory(1, "Bob works at Initech.", "Bob", "works_at")],
    )
    assert ops_of(program, kayak) == [("NOOP", 1)]
    # Sharing only a few words (below MIN_SIMILARITY) is not enough to be imitated.
    unrelated = reconcile_inputs(
        [fact("The heron waited by the river.", "heron", "waits", valid_at="1999-12-31")],
        [memory(1, "Tea is brewed at noon.", "tea", "brewed")],
        observed_at="1999-12-31 (Friday)",
    )
    program.reconcile.demos = [MOVE_DEMO]
    assert ops_of(program, unrelated) == []


def test_a_list_of_operations_is_copied_as_long_as_the_demonstrations():
    program = FactReconciler()
    program.reconcile.demos = [demo(MOVE_INPUTS, ops=[])]
    assert ops_of(program, MOVE_NOW) == []
    two = dict(MOVE_NOW, new_facts=[*MOVE_NOW["new_facts"], fact("Bob has a cat.", "Bob", "owns", "cat")])
    program.reconcile.demos = [MOVE_DEMO]
    assert ops_of(program, two) == [("INVALIDATE", 1)]


def test_a_target_past_the_current_memories_is_copied_as_it_was():
    program = FactReconciler()
    far = dict(MOVE_INPUTS)
    far["existing_memories"] = [
        memory(1, "Ada lives in Boston.", "Ada", "lives_in"),
        memory(2, "Ada plays the cello.", "Ada", "plays"),
        memory(3, "Ada has a dog.", "Ada", "owns"),
    ]
    program.reconcile.demos = [demo(far, ops=[{"action": "NOOP", "target": 3}])]
    assert ops_of(program, MOVE_NOW) == [("NOOP", 3)]  # the validator refuses such an alias


def test_a_planned_date_copies_what_the_question_says_and_nothing_it_does_not():
    """The year stands in the question, so it is re-bound; the month and day are not words of the
    input, so they are copied: the learner knows no calendar."""
    program = QueryRewriter()
    program.rewrite.demos = [
        demo(
            {"question": "Where did Ada live in June 2023?", "today": "2024-02-20"},
            plan={"queries": ["Where did Ada live in June 2023?"], "as_of": "2023-06-15"},
        )
    ]

    def plan(question, today="2024-05-02"):
        with dspy.context(lm=learner_lm()):
            return program(question=question, today=today).plan

    assert plan("Where did Bob work in 2021?").model_dump() == {
        "queries": ["Where did Bob work in 2021?"],
        "as_of": "2021-06-15",
    }
    assert plan("Where did Bob work in December 2022?").as_of == "2022-06-15"
    assert plan("Where does Bob work in Oslo?").as_of == "2023-06-15"  # no year to re-bind: copied


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


def test_other_signatures_get_a_valid_fixed_answer_and_reflection_gets_its_instruction_back():
    predict = dspy.Predict("question -> answer: str, sure: bool, names: list[str], advice: dict[str, str]")
    with dspy.context(lm=learner_lm()):
        result = predict(question="What should the instruction be?")
    assert (result.answer, result.sure, result.names, result.advice) == (FIXED_TEXT, False, [], {})
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
