"""The hand-written reconcile templates of paraphrase, refinement, change, correction and forget:
every case is well formed, its expected operations are what the write path's validator accepts
unchanged, the rule-based oracle scores what the reconcile eval expects of it, and the families
of a category are worded differently from each other."""

from __future__ import annotations

import importlib
import itertools
import random
import re
from datetime import date, datetime, timezone

import pytest

from dspy_memory.config import WriteConfig
from dspy_memory.ops import Op
from dspy_memory.testing import oracle_decisions
from dspy_memory.types import Episode, MemoryRecord, Scope
from dspy_memory.util.text import content_hash
from dspy_memory.write.validate import deletable_aliases, forget_requests, plan_ops
from evals.data.reconcile_set.kit import PEOPLE, day
from evals.metrics import op_accuracy

ACTIONS = {
    "paraphrase": {"NOOP"},
    "refinement": {"UPDATE"},
    "change": {"INVALIDATE"},
    "correction": {"INVALIDATE", "ADD"},
    "forget": {"DELETE"},
}
SEEDS = range(6)
FORGET = re.compile(WriteConfig().forget_pattern, re.IGNORECASE)


def made(category: str) -> list[tuple[str, dict]]:
    """(family, case) for every template of `category`, filled as make_reconcile fills them
    and with more seeds."""
    module = importlib.import_module(f"evals.data.reconcile_set.{category}")
    cases = []
    for template in module.TEMPLATES:
        for seed in SEEDS:
            rng = random.Random(f"a:{seed}:{template.__name__}")
            person = rng.choice(PEOPLE)
            cases.append((template.__name__, template(rng, person, day(rng, date(2024, 2, 1)))))
    return cases


def at(text: str) -> datetime:
    return datetime.fromisoformat(text[:10]).replace(tzinfo=timezone.utc)


def validated(item: dict) -> tuple[list[tuple[str, int | None]], list[str]]:
    """Run the case's expected operations through the write path's validator, as the LM's
    answer; return what it plans (action, alias) and what it refuses."""
    scope = Scope(user_id="u")
    person = item["turns"][0]["speaker"]
    candidates = {
        memory["alias"]: MemoryRecord(
            id=f"m{memory['alias']}",
            content=memory["content"],
            subject=memory["subject"],
            predicate=memory["predicate"],
            content_hash=content_hash(memory["content"]),
            valid_at=at(memory["valid_at"]) if memory["valid_at"] else None,
            created_at=at(memory["valid_at"] or "2023-01-01"),
            user_id="u",
        )
        for memory in item["existing_memories"]
    }
    episodes = [
        Episode(
            id=f"e{index}",
            user_id="u",
            source="message",
            role="user",
            name=person,
            content=turn["text"],
            occurred_at=datetime.fromisoformat(turn["time"]).replace(tzinfo=timezone.utc),
            ingested_at=datetime.fromisoformat(turn["time"]).replace(tzinfo=timezone.utc),
        )
        for index, turn in enumerate(item["turns"])
    ]
    facts = iter(item["new_facts"])
    ops = [Op(**op) if op["action"] == "DELETE" else Op(**next(facts), **op) for op in item["expected_ops"]]
    requests = forget_requests(episodes, FORGET)
    plan = plan_ops(
        ops,
        candidates,
        scope=scope,
        episodes=episodes,
        delete_requested=bool(requests),
        deletable=deletable_aliases(requests, candidates, FORGET),
        existing={record.content_hash: record for record in candidates.values()},
    )
    planned = [
        (op.action, next((a for a, r in candidates.items() if r is op.target), None)) for op in plan.ops
    ]
    return planned, [rejection.reason for rejection in plan.rejected]


