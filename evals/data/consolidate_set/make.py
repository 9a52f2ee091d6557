"""Writes evals/data/consolidate.jsonl: the consolidation eval set (a cluster of current
memories -> the MERGE / SUMMARIZE / KEEP decisions a careful memory keeper makes).

    python -m evals.data.consolidate_set.make

Hand-written templates (this package, one module per category, four families each), each filled
a few times with a seed of its own, so the file is reproducible and adding a template changes
no other case. Families, not cases, are split into train / dev / test exactly as the reconcile
set's are (evals/data/make_reconcile.family_splits), so no wording is in two splits.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from evals.data.consolidate_set import family, templates
from evals.data.consolidate_set.kit import PEOPLE, day
from evals.data.make_reconcile import each_case

OUT = Path(__file__).resolve().parent.parent / "consolidate.jsonl"
PER_TEMPLATE = 2


def build(seed: int = 11) -> list[dict[str, Any]]:
    cases = []
    for category, template, name, split, rng, index in each_case(
        templates(), family, seed=seed, per_template=PER_TEMPLATE
    ):
        item = template(rng, rng.choice(PEOPLE), day(rng, date(2025, 1, 1), 300))
        cases.append(
            {"id": f"{name}/{index + 1}", "family": name, "category": category, "split": split, **item}
        )
    return cases


def render(cases: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in cases)


def main() -> None:
    cases = build()
    OUT.write_text(render(cases), encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
