"""Optimization, proved offline with a student that can only learn from demonstrations.

The student is the learner LM (evals/learner.py): it imitates the demonstration in its prompt
whose inputs share the most words with the current input, re-bound to the current input by a
generic rule, and otherwise adds every fact. Nothing in it names an answer, a situation or an
action, so whatever it gains comes from the demos an optimizer put in its prompt. Compiles run
on the train split of the reconcile set, MIPROv2 and GEPA select on dev, and scores are
reported on test: template families in no other split, so no demo is a copy of a test case.
"""

from __future__ import annotations

import json
import random

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.programs import FactReconciler
from evals.learner import learner_lm
from evals.optimize import compile_program, evaluate, main, run, scores
from evals.reconcile import as_examples, load_cases
from evals.tasks import get_task, ops_metric, split_examples


@pytest.fixture(scope="module")
def splits():
    """The train split whole (the pool demos come from); dev and test sampled across their
    families to keep these tests fast (still families the train split does not have)."""
    parts = split_examples(as_examples(load_cases(), "reconcile"))
    return {
        "train": parts["train"],
        "dev": random.Random(0).sample(parts["dev"], 40),
        "test": random.Random(1).sample(parts["test"], 60),
    }


@pytest.fixture(scope="module")
def baseline(splits):
    return scores(FactReconciler(), splits, learner_lm(), metric=ops_metric)


def test_the_splits_share_no_template_family():
    parts = split_examples(as_examples(load_cases(), "reconcile"))
    families = {part: {example.group for example in items} for part, items in parts.items()}
    assert all(families.values())
    assert not (families["train"] & families["dev"] or families["train"] & families["test"])
    assert not families["dev"] & families["test"]


def test_bootstrap_demonstrations_of_other_templates_raise_the_test_score_and_reload(
    splits, baseline, tmp_path
):
    """BootstrapFewShot without a teacher: the learner's own correct traces (additions) and
    labeled demos from the train families. Measured: see the assertion."""
    result = run(
        "reconcile", "bootstrap", splits, lm=learner_lm(), out=tmp_path / "reconcile.json", quiet=True
    )
    assert result["test_after"] >= result["test_before"] + 10, result

    numbers = json.loads((tmp_path / "reconcile.optimize.json").read_text())
    assert numbers["test_after"] == result["test_after"] and numbers["sizes"]["test"] == len(splits["test"])
    assert numbers["cost"]["student"]["lm_calls"] > 0 and numbers["compile_seconds"] > 0

    reloaded = FactReconciler()
    reloaded.load(str(tmp_path / "reconcile.json"))
    assert evaluate(reloaded, splits["test"], learner_lm()) == result["test_after"]
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), write={"mode": "two_step"}, programs=tmp_path
    ) as memory:
        assert memory.programs_in_use == {"reconcile": str(tmp_path / "reconcile.json")}
        assert len(memory._writer.program.reconciler.reconcile.demos) == result["demos"]["reconcile"]
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(32)) as memory:
        assert memory.programs_in_use == {}


def test_mipro_chooses_demonstrations_on_dev_that_carry_to_test(splits, baseline):
    """MIPROv2 (light) proposes instructions (the learner ignores them) and demo sets, and keeps
    the candidate that scores best on dev."""
    small = {"train": splits["train"], "dev": splits["dev"][:20], "test": splits["test"]}
    before = {"dev": None, "test": baseline["test"]}
    result = run("reconcile", "mipro", small, lm=learner_lm(), before=before, quiet=True)
    assert result["test_after"] >= result["test_before"] + 10, result
    assert result["cost"]["proposer"]["lm_calls"] > 0


def test_gepa_cannot_move_a_student_that_ignores_instructions(splits, baseline):
    """GEPA only rewrites instructions. The learner does not read them, and its reflection hands
    the instruction back unchanged, so the score stays: this checks that GEPA runs on dev with a
    reflection LM, not what GEPA does for a model that reads instructions."""
    small = {"train": splits["train"], "dev": splits["dev"][:10], "test": splits["test"]}
    before = {"dev": None, "test": baseline["test"]}
    result = run("reconcile", "gepa", small, lm=learner_lm(), before=before, quiet=True)
    assert result["test_after"] == result["test_before"]
    assert result["cost"]["reflection"]["lm_calls"] > 0 and result["demos"] == {"reconcile": 0}


