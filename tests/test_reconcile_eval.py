"""The reconcile eval set and its runner."""

from __future__ import annotations

import json
from collections import Counter

import dspy

from evals.data.make_reconcile import build
from evals.reconcile import DATA, as_examples, load_cases, main, score

CATEGORIES = {
    "paraphrase",
    "refinement",
    "change",
    "correction",
    "forget",
    "unrelated",
    "same_predicate_other_person",
    "relative_date",
    "several_facts",
    "distractors",
}


def test_the_set_is_complete_consistent_and_reproducible():
    cases = load_cases()
    assert len(cases) >= 150
    counts = Counter(case["category"] for case in cases)
    assert set(counts) == CATEGORIES and min(counts.values()) >= 15
    assert len({case["id"] for case in cases}) == len(cases)
    for case in cases:
        aliases = [memory["alias"] for memory in case["existing_memories"]]
        assert aliases == list(range(1, len(aliases) + 1)), case["id"]
        for op in case["expected_ops"]:
            assert op["action"] in {"ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"}
            assert (op["action"] == "ADD") == ("target" not in op), case["id"]
            if "target" in op:
                assert op["target"] in aliases, case["id"]
    # The committed file is exactly what the generator writes.
    assert [json.dumps(c, ensure_ascii=False) for c in build()] == DATA.read_text().splitlines()


def test_the_runner_scores_the_rule_based_oracle(tmp_path, capsys):
    results = main(["--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])
    summary = results["summary"]
    # A rule-based reconciler gets what rules can (changes of one-valued facts, additions) and
    # misses what needs understanding (paraphrases, refinements, corrections, forget requests).
    for category in ("change", "distractors", "unrelated", "same_predicate_other_person", "several_facts"):
        assert summary[category]["exact"] == 1.0, category
    for category in ("paraphrase", "refinement", "forget"):
        assert summary[category]["exact"] == 0.0, category
    assert results["lm_calls"] == 160
    assert "op exact" in capsys.readouterr().out
    fused = main(
        [
            "--program",
            "write",
            "--limit",
            "5",
            "--out",
            str(tmp_path / "w.json"),
            "--plot",
            str(tmp_path / "w.png"),
        ]
    )
    assert fused["summary"]["overall"]["cases"] == 5 and fused["summary"]["overall"]["exact"] == 0.0


def test_the_metric_works_as_a_dspy_metric():
    [example] = as_examples(load_cases(limit=1), "reconcile")
    right = dspy.Prediction(ops=[{"action": "NOOP", "target": example.expected_ops[0]["target"]}])
    assert score(example, right) == 1.0 and score(example, dspy.Prediction(ops=[])) == 0.0
