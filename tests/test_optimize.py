"""Optimization works: compiling raises the dev score, and the saved program reloads with it.

The student LM is scripted to behave like a model that learns from demonstrations: it follows
simple rules, and handles paraphrases (NOOP) and refinements (UPDATE) only once demos of those
operations are in its prompt. The teacher knows the answers. BootstrapFewShot must find the
demos that teach the student; the test asserts the improvement, not that it ran.
"""

from __future__ import annotations

import json

import dspy

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.programs import FactReconciler
from dspy_memory.testing import FUNCTIONAL_PREDICATES, oracle_decisions, scripted_lm
from evals.optimize import evaluate, run, split
from evals.reconcile import as_examples, load_cases


def student_lm():
    def responder(call):
        facts, existing = call.inputs["new_facts"], call.inputs["existing_memories"]
        knows_noop = '"action": "NOOP"' in call.prompt  # only a demo's answer spells it so
        knows_update = '"action": "UPDATE"' in call.prompt
        ops = []
        for fact in facts:
            related = next(
                (
                    m
                    for m in existing
                    if m["subject"] == fact["subject"]
                    and m["predicate"] == fact["predicate"]
                    and fact["object"]
                    and fact["object"].lower() in m["content"].lower()
                ),
                None,
            )
            functional = fact["predicate"] in FUNCTIONAL_PREDICATES
            if related and knows_noop and functional:
                ops.append({"action": "NOOP", "target": related["alias"]})
            elif related and knows_update and not functional and related["content"] != fact["content"]:
                ops.append({"action": "UPDATE", "target": related["alias"], **fact})
            else:
                ops.extend(oracle_decisions([fact], existing))
        return {"ops": ops}

    return scripted_lm(responder, model="scripted/student")


def teacher_lm(cases):
    answers = {
        json.dumps(case["new_facts"][0]["content"]): case["expected_ops"]
        for case in cases
        if case["new_facts"]
    }

    def responder(call):
        facts = call.inputs["new_facts"]
        return {"ops": answers.get(json.dumps(facts[0]["content"]), []) if facts else []}

    return scripted_lm(responder, model="scripted/teacher")


def test_bootstrap_raises_the_dev_score_and_the_saved_program_keeps_it(tmp_path):
    cases = [c for c in load_cases() if c["category"] in ("paraphrase", "refinement", "change", "unrelated")]
    train_cases, dev_cases = split(cases, dev_share=0.5, seed=0)
    # Demos are taken from the start of the train set: lead with what the student must learn.
    train_cases.sort(key=lambda case: case["category"] not in ("paraphrase", "refinement"))
    trainset, devset = as_examples(train_cases, "reconcile"), as_examples(dev_cases, "reconcile")
    student, teacher = student_lm(), teacher_lm(cases)

    result = run(
        "reconcile",
        "bootstrap",
        trainset,
        devset,
        lm=student,
        teacher_lm=teacher,
        out=tmp_path / "reconcile.json",
    )
    assert result["before"] == 50.0  # changes and additions only
    assert result["after"] == 100.0 and result["after"] > result["before"]
    demos = result["compiled"].reconcile.demos
    assert {
        demo.ops[0].action if hasattr(demo.ops[0], "action") else demo.ops[0]["action"] for demo in demos
    } >= {"NOOP", "UPDATE"}

    reloaded = FactReconciler()
    reloaded.load(str(tmp_path / "reconcile.json"))
    assert evaluate(reloaded, devset, student) == result["after"]
    assert evaluate(FactReconciler(), devset, student) == result["before"]

    # Memory loads it for its two-step writer and says so.
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), write={"mode": "two_step"}, programs=tmp_path
    ) as memory:
        assert memory.programs_in_use == {"reconcile": str(tmp_path / "reconcile.json")}
        assert len(memory._writer.program.reconciler.reconcile.demos) == len(demos)
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(32)) as memory:
        assert memory.programs_in_use == {}


def test_gepa_feedback_names_the_situation():
    from evals.tasks import ops_feedback as feedback_metric

    [example] = as_examples([c for c in load_cases() if c["category"] == "forget"][:1], "reconcile")
    result = feedback_metric(example, dspy.Prediction(ops=[{"action": "ADD"}]))
    assert result.score == 0.0 and "'forget' situation" in result.feedback and "DELETE" in result.feedback