class _Recorder:
    """Stands in for a DSPy optimizer: records how it was built and compiled."""

    seen: dict[str, dict] = {}

    def __init__(self, **settings):
        self.settings = settings

    def compile(self, program, **arguments):
        _Recorder.seen[type(self).__name__] = {**self.settings, **arguments}
        return program


def test_every_optimizer_gets_the_teacher_it_supports_and_selects_on_dev(monkeypatch, splits):
    for name in ("BootstrapFewShot", "MIPROv2", "GEPA", "SIMBA"):
        monkeypatch.setattr(dspy, name, type(name, (_Recorder,), {}))
    task = get_task("reconcile")
    student, teacher, reflection = (
        learner_lm("s/student"),
        learner_lm("t/teacher"),
        learner_lm("r/reflection"),
    )
    for optimizer in ("bootstrap", "mipro", "gepa", "simba"):
        compile_program(
            task,
            optimizer,
            splits["train"],
            splits["dev"],
            lm=student,
            teacher_lm=teacher,
            reflection_lm=reflection,
        )
    seen = _Recorder.seen
    for name in ("BootstrapFewShot", "MIPROv2", "SIMBA"):
        assert seen[name]["teacher_settings"]["lm"].model == "t/teacher", name
    assert seen["MIPROv2"]["prompt_model"].model == seen["SIMBA"]["prompt_model"].model == "t/teacher"
    assert seen["MIPROv2"]["task_model"].model == "s/student"
    assert seen["GEPA"]["reflection_lm"].model == "r/reflection"
    for name in ("MIPROv2", "GEPA"):
        assert seen[name]["valset"] is splits["dev"] and seen[name]["trainset"] is splits["train"], name
    with pytest.raises(ValueError, match="needs a dev set"):
        compile_program(task, "gepa", splits["train"], [], lm=student)
    with pytest.raises(ValueError, match="unknown optimizer"):
        compile_program(task, "copro", splits["train"], splits["dev"], lm=student)


def test_a_teachers_calls_are_counted_as_the_teachers(splits):
    """With a teacher, BootstrapFewShot runs the teacher on the train examples, not the student."""
    from evals.optimize_offline import teacher

    small = {"train": splits["train"][:12], "dev": [], "test": []}
    result = run(
        "reconcile", "bootstrap", small, lm=learner_lm(), teacher_lm=teacher("reconcile", "rules"), quiet=True
    )
    assert result["cost"]["teacher"]["lm_calls"] > 0 and "student" not in result["cost"]
    assert result["cost"]["total"]["lm_calls"] == result["cost"]["teacher"]["lm_calls"]


def test_the_command_line_compiles_and_writes_the_numbers_beside_the_program(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("dspy_memory.lm.make_lm", lambda spec, api_base=None: learner_lm(spec))
    out = tmp_path / "query.json"
    result = main(
        [
            "query",
            "--optimizer",
            "bootstrap",
            "--lm",
            "fake/student",
            "--teacher-lm",
            "fake/teacher",
            "--out",
            str(out),
        ]
    )
    numbers = json.loads((tmp_path / "query.optimize.json").read_text())
    assert numbers["lm"] == "fake/student" and numbers["teacher_lm"] == "fake/teacher"
    assert numbers["test_before"] == result["test_before"] and set(numbers["sizes"]) == {
        "train",
        "dev",
        "test",
    }
    assert "teacher" in numbers["cost"] and out.exists()
    assert "prompt tokens" in capsys.readouterr().out


def test_gepa_feedback_names_the_situation():
    from evals.tasks import ops_feedback as feedback_metric

    [example] = as_examples([c for c in load_cases() if c["category"] == "forget"][:1], "reconcile")
    result = feedback_metric(example, dspy.Prediction(ops=[{"action": "ADD"}]))
    assert result.score == 0.0 and "'forget' situation" in result.feedback and "DELETE" in result.feedback
