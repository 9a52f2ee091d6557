"""The forgetting curve: how much of a memory is retained after a time without recall.

    R = exp(-dt / S)

dt is the time since the memory was last recalled (or, never recalled, since it became true or
was stored), in days; S is its stability in days, which grows with every recall and with
importance:

    S = base_days * (1 + recalls) * (1 + importance_boost * importance)

`recalls` counts searches that returned it and confirmations by the write path (a fact said
again). A larger S slows forgetting: MemoryBank's reference code computes exp(-t / 5 * S),
that is exp(-t * S / 5), so there each recall made a memory fade faster; here S divides.
Pure functions, no I/O: maintenance (a later step) reads the inputs from the store.
"""

from __future__ import annotations

import math

from dspy_memory.errors import InvalidInputError


def stability_days(*, recalls: int, importance: float, base_days: float, importance_boost: float) -> float:
    """S in days: `base_days` for a memory never recalled, of importance 0."""
    if isinstance(recalls, bool) or not isinstance(recalls, int) or recalls < 0:
        raise InvalidInputError(f"recalls must be a whole number >= 0, got {recalls!r}")
    if not 0.0 <= importance <= 1.0:
        raise InvalidInputError(f"importance must be between 0 and 1, got {importance!r}")
    if base_days <= 0 or importance_boost < 0:
        raise InvalidInputError("base_days must be > 0 and importance_boost >= 0")
    return base_days * (1 + recalls) * (1 + importance_boost * importance)


def retention(days_since_recall: float, stability: float) -> float:
    """R = exp(-dt / S), in (0, 1]; a time in the future (dt < 0) retains everything."""
    if stability <= 0 or math.isnan(stability):
        raise InvalidInputError(f"stability must be a positive number of days, got {stability!r}")
    if math.isnan(days_since_recall):
        raise InvalidInputError("days_since_recall is not a number")
    return 1.0 if days_since_recall <= 0 else math.exp(-days_since_recall / stability)


def days_until(threshold: float, stability: float) -> float:
    """How long without recall until retention falls to `threshold`: -S * ln(threshold)."""
    if not 0.0 < threshold < 1.0:
        raise InvalidInputError(f"threshold must be between 0 and 1 (exclusive), got {threshold!r}")
    return -stability * math.log(threshold)
