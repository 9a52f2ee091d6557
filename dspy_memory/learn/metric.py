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


def ops_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    """`ops_metric` with what was wrong, in words (GEPA's metric): the right operations and the
    answer's, by action and alias, and the situation when the example names one (`category`)
    or what a person said about it (`note`)."""
    import dspy

    ops = ops_of(pred)
    if op_accuracy(ops, gold.ops)["exact"] == 1.0:
        return dspy.Prediction(score=1.0, feedback="Correct.")

    def show(items: Sequence[Mapping[str, Any]]) -> str:
        return ", ".join(
            f"{op.get('action')}{' ' + str(op['target']) if op.get('target') else ''}" for op in items
        )

    situation = f"In a '{gold.category}' situation the" if gold.get("category") else "The"
    said = f" A person said: {gold.note}" if gold.get("note") else ""
    return dspy.Prediction(
        score=0.0,
        feedback=f"{situation} right operations were [{show(gold.ops)}] but the answer was "
        f"[{show(ops) or 'nothing'}]. Review the rules for this kind of situation.{said}",
    )
