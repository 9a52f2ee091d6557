"""`--limit N` for every eval: N items sampled across groups (categories, conversations,
question types), seeded, so a small run covers what a full run covers. Taking the first N
took whatever the file happens to start with (20 reconcile cases were 16 paraphrases and 4
refinements, where the rule oracle scores 0)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def stratified(items: Sequence[T], limit: int | None, key: Callable[[T], Any], *, seed: int = 0) -> list[T]:
    """`limit` items taken in turn from each group (`key`), each group in a seeded random
    order; the result keeps the items' original order. All items when `limit` is None or not
    smaller than their number."""
    if limit is None or limit >= len(items):
        return list(items)
    if limit < 0:
        raise ValueError(f"--limit must be at least 0, not {limit}")
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(str(key(item)), []).append(index)
    rng = random.Random(seed)
    queues = []
    for name in sorted(groups):
        indexes = groups[name][:]
        rng.shuffle(indexes)
        queues.append(indexes)
    chosen: list[int] = []
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop())
    return [items[index] for index in sorted(chosen)]


def add_limit_arguments(parser: Any, what: str, groups: str) -> None:
    """--limit N (sampled across `groups`) and --seed, the same on every eval."""
    parser.add_argument(
        "--limit", type=int, default=None, help=f"only N {what}, sampled across {groups} (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample (default 0)")
