"""How well a write program's operations match the right ones: the metric of every compile of
the write programs, offline (evals/) and from a memory's own feedback (learn/feedback.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any


def op_accuracy(
    predicted: Sequence[Mapping[str, Any]], expected: Sequence[Mapping[str, Any]]
) -> dict[str, float]:
    """How well predicted operations match the expected ones, as multisets of (action, target):
    `exact` is 1 when they are the same, `f1` gives partial credit; `action_f1` ignores targets.
    ADD has no target; NOOP, UPDATE, INVALIDATE and DELETE must name the right alias."""

    def keys(ops: Sequence[Mapping[str, Any]], with_target: bool) -> Counter[tuple[Any, ...]]:
        return Counter(
            (str(op.get("action", "")).upper(), op.get("target") if with_target else None) for op in ops
        )

    def f1(a: Counter[tuple[Any, ...]], b: Counter[tuple[Any, ...]]) -> float:
        if not a and not b:
            return 1.0
        common = sum((a & b).values())
        if common == 0:
            return 0.0
        precision, recall = common / sum(a.values()), common / sum(b.values())
        return 2 * precision * recall / (precision + recall)

    p, e = keys(predicted, True), keys(expected, True)
    return {
        "exact": float(p == e),
        "f1": f1(p, e),
        "action_f1": f1(keys(predicted, False), keys(expected, False)),
    }


def ops_of(prediction: Any) -> list[dict[str, Any]]:
    """A prediction's operations as dicts (pydantic ops dumped)."""
    return [op.model_dump() if hasattr(op, "model_dump") else dict(op) for op in (prediction.ops or [])]


def ops_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """1.0 when the predicted operations are the example's `ops` exactly (action and target)."""
    return op_accuracy(ops_of(prediction), example.ops)["exact"]