@pytest.mark.parametrize("category", ACTIONS)
def test_each_category_has_30_distinct_templates_that_make_well_formed_cases(category):
    module = importlib.import_module(f"evals.data.reconcile_set.{category}")
    names = [template.__name__ for template in module.TEMPLATES]
    assert len(names) >= 30 and len(set(names)) == len(names)
    for family, item in made(category):
        assert item["category"] == category, family
        aliases = [memory["alias"] for memory in item["existing_memories"]]
        assert aliases == list(range(1, len(aliases) + 1)), family
        assert 1 <= len(item["turns"]) <= 3, family
        contents = [memory["content"] for memory in item["existing_memories"]]
        assert len({content_hash(text) for text in contents}) == len(contents), family
        actions = [op["action"] for op in item["expected_ops"]]
        assert actions and set(actions) <= ACTIONS[category], family
        assert category == "correction" or len(set(actions)) == 1, family
        assert len([a for a in actions if a != "DELETE"]) == len(item["new_facts"]), family
        for op in item["expected_ops"]:
            assert ("target" in op) == (op["action"] != "ADD"), family
            assert op.get("correction", False) == (category == "correction" and op["action"] == "INVALIDATE")
        targets = [op["target"] for op in item["expected_ops"] if "target" in op]
        assert len(set(targets)) == len(targets) and set(targets) <= set(aliases), family
        observed = item["observed_at"][:10]
        for new in item["new_facts"]:
            assert new["valid_at"] is None or new["valid_at"] <= observed, family
            assert new["subject"] and new["predicate"] and new["content"].endswith((".", "!")), family


def assert_the_validator_accepts_every_expected_operation(category: str) -> None:
    for family, item in made(category):
        planned, refused = validated(item)
        expected = [(op["action"], op.get("target")) for op in item["expected_ops"]]
        assert refused == [] and planned == expected, (family, refused, planned, expected)


@pytest.mark.parametrize("category", ACTIONS)
def test_the_validator_accepts_every_expected_operation_unchanged(category):
    assert_the_validator_accepts_every_expected_operation(category)


def test_a_forget_request_carries_no_facts_and_is_worded_as_the_write_path_recognises():
    for family, item in made("forget"):
        assert item["new_facts"] == [], family
        assert any(FORGET.search(turn["text"]) for turn in item["turns"]), family


@pytest.mark.parametrize(
    ("category", "oracle_exact"),
    [("change", True), ("paraphrase", False), ("refinement", False), ("forget", False)],
)
def test_the_rule_based_oracle_scores_what_the_reconcile_eval_expects(category, oracle_exact):
    for family, item in made(category):
        answer = oracle_decisions(item["new_facts"], item["existing_memories"])
        exact = op_accuracy(answer, item["expected_ops"])["exact"] == 1.0
        assert exact == oracle_exact, (family, answer, item["expected_ops"])


def words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.casefold())


def test_a_paraphrase_says_the_known_fact_in_other_words():
    for family, item in made("paraphrase"):
        known = {memory["alias"]: memory["content"] for memory in item["existing_memories"]}
        for op, new in zip(item["expected_ops"], item["new_facts"]):
            old = known[op["target"]]
            assert content_hash(old) != content_hash(new["content"]), family
            assert set(words(old)) != set(words(new["content"])), family


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def largest_family_overlap(category: str) -> tuple[float, str, str]:
    """The highest Jaccard similarity of the word 4-grams of the turns of two cases of different
    families (case against case: pooling a family's cases would dilute it)."""
    cases = [
        (family, set().union(*(shingles(turn["text"]) for turn in item["turns"])))
        for family, item in made(category)
    ]
    worst = (0.0, "", "")
    for (a, sa), (b, sb) in itertools.combinations(cases, 2):
        if a != b and sa and sb:
            worst = max(worst, (len(sa & sb) / len(sa | sb), a, b))
    return worst


@pytest.mark.parametrize("category", ACTIONS)
def test_families_of_a_category_do_not_share_their_wording(category):
    overlap, a, b = largest_family_overlap(category)
    assert overlap < 0.1, (a, b, overlap)


@pytest.mark.parametrize("category", ACTIONS)
def test_templates_are_deterministic(category):
    module = importlib.import_module(f"evals.data.reconcile_set.{category}")
    for template in module.TEMPLATES:
        first, second = (template(random.Random(3), "Ada", date(2024, 5, 6)) for _ in range(2))
        assert first == second, template.__name__
