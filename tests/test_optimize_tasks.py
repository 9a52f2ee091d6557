"""The other optimization targets: their examples, metrics and splits, and the wiring of every
optimizer on query planning with the learner LM (evals/learner.py), which knows no dates. What
compiling is worth is measured over seeds by `python -m evals.optimize_offline` (docs/evals.md);
these tests check the mechanics, and claim no gain."""

from __future__ import annotations

import json

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.programs import QueryRewriter
from evals.learner import learner_lm
from evals.optimize import evaluate, run
from evals.tasks import get_task, split_examples

from .test_extraction_eval import OBSERVED
from .test_locomo import MINI


def test_extract_and_answer_examples_metrics_and_splits_by_conversation(tmp_path):
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(OBSERVED))
    extract = get_task("extract", embedder="test:256")
    examples = extract.examples(str(path), "test:256")
    assert len(examples) == 2 and examples[0].reference
    assert [fact["content"] for fact in examples[0].facts] == examples[0].reference  # a label demos can show
    perfect = dspy.Prediction(facts=[type("F", (), {"content": text}) for text in examples[0].reference])
    assert extract.metric(examples[0], perfect) == 1.0
    assert "Matched 0 of" in extract.feedback(examples[0], dspy.Prediction(facts=[])).feedback

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    answer = get_task("answer")
    questions = answer.examples(str(path), "test:64")
    assert len(questions) == 4 and all(q.context for q in questions)
    researching = next(q for q in questions if "researching" in q.question)
    assert "adoption agencies" in researching.context.lower()
    assert answer.metric(researching, dspy.Prediction(answer="Adoption agencies")) == 1.0

    # Sessions and questions are split by conversation, never one conversation in two parts.
    for items in (examples, questions):
        parts = split_examples(items)
        owners = [{example.group for example in part} for part in parts.values()]
        assert sum(len(groups) for groups in owners) == len(set().union(*owners))


@pytest.fixture(scope="module")
def query_splits():
    task = get_task("query")
    examples = task.examples(task.default_data, None)
    assert len(examples) == 24 and sum(1 for e in examples if e.gold_as_of) == 8
    return split_examples(examples)


def test_query_examples_are_split_by_scenario(query_splits):
    scenarios = {part: {example.group for example in items} for part, items in query_splits.items()}
    assert [len(scenarios[part]) for part in ("train", "dev", "test")] == [4, 2, 2]
    assert not (scenarios["train"] & scenarios["dev"] or scenarios["train"] & scenarios["test"])
    assert not scenarios["dev"] & scenarios["test"]
    # Each part has past questions (with a date to plan) and present ones (without).
    for items in query_splits.values():
        assert {example.gold_as_of is None for example in items} == {True, False}


def test_the_query_metric_scores_the_date_a_plan_asks_about(query_splits):
    task = get_task("query")
    past = next(example for example in query_splits["test"] if example.gold_as_of)
    now = next(example for example in query_splits["test"] if not example.gold_as_of)

    def plan(as_of, queries=()):
        return dspy.Prediction(plan=type("Plan", (), {"as_of": as_of, "queries": list(queries)}))

    assert task.metric(now, plan(None)) == 1.0 and task.metric(now, plan(past.gold_as_of)) == 0.0
    assert task.metric(past, plan(past.gold_as_of)) == 1.0 and task.metric(past, plan(None)) == 0.0
    # Queries are not scored: the read path searches the question itself next to them.
    assert task.metric(past, plan(past.gold_as_of, ["anything"])) == task.metric(past, plan(past.gold_as_of))


def test_a_compiled_query_program_reloads_with_its_score_and_memory_loads_it(query_splits, tmp_path):
    result = run("query", "bootstrap", query_splits, lm=learner_lm(), out=tmp_path / "query.json", quiet=True)
    assert result["demos"]["rewrite"] > 0
    reloaded = QueryRewriter()
    reloaded.load(str(tmp_path / "query.json"))
    task = get_task("query")
    assert evaluate(reloaded, query_splits["test"], learner_lm(), metric=task.metric) == result["test_after"]
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(32), programs=tmp_path) as memory:
        assert memory.programs_in_use == {"query": str(tmp_path / "query.json")}


def test_mipro_selects_query_demonstrations_on_dev(query_splits):
    """MIPROv2 proposes instructions (the learner ignores them) and demo sets, and keeps the
    candidate that scores best on dev: never below the uncompiled program there."""
    result = run("query", "mipro", query_splits, lm=learner_lm(), quiet=True)
    assert result["dev_after"] >= result["dev_before"]
    assert result["cost"]["proposer"]["lm_calls"] > 0


def test_gepa_rewrites_instructions_only_so_the_learner_stays_where_it_was(query_splits):
    """GEPA changes instructions, never demos; the learner does not read instructions (its
    reflection hands the instruction back unchanged), so the score cannot move. A real model
    reads instructions: this checks the wiring (dev as valset, a reflection LM), not GEPA."""
    result = run("query", "gepa", query_splits, lm=learner_lm(), quiet=True)
    assert result["test_after"] == result["test_before"] and result["dev_after"] == result["dev_before"]
    assert result["cost"]["reflection"]["lm_calls"] > 0 and result["demos"]["rewrite"] == 0


def test_simba_samples_the_teacher_and_keeps_the_program_train_prefers(query_splits):
    """SIMBA samples the student and the teacher on train mini-batches and may turn the better
    trajectory into a demo; it keeps the candidate train scores best (the first on a tie). The
    learner alone gives the same answer on every sample, so there is nothing to choose from; with
    a rule-based teacher (evals/teachers.py) the teacher is sampled. Whether what it keeps helps
    is measured over seeds (docs/evals.md), not here."""
    from evals.teachers import teacher

    alone = run("query", "simba", query_splits, lm=learner_lm(), quiet=True)
    assert alone["test_after"] == alone["test_before"] and alone["demos"]["rewrite"] == 0
    taught = run(
        "query", "simba", query_splits, lm=learner_lm(), teacher_lm=teacher("query", "rules"), quiet=True
    )
    assert taught["cost"]["teacher"]["lm_calls"] > 0


def test_the_compact_write_program_compiles_and_memory_loads_it(tmp_path):
    task = get_task("write_compact")
    parts = split_examples(task.examples(task.default_data, None))
    small = {"train": parts["train"][:40], "dev": [], "test": parts["test"][:5]}
    result = run(
        "write_compact", "bootstrap", small, lm=learner_lm(), out=tmp_path / "write_compact.json", quiet=True
    )
    assert result["demos"] and sum(result["demos"].values()) > 0
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), write={"mode": "compact"}, programs=tmp_path
    ) as memory:
        assert memory.programs_in_use == {"write_compact": str(tmp_path / "write_compact.json")}
