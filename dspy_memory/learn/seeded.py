"""A compile over seeds, scored next to a baseline program on the same held-out examples: the
table every claim about compiling rests on (dspy_memory.learn.stats). Each seed shuffles the
train order and is the optimizer's own seed."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.learn.optimizers import CostMeter, compile_program, scored
from dspy_memory.learn.stats import summary


@dataclass
class SeededCompile:
    """What `compile_seeds` measured: the program of each seed, the baseline's and each seed's
    score on every held-out example, the summary (mean [min, max], paired 95% interval,
    verdict) and each compile's cost (LM calls and tokens per role) and seconds."""

    programs: dict[int, Any]
    baseline: list[float]
    scores: dict[int, list[float]]
    cost: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, Any]:
        """The seed table; its runs in the order the seeds were given."""
        return summary(self.baseline, list(self.scores.values()))


def shuffled(items: Sequence[Any], seed: int) -> list[Any]:
    """`items` in the order `seed` gives them (the input is left as it was)."""
    order = list(items)
    random.Random(seed).shuffle(order)
    return order


def compile_seeds(
    make_program: Callable[[], Any],
    optimizer: str,
    trainset: Sequence[Any],
    valset: Sequence[Any],
    heldout: Sequence[Any],
    *,
    metric: Callable[..., float],
    feedback: Callable[..., Any] | None = None,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    baseline: Any = None,
    labeled_demos: int = 8,
    threads: int = 1,
) -> SeededCompile:
    """`make_program()` compiled by `optimizer` once per seed, each scored on `heldout` next to
    `baseline` (default: `make_program()` uncompiled), all run by `lm`."""
    if not seeds:
        raise ValueError("compile_seeds needs at least one seed")
    reference = baseline if baseline is not None else make_program()
    result = SeededCompile(
        programs={}, baseline=scored(reference, list(heldout), lm, metric=metric, threads=threads), scores={}
    )
    for seed in seeds:
        meter = CostMeter()
        start = time.perf_counter()
        program = compile_program(
            make_program(),
            optimizer,
            shuffled(trainset, seed),
            list(valset),
            metric=metric,
            feedback=feedback,
            lm=lm,
            teacher_lm=teacher_lm,
            reflection_lm=reflection_lm,
            meter=meter,
            labeled_demos=labeled_demos,
            threads=threads,
            seed=seed,
        )
        result.seconds[seed] = time.perf_counter() - start
        result.cost[seed] = meter.summary()
        result.programs[seed] = program
        result.scores[seed] = scored(program, list(heldout), lm, metric=metric, threads=threads)
    return result
