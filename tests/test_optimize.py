"""Offline optimization: the evidence, recomputed, and the wiring.

The student is the learner LM (evals/learner.py): it copies the nearest demonstration in its
prompt, re-bound to the current input, and holds no task knowledge (tests/test_learner.py).
`python -m evals.optimize_offline --seeds 5 --record` wrote docs/results/optimize_offline.json;
the cheap parts of it (BootstrapFewShot, its ablations and the leak check) are recomputed here
and must come out the same, number for number. Splits: the reconcile set by template family,
so no demo is a copy of a test case's template.
"""

from __future__ import annotations

import json
from datetime import date

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.programs import FactReconciler
from evals.doc_tables import recorded
from evals.learner import learner_lm
from evals.optimize import compile_program, evaluate, main, run
from evals.optimize_offline import leak_check, measure
from evals.reconcile import as_examples, load_cases
from evals.tasks import get_task, split_examples
from evals.teachers import period

SEEDS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def splits():
    return split_examples(as_examples(load_cases(), "reconcile"))


@pytest.fixture(scope="module")
def record():
    return recorded("optimize_offline")


def test_the_splits_share_no_template_family(splits):
    families = {part: {example.group for example in items} for part, items in splits.items()}
    assert all(families.values())
    assert not (families["train"] & families["dev"] or families["train"] & families["test"])
    assert not families["dev"] & families["test"]


def same(mine, theirs):
    """Equal, floats to 1e-9 (JSON keeps every digit; a recomputation must give them all)."""
    if isinstance(mine, dict):
        return (
            isinstance(theirs, dict)
            and mine.keys() == theirs.keys()
            and all(same(mine[k], theirs[k]) for k in mine)
        )
    if isinstance(mine, (list, tuple)):
        return isinstance(theirs, list) and len(mine) == len(theirs) and all(map(same, mine, theirs))
    if isinstance(mine, float) or isinstance(theirs, float):
        return mine == pytest.approx(theirs, abs=1e-9)
    return mine == theirs


def _recorded_program(record, name):
    return next(program for program in record["programs"] if program["program"] == name)


@pytest.mark.parametrize("name", ["reconcile", "query", "consolidate"])
def test_bootstrap_and_its_ablations_recompute_to_the_recorded_numbers(record, name):
    """The recorded seeds, compiled again: every per-seed test score, mean, range, interval and
    verdict of BootstrapFewShot (with and without the rule-based teacher) and of the ablations
    that take it apart."""
    assert record["seeds"] == SEEDS
    again = measure(name, ["bootstrap"], SEEDS, dev=False)  # the dev columns: by the docs' check only
    kept = _recorded_program(record, name)
    assert again["sizes"] == kept["sizes"]
    recorded_rows = [row for row in kept["rows"] if row["optimizer"] == "bootstrap"]
    for mine, theirs in zip(again["rows"], recorded_rows, strict=True):
        assert same(mine["test"], theirs["test"]), (name, mine["teacher"], mine["test"], theirs["test"])
    assert same(again["ablations"], kept["ablations"]), (again["ablations"], kept["ablations"])


def test_the_leak_check_recomputes_and_shows_what_the_record_says(record):
    """Two train pools of one size, shuffled alike, differing only in whether half of them are
    sibling cases of the evaluated cases' template families. Whatever the recorded run showed,
    the same seeds show again; and a verdict is only what its interval says."""
    leak = leak_check(SEEDS)
    assert same(leak, record["leak"]), (leak, record["leak"])
    assert leak["pool"] == 2 * leak["siblings"] and leak["evaluated"] > 0
    for key in ("with siblings", "without siblings", "difference"):
        low, high = leak[key]["interval"]
        expected = "gain" if low > 0 else "loss" if high < 0 else "no difference shown"
        assert leak[key]["verdict"] == expected, key


