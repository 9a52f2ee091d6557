"""Writes evals/data/reconcile.jsonl: the reconcile eval set (existing memories + new turns and
facts -> the operations a careful memory keeper applies).

    python -m evals.data.make_reconcile

Hand-written templates (evals/data/reconcile_set/, one module per situation, at least 30
families each with their own wording, people, domains and phrasing), each filled a few times
from small pools with a seed of its own, so the file is reproducible and reviewable and adding a
template changes no other case. Each case carries both the turns (for the fused WriteMemories
program) and the new facts (for ReconcileFacts); aliases number the existing memories as the
write path shows them. Each case names its template `family` and the `split` its family is in:
families, not cases, are split into train / dev / test, so no wording is in two splits.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from evals.data.reconcile_set import family, templates
from evals.data.reconcile_set.kit import PEOPLE, day

OUT = Path(__file__).with_name("reconcile.jsonl")
PER_TEMPLATE = 2
SPLIT_SHARES = (("train", 0.5), ("dev", 0.25), ("test", 0.25))


def family_splits(families: list[str], *, seed: int) -> dict[str, str]:
    """Each family's split: a seeded shuffle of the category's families, cut by SPLIT_SHARES."""
    order = sorted(families)
    random.Random(f"{seed}:splits:{order[0].split('/')[0]}").shuffle(order)
    splits, start = {}, 0
    for index, (name, share) in enumerate(SPLIT_SHARES):
        end = len(order) if index == len(SPLIT_SHARES) - 1 else start + round(len(order) * share)
        splits.update({item: name for item in order[start:end]})
        start = end
    return splits


def each_case(
    made_by_category: dict[str, list[Any]], family: Any, *, seed: int, per_template: int
) -> Iterator[Any]:
    """(category, template, family name, split, rng, index) for each case of each template:
    whole families go to one split, and each family draws from its own seeded generator (adding
    a template changes no other family's cases)."""
    for category, made in made_by_category.items():
        names = [family(category, template) for template in made]
        if len(set(names)) != len(names):
            raise ValueError(f"two templates of {category} share a name")
        splits = family_splits(names, seed=seed)
        for template, name in zip(made, names):
            rng = random.Random(f"{seed}:{name}")
            for index in range(per_template):
                yield category, template, name, splits[name], rng, index


def build(seed: int = 7) -> list[dict[str, Any]]:
    cases = []
    for category, template, name, split, rng, index in each_case(
        templates(), family, seed=seed, per_template=PER_TEMPLATE
    ):
        person = rng.choice(PEOPLE)
        item = template(rng, person, day(rng, date(2024, 2, 1)))
        if item["category"] != category:
            raise ValueError(f"{name} made a {item['category']!r} case")
        cases.append({"id": f"{name}-{index + 1}", "family": name, "split": split, **item})
    return cases


def main() -> None:
    cases = build()
    OUT.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in cases), encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
