"""The forgetting curve R = exp(-dt / S), with S growing with recalls and importance."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dspy_memory.errors import InvalidInputError
from dspy_memory.lifecycle.curve import days_until, retention, stability_days


def test_hand_computed_values():
    # Never recalled, importance 0, base 5 days: S = 5.
    assert stability_days(recalls=0, importance=0.0, base_days=5, importance_boost=1.0) == 5.0
    # Two recalls triple it; importance 0.5 with boost 1 multiplies by 1.5: 5 * 3 * 1.5.
    assert stability_days(recalls=2, importance=0.5, base_days=5, importance_boost=1.0) == 22.5
    assert retention(0, 5.0) == 1.0
    assert retention(5, 5.0) == pytest.approx(math.exp(-1))  # 0.3679 after one stability
    assert retention(10, 22.5) == pytest.approx(0.6411803884299546)
    assert days_until(0.5, 22.5) == pytest.approx(22.5 * math.log(2))  # half-life 15.6 days


def test_strength_slows_forgetting_unlike_memorybanks_reference():
    """MemoryBank's code computes exp(-t / 5 * S) = exp(-t * S / 5): the memory recalled more
    often is the one forgotten faster. Here S divides."""

    def memorybank(t, s):
        return math.exp(-t / 5 * s)

    t = 3.0
    weak = stability_days(recalls=0, importance=0.0, base_days=5, importance_boost=0.0)
    strong = stability_days(recalls=4, importance=0.0, base_days=5, importance_boost=0.0)
    assert retention(t, strong) > retention(t, weak)
    assert retention(t, strong) == pytest.approx(math.exp(-t / 25))  # the intended exp(-t/(5S)), S = 5
    assert memorybank(t, 5) < memorybank(t, 1)  # the reference's inversion, for contrast


@given(
    days=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    recalls=st.integers(min_value=0, max_value=10_000),
    importance=st.floats(min_value=0, max_value=1),
)
def test_retention_falls_with_time_and_rises_with_recalls_and_importance(days, recalls, importance):
    stability = stability_days(recalls=recalls, importance=importance, base_days=5, importance_boost=1.0)
    value = retention(days, stability)
    assert 0.0 <= value <= 1.0
    assert retention(days + 1, stability) <= value
    more = stability_days(recalls=recalls + 1, importance=importance, base_days=5, importance_boost=1.0)
    assert retention(days, more) >= value


@pytest.mark.parametrize(
    "call",
    [
        lambda: stability_days(recalls=-1, importance=0.5, base_days=5, importance_boost=1),
        lambda: stability_days(recalls=True, importance=0.5, base_days=5, importance_boost=1),
        lambda: stability_days(recalls=1, importance=1.5, base_days=5, importance_boost=1),
        lambda: stability_days(recalls=1, importance=0.5, base_days=0, importance_boost=1),
        lambda: retention(1, 0),
        lambda: retention(float("nan"), 5),
        lambda: days_until(1.0, 5),
    ],
)
def test_bad_values_are_refused(call):
    with pytest.raises(InvalidInputError):
        call()
