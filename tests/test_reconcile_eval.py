"""The reconcile eval set (template families split train/dev/test) and its runner."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import dspy
import pytest

from evals.data.make_reconcile import build
from evals.data.reconcile_set import CATEGORIES
from evals.reconcile import DATA, as_examples, load_cases, main, score


def test_the_set_is_complete_consistent_and_reproducible():
    cases = load_cases()
    assert len(cases) >= 400
    assert set(Counter(case["category"] for case in cases)) == set(CATEGORIES)
    assert len({case["id"] for case in cases}) == len(cases)
    families: dict[str, set[str]] = defaultdict(set)
    splits: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        assert case["family"].startswith(case["category"] + "/"), case["id"]
        families[case["category"]].add(case["family"])
        splits[case["family"]].add(case["split"])
        aliases = [memory["alias"] for memory in case["existing_memories"]]
        assert aliases == list(range(1, len(aliases) + 1)), case["id"]
        for op in case["expected_ops"]:
            assert op["action"] in {"ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"}
            assert (op["action"] == "ADD") == ("target" not in op), case["id"]
            if "target" in op:
                assert op["target"] in aliases, case["id"]
    assert min(len(names) for names in families.values()) >= 30
    # A family lies in exactly one split, and every category has families in all three.
    assert all(len(parts) == 1 for parts in splits.values())
    for names in families.values():
        assert {next(iter(splits[name])) for name in names} == {"train", "dev", "test"}
    # The committed file is exactly what the generator writes.
    assert [json.dumps(c, ensure_ascii=False) for c in build()] == DATA.read_text().splitlines()


def test_a_split_is_its_families_only():
    test = load_cases(split="test")
    assert test and {case["split"] for case in test} == {"test"}
    assert not {case["family"] for case in test} & {case["family"] for case in load_cases(split="train")}
    with pytest.raises(ValueError, match="unknown split"):
        load_cases(split="validation")


# What the rule-based oracle (dspy_memory.testing.oracle_decisions) can get, and why: it adds
# every fact, except that a fact equal word for word to a memory is a NOOP and a changed value
# of a one-valued relation (lives_in, works_at, ...) of the same subject invalidates the old one.
RULES_SUFFICE = ("change", "unrelated", "same_predicate_other_person", "relative_date")
# A paraphrase is never word for word, a refinement is not a change of value, and a request to
# forget carries no fact: rules never get these.
NEEDS_UNDERSTANDING = ("paraphrase", "refinement", "forget")
# Partly: a correction whose slot is one-valued looks like a change (but is not flagged as a
# correction); several facts mix what rules get with what they do not; among distractors a
# restatement ("still lives in") looks like a change.
PARTLY = ("correction", "several_facts", "distractors")


def test_the_runner_scores_the_rule_based_oracle(tmp_path, capsys):
    results = main(["--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])
    exact = {category: results["summary"][category]["exact"] for category in CATEGORIES}
    assert set(RULES_SUFFICE + NEEDS_UNDERSTANDING + PARTLY) == set(CATEGORIES)
    assert all(exact[category] == 1.0 for category in RULES_SUFFICE), exact
    assert all(exact[category] == 0.0 for category in NEEDS_UNDERSTANDING), exact
    assert all(0.0 < exact[category] < 1.0 for category in PARTLY), exact
    assert results["lm_calls"] == len(load_cases())
    assert "op exact" in capsys.readouterr().out
    fused = main(
        [
            "--program",
            "write",
            "--split",
            "test",
            "--limit",
            "5",
            "--out",
            str(tmp_path / "w.json"),
            "--plot",
            str(tmp_path / "w.png"),
        ]
    )
    assert fused["summary"]["overall"]["cases"] == 5


def test_the_metric_works_as_a_dspy_metric():
    [example] = as_examples(load_cases(limit=1), "reconcile")
    right = dspy.Prediction(ops=[{"action": op["action"], "target": op.get("target")} for op in example.ops])
    assert score(example, right) == 1.0 and score(example, dspy.Prediction(ops=[])) == 0.0
