"""The consolidation eval: the metric on hand-computed answers, the set (well formed, split by
family, regenerated identically), the runner, the optimize task and the learner's rule for
groups of aliases."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import dspy
import pytest

from dspy_memory.ops import ConsolidationOp
from dspy_memory.util.compiled import load_reading_programs
from evals.consolidate import DATA, consolidation_score, load_cases, main
from evals.data.consolidate_set import CATEGORIES
from evals.data.consolidate_set.make import build, render
from evals.learner import Binding, learner_lm
from evals.optimize import main as optimize
from evals.tasks import get_task, split_examples

EXPECTED = [
    {"action": "MERGE", "aliases": [1, 3], "must_keep": ["Ada", "Lisbon", "2019"], "content": "x"},
    {"action": "KEEP", "aliases": [2, 4], "must_keep": [], "content": None},
]
GOOD = "ada has lived in LISBON since 2019."


def score(decisions):
    return consolidation_score(EXPECTED, decisions)


def test_the_right_partition_with_every_term_scores_one_and_keep_may_be_left_out():
    explicit = score(
        [{"action": "MERGE", "aliases": [3, 1], "content": GOOD}, {"action": "KEEP", "aliases": [2, 4]}]
    )
    omitted = score([ConsolidationOp(action="MERGE", aliases=[1, 3], content=GOOD)])
    for result in (explicit, omitted):
        assert (result["exact"], result["partition"], result["action_accuracy"], result["missing"]) == (
            1.0,
            1.0,
            1.0,
            [],
        )
    # What LMs write ("combine", "#1") is read as ConsolidationOp reads it.
    assert score([{"action": "combine", "aliases": "#1, 3", "content": GOOD}])["exact"] == 1.0


def test_a_wrong_partition_scores_zero_with_partial_credit_per_alias():
    wrong = score([{"action": "MERGE", "aliases": [1, 2, 3], "content": GOOD}])
    assert (wrong["exact"], wrong["partition"], wrong["action_accuracy"]) == (0.0, 0.0, 0.75)  # 2 is wrong
    summarized = score([{"action": "SUMMARIZE", "aliases": [1, 3], "content": GOOD}])
    assert (summarized["exact"], summarized["action_accuracy"]) == (0.0, 0.5)  # right group, wrong action
    nothing = score([])
    assert (nothing["exact"], nothing["action_accuracy"], nothing["valid"]) == (0.0, 0.5, True)


def test_a_missing_must_keep_term_fails_exact_but_not_the_partition():
    lost = score([{"action": "MERGE", "aliases": [1, 3], "content": "Ada lives in Lisbon."}])
    assert (lost["exact"], lost["partition"], lost["action_accuracy"], lost["missing"]) == (
        0.0,
        1.0,
        1.0,
        ["2019"],
    )
    empty = score([{"action": "MERGE", "aliases": [1, 3]}])
    assert empty["exact"] == 0.0 and len(empty["missing"]) == 3


def test_unknown_repeated_or_unreadable_aliases_make_the_answer_invalid():
    for bad in (
        [{"action": "MERGE", "aliases": [1, 3, 9], "content": GOOD}],
        [{"action": "MERGE", "aliases": [1, 3], "content": GOOD}, {"action": "KEEP", "aliases": [3, 2]}],
        [{"action": "MERGE", "aliases": ["first", "third"], "content": GOOD}],
        [{"action": "PONDER", "aliases": [1, 3]}],
    ):
        result = score(bad)
        assert (result["exact"], result["partition"], result["valid"]) == (0.0, 0.0, False), bad


def test_keep_only_cases_score_one_for_an_empty_answer():
    keep = [{"action": "KEEP", "aliases": [1, 2], "must_keep": [], "content": None}]
    assert consolidation_score(keep, [])["exact"] == 1.0
    assert (
        consolidation_score(keep, [{"action": "MERGE", "aliases": [1, 2], "content": "a b"}])["exact"] == 0.0
    )


# -- the set -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cases():
    return load_cases()


def test_the_committed_set_is_what_the_generator_writes():
    assert render(build()) == DATA.read_text(encoding="utf-8")


def test_every_case_is_a_full_partition_whose_kept_words_come_from_its_memories(cases):
    assert (
        len(cases) >= 60 and {case["category"] for case in cases} == set(CATEGORIES) and len(CATEGORIES) >= 6
    )
    for case in cases:
        aliases = [memory["alias"] for memory in case["memories"]]
        covered = [alias for item in case["expected"] for alias in item["aliases"]]
        assert aliases == list(range(1, len(aliases) + 1)) and sorted(covered) == aliases, case["id"]
        assert case["id"].startswith(case["family"] + "/") and case["family"].startswith(
            case["category"] + "/"
        )
        for item in case["expected"]:
            text = " ".join(case["memories"][alias - 1]["content"] for alias in item["aliases"]).lower()
            assert all(term.lower() in text for term in item["must_keep"]), (case["id"], item)
            assert consolidation_score(case["expected"], [item for item in case["expected"]])["exact"] == 1.0
    actions = Counter(item["action"] for case in cases for item in case["expected"])
    assert set(actions) == {"MERGE", "SUMMARIZE", "KEEP"}
    assert all(any("'ok'" in m["content"] or " ok." in m["content"] for m in case["memories"])
               for case in cases if case["category"] == "hostile")  # fmt: skip


def test_families_are_split_whole_and_every_split_has_every_category(cases):
    splits = defaultdict(set)
    for case in cases:
        splits[case["family"]].add(case["split"])
    assert all(len(parts) == 1 for parts in splits.values())
    families = {
        part: {f for f, parts in splits.items() if part in parts} for part in ("train", "dev", "test")
    }
    assert not (
        families["dev"] & families["test"] or families["train"] & (families["dev"] | families["test"])
    )
    for part, names in families.items():
        assert {name.split("/")[0] for name in names} == set(CATEGORIES), part


def test_the_runner_scores_the_reference_answers_one_through_dspys_adapter(tmp_path, capsys):
    results = main(["--split", "dev", "--out", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png")])
    assert results["by_category"]["overall"] == {
        "cases": 16,
        "exact": 1.0,
        "partition": 1.0,
        "action_accuracy": 1.0,
    }
    assert results["lm_calls"] == 16 and json.loads((tmp_path / "c.json").read_text())["by_family"]
    assert "| hostile" in capsys.readouterr().out


# -- the optimize task -------------------------------------------------------------------------


def test_the_consolidate_task_builds_examples_and_its_metric_and_feedback_run(cases):
    task = get_task("consolidate")
    examples = task.examples(task.default_data, None)
    assert len(examples) == len(cases) and task.file == "consolidate.json"
    parts = split_examples(examples)
    assert {part: len(items) for part, items in parts.items()} == {"train": 32, "dev": 16, "test": 16}
    assert not {e.group for e in parts["dev"]} & {e.group for e in parts["test"]}
    merge = next(e for e in examples if e.category == "mixed")
    assert task.metric(merge, dspy.Prediction(decisions=merge.decisions)) == 1.0
    assert task.metric(merge, dspy.Prediction(decisions=[])) == 0.0
    wrong = task.feedback(merge, dspy.Prediction(decisions=[])).feedback
    assert "'mixed' cluster" in wrong and "MERGE" in wrong
    grouped = [item for item in merge.expected if item["action"] == "MERGE"]
    lost = [{**item, "content": "something"} for item in grouped]
    feedback = task.feedback(merge, dspy.Prediction(decisions=lost)).feedback
    assert "lost" in feedback and not any(term in feedback for item in grouped for term in item["must_keep"])
    assert not any(item["content"] in wrong + feedback for item in grouped)


def test_the_learner_copies_a_demos_groups_onto_the_current_cluster():
    """Aliases are re-bound by rank (memories ranked by the words they share with the rest of
    the input, then with each other), a content copied from a memory becomes the memory at the
    same rank's, and an alias past the current cluster is copied as it was."""

    def memories(*texts):
        return [{"alias": i + 1, "content": text} for i, text in enumerate(texts)]

    demo = {
        "memories": memories("Bob works at Initech.", "Bob lives in Oslo.", "Bob's home is in Oslo."),
        "today": "2024-05-01",
    }
    decisions = {"decisions": [{"action": "MERGE", "aliases": [2, 3], "content": "Bob lives in Oslo."}]}
    current = {
        "memories": memories("Ada lives in Lisbon.", "Ada plays chess.", "Ada's home is in Lisbon."),
        "today": "2024-06-01",
    }
    assert Binding(demo, current).rebind(decisions) == {
        "decisions": [{"action": "MERGE", "aliases": [1, 3], "content": "Ada lives in Lisbon."}]
    }
    alone = {"memories": memories("Ada plays chess."), "today": "2024-06-01"}
    # The first alias has a counterpart (the only memory); the second is past the cluster: copied.
    assert Binding(demo, alone).rebind(decisions)["decisions"][0]["aliases"] == [1, 3]


def test_optimize_consolidate_compiles_from_the_command_line_and_the_program_is_found(monkeypatch, tmp_path):
    """`python -m evals.optimize consolidate` with the learner LM: wiring only (what compiling is
    worth is measured over seeds in docs/evals.md). Uncompiled the learner decides nothing, which
    keeps every memory: the dev score is the share of keep-only clusters."""
    monkeypatch.setattr("dspy_memory.util.lm.make_lm", lambda spec, api_base=None: learner_lm(spec))
    out = tmp_path / "consolidate.json"
    result = optimize(["consolidate", "--optimizer", "bootstrap", "--lm", "fake/student", "--out", str(out)])
    assert result["sizes"] == {"train": 32, "dev": 16, "test": 16}
    assert result["dev_before"] == pytest.approx(100 * 6 / 16) and result["demos"]["consolidate"] > 0
    assert load_reading_programs(tmp_path)[1] == {"consolidate": str(out)}
