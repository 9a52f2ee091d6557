"""Rule-based teachers for offline optimization runs: they know the task, as a stronger model
would. The student (evals/learner.py) knows none of this; a teacher's rules reach it only as the
demonstrations an optimizer bootstraps from the teacher's answers.

- `ops`: the reconcile oracle's rules (evals/reconcile.py: NOOP for a fact known word for word,
  INVALIDATE a changed one-valued relation, ADD otherwise).
- `plan`: search for the question; as_of in the middle of the period the question names
  ("in 2022", "June 2023", "early March 2024", "spring 2023", "last year"), none otherwise.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta
from typing import Any

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
# Meteorological seasons as (first month, months long); winter runs into the next year.
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
_PARTS = {"early": (0.0, 1 / 3), "mid": (1 / 3, 2 / 3), "late": (2 / 3, 1.0)}
_PERIOD = re.compile(
    r"\b(?:(early|mid|late)[\s-]+)?(?:("
    + "|".join(sorted({*_MONTHS, *_SEASONS}, key=len, reverse=True))
    + r")\.?\s+(?:of\s+)?)?((?:19|20)\d{2})\b|\b(last|this)\s+year\b",
    re.IGNORECASE,
)


def _months_later(start: date, months: int) -> date:
    index = start.month - 1 + months
    return date(start.year + index // 12, index % 12 + 1, 1)


def period(question: str, today: date | None) -> tuple[date, date] | None:
    """The first period a question names, as (first day, last day)."""
    match = _PERIOD.search(question)
    if not match:
        return None
    part, name, year, relative = match.groups()
    if relative:
        if today is None:
            return None
        year = str(today.year - (relative.lower() == "last"))
    start, length = date(int(year), 1, 1), 12
    if name:
        name = name.lower()
        first, length = _SEASONS.get(name, (_MONTHS.get(name, 1), 1))
        start = date(int(year), first, 1)
    end = _months_later(start, length) - timedelta(days=1)
    if part:
        low, high = _PARTS[part.lower()]
        days = (end - start).days
        start, end = start + timedelta(days=round(days * low)), start + timedelta(days=round(days * high))
    return start, end


def plan_rules(call: Any) -> dict[str, Any] | None:
    """Search for the question; as_of in the middle of the period it names, if any."""
    if "plan" not in call.output_fields:
        return None
    question = str(call.inputs.get("question", ""))
    today = _day(call.inputs.get("today"))
    named = period(question, today)
    as_of = None if named is None else (named[0] + (named[1] - named[0]) / 2).isoformat()
    return {"plan": {"queries": [question], "as_of": as_of}}


def _day(value: Any) -> date | None:
    match = re.match(r"(\d{4})-(\d{2})-(\d{2})", str(value or ""))
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def teacher(program: str, name: str) -> Any:
    """The teacher LM of `name` ("none": no teacher, or "rules") for `program`."""
    if name == "none":
        return None
    from evals.learner import learner_lm

    if program == "query":
        return learner_lm("rules/teacher", rules=plan_rules)
    from evals.reconcile import load_cases, oracle_responder

    oracle = oracle_responder(load_cases())
    return learner_lm(
        "rules/teacher", rules=lambda call: oracle(call) if "ops" in call.output_fields else None
    )
