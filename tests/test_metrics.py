"""Every metric on hand-made pairs."""

from __future__ import annotations

import numpy as np
import pytest

from evals.metrics import (
    locomo_f1,
    match_facts,
    ndcg_at_k,
    normalize_answer,
    op_accuracy,
    recall_at_k,
    token_f1,
)


def test_recall_and_ndcg():
    assert recall_at_k(["a", "b", "c"], ["b", "z"], 2) == 0.5
    assert recall_at_k(["a"], [], 5) == 1.0
    assert ndcg_at_k(["a", "b"], ["a"], 2) == 1.0
    assert ndcg_at_k(["x", "a"], ["a"], 2) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k(["x", "y"], ["a"], 2) == 0.0
    # Two relevant, found at ranks 1 and 3: (1 + 1/log2(4)) / (1 + 1/log2(3)).
    assert ndcg_at_k(["a", "x", "b"], ["a", "b"], 3) == pytest.approx((1 + 0.5) / (1 + 1 / np.log2(3)))
    assert ndcg_at_k(["a", "a"], ["a"], 2) == 1.0  # duplicates count once


def test_locomo_normalization_and_f1():
    assert normalize_answer("The cat, and a Dog!") == "cat dog"
    assert token_f1("running in the park", "ran in park") == pytest.approx(2 / 3)  # run/ran differ
    assert token_f1("She runs marathons", "marathon running") == pytest.approx(0.8)  # stems match
    assert token_f1("", "anything") == 0.0
    # Category 4 and 2: plain token F1.
    assert locomo_f1("7 May 2023", "7 May 2023", 2) == 1.0
    assert locomo_f1("Boston", 2023, 4) == 0.0
    # Multi-hop: split on commas, best prediction part per gold part, averaged.
    assert locomo_f1("hiking, painting", "painting, hiking, swimming", 1) == pytest.approx(2 / 3)
    # Open-domain: the gold answer stops at its first ";".
    assert locomo_f1("likely yes", "likely yes; she enjoys it", 3) == 1.0
    # Adversarial: credit only for saying the information is not there.
    assert locomo_f1("No information available about that.", "anything", 5) == 1.0
    assert locomo_f1("It was not mentioned.", None, 5) == 1.0
    assert locomo_f1("Paris", "adversarial answer", 5) == 0.0


def embed_by_words(texts):
    """A stand-in embedder: bag of words over a tiny vocabulary (tests the matching logic)."""
    vocabulary = sorted({word for text in texts for word in text.lower().split()})
    return np.array(
        [[text.lower().split().count(word) for word in vocabulary] for text in texts], dtype=float
    )


def test_fact_matching_is_one_to_one_and_thresholded():
    predicted = ["ada lives in denver", "ada lives in denver", "bob likes chess"]
    reference = ["ada lives in denver", "ada has a cat"]
    result = match_facts(predicted, reference, embed_by_words, threshold=0.9)
    assert [(i, j) for i, j, _ in result["matches"]] == [(0, 0)]
    assert (result["precision"], result["recall"]) == (pytest.approx(1 / 3), 0.5)
    assert result["f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert match_facts([], [], embed_by_words)["f1"] == 1.0
    assert match_facts(["x"], [], embed_by_words)["precision"] == 0.0


def test_fact_matching_finds_the_most_pairs_not_the_best_first():
    # On a plane: p0 is closest to r0, but only r0 is close enough to p1. A best-first matching
    # pairs p0-r0 and leaves p1 alone (recall 0.5); the assignment pairs p0-r1 and p1-r0.
    angles = {"p0": 0, "p1": 40, "r0": 18, "r1": -25}

    def embed(texts):
        return np.array([[np.cos(np.radians(angles[t])), np.sin(np.radians(angles[t]))] for t in texts])

    result = match_facts(["p0", "p1"], ["r0", "r1"], embed, threshold=0.8)
    assert [(i, j) for i, j, _ in result["matches"]] == [(0, 1), (1, 0)]
    assert (result["precision"], result["recall"]) == (1.0, 1.0)
    assert [round(score, 3) for _, _, score in result["matches"]] == [0.906, 0.927]


@pytest.mark.integration
def test_fact_threshold_on_minilm_pairs(minilm):
    """The documented threshold separates paraphrases from different facts with the real model."""
    from evals.metrics import FACT_MATCH_THRESHOLD

    same = [
        ("Ada moved to Denver in March 2024.", "In March 2024 Ada relocated to Denver."),
        ("Caroline is a transgender woman.", "Caroline identifies as a trans woman."),
        ("Melanie painted a sunset last week.", "Last week Melanie made a painting of a sunset."),
    ]
    different = [
        ("Ada moved to Denver in March 2024.", "Ada works at Denver Health."),
        ("Caroline is a transgender woman.", "Caroline went to a support group."),
        ("Melanie painted a sunset last week.", "Melanie ran a charity race last week."),
    ]
    for a, b in same:
        assert match_facts([a], [b], minilm.embed)["f1"] == 1.0, (a, b)
    for a, b in different:
        assert match_facts([a], [b], minilm.embed)["f1"] == 0.0, (a, b)
    assert FACT_MATCH_THRESHOLD == 0.8


def test_op_accuracy():
    expected = [{"action": "INVALIDATE", "target": 2}, {"action": "ADD"}]
    assert op_accuracy([{"action": "add"}, {"action": "INVALIDATE", "target": 2}], expected) == {
        "exact": 1.0,
        "f1": 1.0,
        "action_f1": 1.0,
    }
    wrong_target = op_accuracy([{"action": "INVALIDATE", "target": 3}, {"action": "ADD"}], expected)
    assert wrong_target["exact"] == 0.0 and wrong_target["f1"] == 0.5 and wrong_target["action_f1"] == 1.0
    assert op_accuracy([], []) == {"exact": 1.0, "f1": 1.0, "action_f1": 1.0}
    assert op_accuracy([{"action": "NOOP", "target": 1}], [])["f1"] == 0.0
