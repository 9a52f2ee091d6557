"""Metrics for every eval: retrieval (recall@k, nDCG@k), LoCoMo's official answer F1, fact
extraction precision/recall/F1 by embedding similarity, and operation accuracy for reconcile.

No LM is needed for any of them; `JudgeAnswer` (dspy_memory.programs.evaluation) is the LM judge.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dspy_memory.learn.metric import op_accuracy  # noqa: F401  (re-exported: the library holds the one implementation)

# -- retrieval ---------------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[Any], relevant: Sequence[Any], k: int) -> float:
    """Share of the relevant items found in the top k (1.0 when there is nothing to find)."""
    wanted = set(relevant)
    if not wanted:
        return 1.0
    return len(set(ranked[:k]) & wanted) / len(wanted)


def ndcg_at_k(ranked: Sequence[Any], relevant: Sequence[Any], k: int) -> float:
    """Normalized discounted cumulative gain with binary relevance (each item counted once)."""
    wanted = set(relevant)
    if not wanted:
        return 1.0
    seen: set[Any] = set()
    dcg = 0.0
    for position, item in enumerate(ranked[:k]):
        if item in wanted and item not in seen:
            dcg += 1.0 / math.log2(position + 2)
            seen.add(item)
    ideal = sum(1.0 / math.log2(position + 2) for position in range(min(len(wanted), k)))
    return dcg / ideal


# -- LoCoMo answer F1 (the official task_eval/evaluation.py, re-implemented) -------------------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = set(string.punctuation)
_stemmer: Any = None


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        from nltk.stem import PorterStemmer  # the extra "eval"; no data download needed

        _stemmer = PorterStemmer()
    return _stemmer.stem(word)


def normalize_answer(text: str) -> str:
    """LoCoMo's normalization: drop commas, lowercase, drop punctuation, drop a/an/the/and,
    collapse whitespace."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 between Porter-stemmed, normalized answers."""
    predicted = [_stem(word) for word in normalize_answer(prediction).split()]
    expected = [_stem(word) for word in normalize_answer(gold).split()]
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


ADVERSARIAL_PHRASES = ("no information available", "not mentioned")


def locomo_f1(prediction: str, gold: Any, category: int) -> float:
    """The official score of one answer: multi-hop (1) splits both on commas and averages the
    best match per gold part; open-domain (3) keeps the gold up to its first ";"; adversarial
    (5) is 1 when the answer says the information is not available; others are token F1."""
    prediction = str(prediction)
    if category == 5:
        lowered = prediction.lower()
        return 1.0 if any(phrase in lowered for phrase in ADVERSARIAL_PHRASES) else 0.0
    gold = str(gold)
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        predictions = [part.strip() for part in prediction.split(",")]
        golds = [part.strip() for part in gold.split(",")]
        return float(np.mean([max(token_f1(p, g) for p in predictions) for g in golds]))
    return token_f1(prediction, gold)


# -- fact extraction ---------------------------------------------------------------------------

# all-MiniLM-L6-v2 cosine similarity from which two facts are taken to say the same thing.
# Measured on the hand-made pairs of tests/test_metrics.py: paraphrases 0.94-0.97, different
# facts about the same person and topic 0.42-0.69; 0.8 sits in the gap.
FACT_MATCH_THRESHOLD = 0.8


def match_facts(
    predicted: Sequence[str],
    reference: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    *,
    threshold: float = FACT_MATCH_THRESHOLD,
) -> dict[str, Any]:
    """Fact-level precision, recall and F1: predicted and reference facts are matched one to
    one by cosine similarity of their embeddings, a pair only when it reaches `threshold`: as
    many pairs as possible, and of those the most similar (an assignment, solved by scipy; a
    greedy best-first matching can take a pair that blocks two others)."""
    from scipy.optimize import linear_sum_assignment

    if not predicted or not reference:
        empty = not predicted and not reference
        return {
            "precision": 1.0 if not predicted else 0.0,
            "recall": 1.0 if not reference else 0.0,
            "f1": 1.0 if empty else 0.0,
            "matches": [],
        }
    vectors = np.asarray(embed([*predicted, *reference]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    similarity = vectors[: len(predicted)] @ vectors[len(predicted) :].T
    allowed = similarity >= threshold
    # Each allowed pair is worth more than any total of similarities (at most 1 each), so the
    # most pairs win first and similarity decides between equally many.
    n, m = similarity.shape
    weight = np.where(allowed, similarity.astype(np.float64) + min(n, m) + 1, 0.0)
    # Between equal choices, the earlier facts (far below any real difference in similarity).
    weight -= 1e-9 * np.arange(n * m, dtype=np.float64).reshape(n, m) / (n * m)
    rows, cols = linear_sum_assignment(weight, maximize=True)
    matches = sorted((int(i), int(j), float(similarity[i, j])) for i, j in zip(rows, cols) if allowed[i, j])
    precision = len(matches) / len(predicted)
    recall = len(matches) / len(reference)
    f1 = 0.0 if not matches else 2 * precision * recall / (precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1, "matches": matches}
