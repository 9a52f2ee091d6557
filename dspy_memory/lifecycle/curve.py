"""The forgetting curve: how much of a memory is retained after a time without recall.

    R = exp(-dt / S)

dt is the time since the memory was last recalled (or, never recalled, since it was stored),
in days; S is its stability in days, which grows with every recall and with importance:

    S = base_days * (strength + recalls) * (1 + importance_boost * importance)

`recalls` counts searches that returned it and get() calls; `strength` starts at 1 and grows
each time the write path hears the fact again (write.confirm_strength), so a new memory has
S = base_days * (1 + importance_boost * importance). A larger S slows forgetting: MemoryBank's
reference code computes exp(-t / 5 * S), that is exp(-t * S / 5), so there each recall made a
memory fade faster; here S divides. Pure functions, no I/O: lifecycle/maintain.py reads the
inputs from the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from dspy_memory.errors import InvalidInputError

# Julian day number of the Unix epoch: SQLite's julianday() and Python's timestamps meet here.
_UNIX_EPOCH_JD = 2440587.5


def stability_days(
    *, recalls: int, importance: float, base_days: float, importance_boost: float, strength: float = 1.0
) -> float:
    """S in days: `base_days` for a memory never recalled nor restated, of importance 0."""
    if isinstance(recalls, bool) or not isinstance(recalls, int) or recalls < 0:
        raise InvalidInputError(f"recalls must be a whole number >= 0, got {recalls!r}")
    if not 0.0 <= importance <= 1.0:
        raise InvalidInputError(f"importance must be between 0 and 1, got {importance!r}")
    if base_days <= 0 or importance_boost < 0:
        raise InvalidInputError("base_days must be > 0 and importance_boost >= 0")
    if not strength > 0:
        raise InvalidInputError(f"strength must be > 0, got {strength!r}")
    return _stability(recalls, strength, importance, base_days, importance_boost)


def _stability(recalls: int, strength: float, importance: float, base_days: float, boost: float) -> float:
    return base_days * (strength + recalls) * (1 + boost * importance)


def _retention(days_since_recall: float, stability: float) -> float:
    return 1.0 if days_since_recall <= 0 else math.exp(-days_since_recall / stability)


def retention(days_since_recall: float, stability: float) -> float:
    """R = exp(-dt / S), in (0, 1]; a time in the future (dt < 0) retains everything."""
    if stability <= 0 or math.isnan(stability):
        raise InvalidInputError(f"stability must be a positive number of days, got {stability!r}")
    if math.isnan(days_since_recall):
        raise InvalidInputError("days_since_recall is not a number")
    return _retention(days_since_recall, stability)


def days_until(threshold: float, stability: float) -> float:
    """How long without recall until retention falls to `threshold`: -S * ln(threshold)."""
    if not 0.0 < threshold < 1.0:
        raise InvalidInputError(f"threshold must be between 0 and 1 (exclusive), got {threshold!r}")
    return -stability * math.log(threshold)


def days_since(moment: datetime | None, now: datetime) -> float:
    """dt of the curve: days from the last recall (or storage) `moment` to `now`; 0 for None."""
    return (now - moment).total_seconds() / 86400.0 if moment is not None else 0.0


def julian_day(moment: datetime) -> float:
    """The Julian day number of an aware datetime (what SQLite's julianday() returns)."""
    return moment.timestamp() / 86400.0 + _UNIX_EPOCH_JD


@dataclass(frozen=True)
class Forgetting:
    """The curve with its parameters (LifecycleConfig.base_days, importance_boost). It runs on
    every search candidate, so it does not check its inputs again: the config validated the
    parameters, and the schema's CHECKs the statistics."""

    base_days: float
    importance_boost: float

    def stability(self, *, recalls: int, strength: float, importance: float) -> float:
        return _stability(recalls, strength, importance, self.base_days, self.importance_boost)

    def retention(
        self,
        *,
        recalls: int,
        strength: float,
        importance: float,
        days_since_recall: float,
        pinned: bool = False,
    ) -> float:
        """R for a memory's statistics; a pinned memory keeps everything."""
        if pinned:
            return 1.0
        return _retention(
            days_since_recall, self.stability(recalls=recalls, strength=strength, importance=importance)
        )
