"""The hand-written reconcile templates of the second half of the categories: every case is well
formed and its expected operations are what the write path's validator accepts unchanged."""

from __future__ import annotations

import importlib

import pytest

from .test_reconcile_set_a import assert_the_validator_accepts_every_expected_operation, made

ACTIONS = {
    "unrelated": {"ADD"},
    "same_predicate_other_person": {"ADD"},
    "relative_date": {"ADD"},
    "distractors": {"INVALIDATE", "NOOP"},
    "several_facts": {"ADD", "UPDATE", "INVALIDATE", "NOOP"},
}


@pytest.mark.parametrize("category", ACTIONS)
def test_each_category_has_30_distinct_templates_that_make_well_formed_cases(category):
    module = importlib.import_module(f"evals.data.reconcile_set.{category}")
    names = [template.__name__ for template in module.TEMPLATES]
    assert len(names) >= 30 and len(set(names)) == len(names)
    for family, item in made(category):
        assert item["category"] == category, family
        aliases = [memory["alias"] for memory in item["existing_memories"]]
        assert aliases == list(range(1, len(aliases) + 1)), family
        assert {op["action"] for op in item["expected_ops"]} <= ACTIONS[category], family
        assert len(item["expected_ops"]) == len(item["new_facts"]), family
        if category == "several_facts":
            assert (
                2 <= len(item["new_facts"]) <= 4 and len({op["action"] for op in item["expected_ops"]}) >= 2
            )
        observed = item["observed_at"][:10]
        for new in item["new_facts"]:
            assert new["valid_at"] is None or new["valid_at"] <= observed, family
            assert new["subject"] and new["predicate"] and new["content"].endswith((".", "!")), family
    # No two families open their last turn with the same sentence frame.
    frames = {}
    for family, item in made(category):
        frames.setdefault(family, " ".join(item["turns"][-1]["text"].split()[:3]))
    assert len(set(frames.values())) >= 0.9 * len(frames), sorted(frames.values())


@pytest.mark.parametrize("category", ACTIONS)
def test_the_validator_accepts_every_expected_operation_unchanged(category):
    assert_the_validator_accepts_every_expected_operation(category)


def test_relative_dates_are_resolved_against_the_turns_day():
    for family, item in made("relative_date"):
        [new] = item["new_facts"]
        assert new["valid_at"] == item["expected_valid_at"] and new["valid_at"] in new["content"], family
        assert new["valid_at"] <= item["observed_at"][:10], family


def test_the_other_persons_memory_is_never_touched():
    for family, item in made("same_predicate_other_person"):
        [new] = item["new_facts"]
        theirs = [m for m in item["existing_memories"] if m["predicate"] == new["predicate"]]
        assert any(m["subject"] != new["subject"] for m in theirs), family
        assert [op["action"] for op in item["expected_ops"]] == ["ADD"], family
