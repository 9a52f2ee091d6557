"""The boosts after fusion: time in the query, who the query names, and what was said around a
strong hit. Each adds to a candidate's `final` score in place and records its part in the
candidate's details."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from dspy_memory.config import RetrievalConfig
from dspy_memory.read.temporal import asks_when, is_dated, time_window
from dspy_memory.store import Candidate, TimeView
from dspy_memory.util.timeutil import from_db

Details = dict[int, dict[str, Any]]


def boost_by_time(
    query: str,
    details: Details,
    candidates: dict[int, Candidate],
    view: TimeView,
    config: RetrievalConfig,
    contents: Callable[[Sequence[int]], dict[int, str]],
) -> None:
    """Time in the query (read/temporal.py): memories true within the window it names gain
    `temporal_weight`; for a "when" question, memories among the top `when_candidates` whose
    text (read by `contents`) dates what it says ("yesterday", "in May", "2022") gain
    `when_weight`."""
    reference = from_db(view.as_of)
    assert reference is not None
    window = time_window(query, reference) if config.temporal_weight > 0 else None
    if window is not None:
        for row_id, detail in details.items():
            try:
                moment = reference - timedelta(days=candidates[row_id].age_days)
            except OverflowError:
                continue
            if window.holds(moment):
                detail["temporal"] = 1.0
                detail["final"] += config.temporal_weight
    if config.when_weight > 0 and asks_when(query):
        ranked = sorted(details, key=lambda row_id: details[row_id]["final"], reverse=True)
        for row_id, content in contents(ranked[: config.when_candidates]).items():
            if is_dated(content):
                details[row_id]["temporal"] = 1.0
                details[row_id]["final"] += config.when_weight


def boost_said_together(details: Details, candidates: dict[int, Candidate], config: RetrievalConfig) -> None:
    """Each memory gains `said_together_weight` x the best `final` among the top
    `said_together_top` hits (itself included) whose time is within `turn_context_gap_minutes`
    of its own. The evidence for one question tends to come from one sitting of a
    conversation, so a strong hit vouches for what was said around it."""
    if config.said_together_weight <= 0 or not details:
        return
    within = config.turn_context_gap_minutes / 1440
    leaders = sorted(details, key=lambda row_id: details[row_id]["final"], reverse=True)
    strong = [
        (candidates[row_id].age_days, details[row_id]["final"])
        for row_id in leaders[: config.said_together_top]
    ]
    for row_id, detail in details.items():
        age = candidates[row_id].age_days
        best = max((final for when, final in strong if abs(when - age) <= within), default=0.0)
        detail["said_together"] = best
        detail["final"] += config.said_together_weight * best


def boost_named_speaker(
    query: str,
    details: Details,
    config: RetrievalConfig,
    speakers: Callable[[Sequence[int]], dict[int, set[str]]],
) -> None:
    """Memories said by someone the query names gain `speaker_weight`: a question about a
    person is most often answered by what that person said. A speaker (a source episode's
    `name`, read by `speakers`) is named when the query has the first word of the name (people
    are called by first names; the whole name includes it), as a word, in any case."""
    if config.speaker_weight <= 0 or not details:
        return
    words = set(re.findall(r"\w+", query.casefold()))
    found = speakers(list(details))
    named = {name for names in found.values() for name in names if _first_word(name) in words}
    for row_id, names in found.items():
        if names & named:
            details[row_id]["speaker"] = 1.0
            details[row_id]["final"] += config.speaker_weight


def _first_word(name: str) -> str | None:
    first = re.search(r"\w+", name.casefold())
    return first.group(0) if first else None
