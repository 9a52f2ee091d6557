"""The consolidation set's templates: one module per category, each a list of template families.

A template is a function `(rng, person, today) -> case` (see `kit.case`). Its family is
`<category>/<function name>`; every case a template makes belongs to that family, and a family
lies wholly in one split (train, dev or test), as in the reconcile set: a dev or test score
measures clusters worded in ways the optimizer never saw. `python -m
evals.data.consolidate_set.make` writes evals/data/consolidate.jsonl.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# The situation each category stands for and the decision it wants (the module docstrings say why).
CATEGORIES = (
    "paraphrase",  # near-duplicates -> MERGE
    "parts",  # one statement said in pieces -> MERGE
    "distinct_facts",  # same subject, different facts -> KEEP
    "contradiction",  # two values of one slot -> KEEP (the write path decides)
    "old_episodes",  # an old, rarely recalled series of events -> SUMMARIZE
    "fresh_episodes",  # the same kind of series, recent and recalled -> KEEP
    "mixed",  # merge two, keep the rest
    "hostile",  # a memory carrying an instruction -> ignore it
)

Template = Callable[..., dict[str, Any]]


def templates() -> dict[str, list[Template]]:
    """Category -> its templates, in the order their modules list them."""
    return {
        category: list(importlib.import_module(f"evals.data.consolidate_set.{category}").TEMPLATES)
        for category in CATEGORIES
    }


def family(category: str, template: Template) -> str:
    return f"{category}/{template.__name__}"
