"""DSPy's optimizers on a memory program, with every LM call counted by role: the one
implementation behind `python -m evals.optimize` (eval sets) and `dspy-memory optimize write
--from-feedback` (a memory's own feedback).

Roles: the student runs the program; the teacher (when given) bootstraps demos
(`teacher_settings` of BootstrapFewShot, MIPROv2 and SIMBA); the proposer writes instructions
(MIPROv2's prompt model, SIMBA's rules; the teacher, else the student); GEPA reflects with the
reflection LM (default: the teacher, else the student).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import UsageTracker

OPTIMIZERS = ("bootstrap", "mipro", "gepa", "simba")
ROLES = ("student", "teacher", "proposer", "reflection")


class CostMeter(UsageTracker):
    """LM calls and tokens per role while it is DSPy's usage tracker.

    `tag(lm, role)` returns a copy of `lm` whose calls count for `role`: a callback on the copy
    names the role while a call runs (copies an optimizer makes keep the callback), and DSPy
    reports the call's usage here from the same thread. DSPy gives each worker thread a deep
    copy of the tracker; this one hands out itself, so no thread's calls are lost. Calls are
    counted when they start (cache hits included); tokens are what the LM reported.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._current = threading.local()
        self.roles: dict[str, dict[str, int]] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> CostMeter:
        return self

    def tag(self, lm: Any, role: str) -> Any:
        tagged = lm.copy()
        tagged.callbacks = [*tagged.callbacks, _RoleCallback(self, role)]
        return tagged

    def _count(self, role: str, **amounts: int) -> None:
        with self._lock:
            counts = self.roles.setdefault(role, {"lm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            for key, amount in amounts.items():
                counts[key] += amount

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        super().add_usage(lm, usage_entry)
        self._count(
            getattr(self._current, "role", None) or "untagged",
            prompt_tokens=int(usage_entry.get("prompt_tokens") or 0),
            completion_tokens=int(usage_entry.get("completion_tokens") or 0),
        )

    def summary(self) -> dict[str, dict[str, int]]:
        roles = {role: dict(self.roles[role]) for role in [*ROLES, *sorted(self.roles)] if role in self.roles}
        roles["total"] = {
            key: sum(counts[key] for counts in self.roles.values())
            for key in ("lm_calls", "prompt_tokens", "completion_tokens")
        }
        return roles


class _RoleCallback(BaseCallback):
    def __init__(self, meter: CostMeter, role: str) -> None:
        self.meter, self.role = meter, role

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.meter._current.role = self.role
        self.meter._count(self.role, lm_calls=1)

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        self.meter._current.role = None


def compile_program(
    program: Any,
    optimizer: str,
    trainset: list[Any],
    valset: list[Any],
    *,
    metric: Callable[..., float],
    feedback: Callable[..., Any] | None = None,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    meter: CostMeter | None = None,
    labeled_demos: int = 8,
    threads: int = 1,
    seed: int = 0,
) -> Any:
    """`program` compiled by `optimizer` on `trainset` (MIPROv2 and GEPA select on `valset`),
    scored by `metric` (GEPA by `feedback`, a metric that also says what was wrong; default
    `metric`); every LM's calls are counted by role in `meter`."""
    import dspy

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    if optimizer in ("mipro", "gepa") and not valset:
        raise ValueError(f"{optimizer} needs a dev set to select on; the split gave none")
    meter = meter or CostMeter()
    student = meter.tag(lm, "student")
    teacher = meter.tag(teacher_lm, "teacher") if teacher_lm is not None else None
    proposer = meter.tag(teacher_lm if teacher_lm is not None else lm, "proposer")
    teacher_settings = {"lm": teacher} if teacher is not None else None
    with dspy.context(lm=student, usage_tracker=meter):
        if optimizer == "bootstrap":
            return dspy.BootstrapFewShot(
                metric=metric,
                teacher_settings=teacher_settings,
                max_bootstrapped_demos=4,
                max_labeled_demos=labeled_demos,
            ).compile(program, trainset=trainset)
        if optimizer == "mipro":
            return dspy.MIPROv2(
                metric=metric,
                prompt_model=proposer,
                task_model=student,
                teacher_settings=teacher_settings,
                max_bootstrapped_demos=4,
                max_labeled_demos=labeled_demos,
                auto="light",
                num_threads=threads,
                seed=seed,
            ).compile(program, trainset=trainset, valset=valset)
        if optimizer == "gepa":
            reflection = meter.tag(reflection_lm or teacher_lm or lm, "reflection")
            return dspy.GEPA(
                metric=feedback or metric,
                auto="light",
                reflection_lm=reflection,
                num_threads=threads,
                seed=seed,
            ).compile(program, trainset=trainset, valset=valset)
        return dspy.SIMBA(
            metric=metric,
            max_steps=4,
            max_demos=4,
            prompt_model=proposer,
            teacher_settings=teacher_settings,
            num_threads=threads,
            bsize=min(32, len(trainset)),
        ).compile(program, trainset=trainset, seed=seed)


def scored(
    program: Any, examples: list[Any], lm: Any, *, metric: Callable[..., float], threads: int = 1
) -> list[float]:
    """The metric of `program` on each of `examples`, in order; a failed answer scores 0."""
    import dspy

    with dspy.context(lm=lm):
        evaluation = dspy.Evaluate(
            devset=examples, metric=metric, num_threads=threads, display_progress=False
        )
        return [float(score) for _, _, score in evaluation(program).results]
