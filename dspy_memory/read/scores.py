"""The score functions of the read path: a rank's share in fusion, a score's place in its
list, a memory's recency."""

from __future__ import annotations

import math
from collections.abc import Sequence


def reciprocal_rank(rank: int, rrf_k: float) -> float:
    """A hit's share in reciprocal rank fusion, scaled so that a first place scores 1."""
    return (rrf_k + 1) / (rrf_k + rank)


def standard_scores(scores: Sequence[float]) -> list[float]:
    """Each score's place in its list, in [0, 1]: its z-score (how many standard deviations above
    the list's mean) mapped through the normal CDF. Unlike a min-max, one outlying top score
    does not squash the rest, and the scale of the source's scores (cosine, BM25) drops out."""
    if not scores:
        return []
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((score - mean) ** 2 for score in scores) / len(scores))
    if spread == 0:
        return [0.5] * len(scores)
    return [0.5 * (1.0 + math.erf((score - mean) / (spread * math.sqrt(2.0)))) for score in scores]


def agreed_weight(
    dense: Sequence[int], keyword: Sequence[int], *, depth: int, share: float, full: float, floor: float
) -> float:
    """The dense weight for one query: `full` when the top `depth` rows of the two sources share
    at least `share` of their rows, falling linearly to `floor` when they share none. When the
    weaker source (dense, on conversational text) disagrees with the stronger one, it is the
    likelier to be wrong, so it gets less say."""
    if depth <= 0:
        return full
    shared = len(set(dense[:depth]) & set(keyword[:depth])) / depth
    floor = min(floor, full)  # disagreement never raises the weight
    return floor + (full - floor) * min(1.0, shared / share)


def recency(age_days: float, half_life_days: float) -> float:
    """1.0 for a memory from the reference time (or later), halving every `half_life_days`."""
    return 1.0 if age_days <= 0 else math.pow(0.5, age_days / half_life_days)
