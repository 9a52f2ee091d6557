"""The reconcile set's templates: one module per category, each a list of template families.

A template is a function `(rng, person, when) -> case` (see `kit.case`). Its family is
`<category>/<function name>`; every case a template makes belongs to that family, and a family
lies wholly in one split (train, dev or test), so a dev or test score measures situations worded
in ways the optimizer never saw.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

CATEGORIES = (
    "paraphrase",
    "refinement",
    "change",
    "correction",
    "forget",
    "unrelated",
    "same_predicate_other_person",
    "relative_date",
    "several_facts",
    "distractors",
)

Template = Callable[..., dict[str, Any]]


def templates() -> dict[str, list[Template]]:
    """Category -> its templates, in the order their modules list them."""
    found = {}
    for category in CATEGORIES:
        module = importlib.import_module(f"evals.data.reconcile_set.{category}")
        found[category] = list(module.TEMPLATES)
    return found


def family(category: str, template: Template) -> str:
    return f"{category}/{template.__name__}"
