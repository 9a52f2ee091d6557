"""Demonstration sets that remove one mechanism at a time, to check what a compile's gain is due to.

- `irrelevant_demos`: made-up inputs (sentences about nothing the task is about) with labels of
  real train examples. A student that learns from relevant demonstrations should not move.
- `shuffled_labels`: a compiled program whose demos keep their inputs but trade outputs among
  themselves. What is left of a gain is the labels' prior (which outputs are common), not which
  output goes with which input.
"""

from __future__ import annotations

import copy
import random
from typing import Any

# Unrelated, made-up sentences in plain English (they share only common words with any task).
MADE_UP = (
    "The kettle whistled while the rain fell on the old tin roof.",
    "A heron waited in the shallow water for the fish to come back.",
    "The bakery on the corner sells bread with walnuts and raisins.",
    "Our train was late because of snow on the line near the river.",
    "She painted the fence blue and left the brushes in a jar of water.",
    "The museum opens at nine and closes early on public holidays.",
    "He planted tomatoes, basil and peppers in the garden this spring.",
    "The orchestra tuned their instruments before the concert began.",
    "A lighthouse keeper counted the ships that passed in the fog.",
    "The library moved its maps and atlases to the second floor.",
)


def _made_up(value: Any, rng: random.Random) -> Any:
    """`value` with every string replaced by a made-up sentence (numbers and structure kept)."""
    if isinstance(value, dict):
        return {key: _made_up(item, rng) for key, item in value.items()}
    if isinstance(value, list):
        return [_made_up(item, rng) for item in value]
    if isinstance(value, str):
        return rng.choice(MADE_UP)
    if hasattr(value, "model_dump"):
        return _made_up(value.model_dump(), rng)
    return value


def irrelevant_demos(examples: list[Any], *, count: int, seed: int) -> list[Any]:
    """`count` demos: the inputs of train examples made up anew, with those examples' labels."""
    import dspy

    rng = random.Random(seed)
    chosen = rng.sample(examples, min(count, len(examples)))
    demos = []
    for example in chosen:
        keys = set(example.inputs().keys())
        fields = {key: (_made_up(value, rng) if key in keys else value) for key, value in example.items()}
        demos.append(dspy.Example(**fields).with_inputs(*keys))
    return demos


def with_demos(program: Any, demos: list[Any]) -> Any:
    """A copy of `program` whose every predictor has `demos`."""
    program = copy.deepcopy(program)
    for _, predictor in program.named_predictors():
        predictor.demos = list(demos)
    return program


def shuffled_labels(program: Any, *, seed: int) -> Any:
    """A copy of a compiled `program` whose demos trade their output fields among themselves."""
    import dspy

    program = copy.deepcopy(program)
    rng = random.Random(seed)
    for _, predictor in program.named_predictors():
        outputs = list(predictor.signature.output_fields)
        demos = [dict(demo) for demo in predictor.demos]
        labels = [{key: demo.get(key) for key in outputs} for demo in demos]
        rng.shuffle(labels)
        predictor.demos = [dspy.Example(**{**demo, **label}) for demo, label in zip(demos, labels)]
    return program
