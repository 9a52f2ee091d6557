"""Seeded comparisons against a baseline: what every offline optimization claim must show.

A compile is run once per seed (the seed shuffles the train order and seeds the optimizer).
Each run is scored per test example, next to the uncompiled program on the same examples, and
the difference is given with a paired bootstrap 95% interval that resamples both the examples
and the seeds (so it is as wide as the examples and the train order together make it). A gain
(or a loss) is claimed only when the interval excludes 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

RESAMPLES = 4000
LEVEL = 0.95


def interval(differences: Any, *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean of `differences[run][example]`. Each resample
    draws runs and examples with replacement."""
    values = np.asarray(differences, dtype=np.float64)
    if values.ndim != 2 or not values.size:
        raise ValueError("differences must be a non-empty (runs x examples) table")
    rng = np.random.default_rng(seed)
    runs = rng.integers(0, values.shape[0], size=(resamples, values.shape[0]))
    examples = rng.integers(0, values.shape[1], size=(resamples, values.shape[1]))
    means = values[runs[:, :, None], examples[:, None, :]].mean(axis=(1, 2))
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_interval(baseline: Sequence[Any], runs: Sequence[Sequence[float]]) -> tuple[float, float]:
    """The 95% interval of mean(run) - mean(baseline) on the same examples (runs[s][i] and
    baseline[i] are example i; a baseline that varies by seed is a table like `runs`, paired by
    seed)."""
    base = np.asarray(baseline, dtype=np.float64)
    scores = np.asarray(runs, dtype=np.float64)
    if (
        scores.ndim != 2
        or scores.shape[-1] != base.shape[-1]
        or base.shape not in (scores.shape[1:], scores.shape)
    ):
        raise ValueError("every run must score the baseline's examples")
    return interval(scores - base)


def verdict(interval: tuple[float, float]) -> str:
    low, high = interval
    if low > 0:
        return "gain"
    if high < 0:
        return "loss"
    return "no difference shown"


def summary(
    baseline: Sequence[Any], runs: Sequence[Sequence[float]], *, scale: float = 100.0
) -> dict[str, Any]:
    """Baseline, per-run scores, mean [min, max], the mean difference and its paired interval,
    all on the 0-`scale` scale, and the verdict (`baseline`: per example, or per run and
    example when it too varies by seed)."""
    per_run = [float(np.mean(run)) * scale for run in runs]
    base = float(np.mean(baseline)) * scale
    low, high = paired_interval(baseline, runs)
    return {
        "baseline": base,
        "runs": per_run,
        "mean": float(np.mean(per_run)),
        "min": min(per_run),
        "max": max(per_run),
        "difference": float(np.mean(per_run)) - base,
        "interval": [low * scale, high * scale],
        "verdict": verdict((low, high)),
        "examples": len(runs[0]),
    }


def describe(result: dict[str, Any], *, baseline: str = "uncompiled", unit: str = "") -> str:
    """One line for a `summary`: the baseline, the mean [min, max] over runs, the difference
    with its interval, and the verdict."""
    low, high = result["interval"]
    runs = len(result["runs"])
    return (
        f"{baseline} {result['baseline']:.1f}{unit}; compiled {result['mean']:.1f}{unit} "
        f"[{result['min']:.1f}, {result['max']:.1f}] over {runs} seed{'s' if runs != 1 else ''}; "
        f"difference {result['difference']:+.1f} [{low:+.1f}, {high:+.1f}] (paired 95%, "
        f"{result['examples']} examples): {result['verdict']}"
    )