def test_a_compiled_program_saves_reloads_with_its_score_and_memory_loads_it(splits, tmp_path):
    small = {"train": splits["train"], "dev": [], "test": splits["test"][:40]}
    result = run(
        "reconcile", "bootstrap", small, lm=learner_lm(), out=tmp_path / "reconcile.json", quiet=True
    )
    numbers = json.loads((tmp_path / "reconcile.optimize.json").read_text())
    assert numbers["test_after"] == result["test_after"] and numbers["sizes"]["test"] == 40
    assert numbers["cost"]["student"]["lm_calls"] > 0 and numbers["compile_seconds"] > 0

    reloaded = FactReconciler()
    reloaded.load(str(tmp_path / "reconcile.json"))
    assert evaluate(reloaded, small["test"], learner_lm()) == result["test_after"]
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), write={"mode": "two_step"}, programs=tmp_path
    ) as memory:
        assert memory.programs_in_use == {"reconcile": str(tmp_path / "reconcile.json")}
        assert len(memory._writer.program.reconciler.reconcile.demos) == result["demos"]["reconcile"]
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(32)) as memory:
        assert memory.programs_in_use == {}


def test_mipro_keeps_the_candidate_that_scores_best_on_dev(splits):
    """MIPROv2 (light) proposes instructions (the learner ignores them) and demo sets and keeps the
    one dev prefers: on dev it is never below the uncompiled program."""
    small = {"train": splits["train"], "dev": splits["dev"][:20], "test": []}
    result = run("reconcile", "mipro", small, lm=learner_lm(), quiet=True)
    uncompiled = evaluate(FactReconciler(), small["dev"], learner_lm())
    assert result["dev_after"] >= uncompiled, result
    assert result["cost"]["proposer"]["lm_calls"] > 0


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
    from evals.teachers import teacher

    small = {"train": splits["train"][:12], "dev": [], "test": []}
    result = run(
        "reconcile", "bootstrap", small, lm=learner_lm(), teacher_lm=teacher("reconcile", "rules"), quiet=True
    )
    assert result["cost"]["teacher"]["lm_calls"] > 0 and "student" not in result["cost"]
    assert result["cost"]["total"]["lm_calls"] == result["cost"]["teacher"]["lm_calls"]


def test_the_command_line_compiles_and_writes_the_numbers_beside_the_program(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("dspy_memory.util.lm.make_lm", lambda spec, api_base=None: learner_lm(spec))
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


def test_the_command_line_over_seeds_prints_the_table_and_saves_the_first_seeds_program(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr("dspy_memory.util.lm.make_lm", lambda spec, api_base=None: learner_lm(spec))
    out = tmp_path / "query.json"
    result = main(["query", "--lm", "fake/student", "--seeds", "5", "--out", str(out)])
    numbers = json.loads((tmp_path / "query.optimize.json").read_text())
    assert numbers["seeds"] == SEEDS and len(numbers["summary"]["runs"]) == 5
    task = get_task("query")
    test = split_examples(task.examples(task.default_data, None))["test"]
    uncompiled = evaluate(task.make_program(), test, learner_lm(), metric=task.metric)
    assert numbers["summary"]["baseline"] == pytest.approx(uncompiled)
    low, high = numbers["summary"]["interval"]
    assert low <= numbers["summary"]["difference"] <= high
    reloaded = task.make_program()
    reloaded.load(str(out))
    assert len(reloaded.rewrite.demos) == len(result["compiled"][0].rewrite.demos)
    assert "paired 95%" in capsys.readouterr().out


def test_gepa_feedback_names_the_situation():
    from evals.tasks import ops_feedback as feedback_metric

    [example] = as_examples([c for c in load_cases() if c["category"] == "forget"][:1], "reconcile")
    result = feedback_metric(example, dspy.Prediction(ops=[{"action": "ADD"}]))
    assert result.score == 0.0 and "'forget' situation" in result.feedback and "DELETE" in result.feedback


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
def test_the_rule_based_teacher_reads_the_period_a_question_names(question, expected):
    """The teacher may know the task (a stronger model would); the student never sees its rules."""
    found = period(question, date(2024, 5, 2))
    assert (None if found is None else tuple(day.isoformat() for day in found)) == expected
