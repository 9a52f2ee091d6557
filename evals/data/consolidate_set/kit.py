"""Building blocks for consolidation cases: memories, groups and the case record.

A template lists its memories in a natural order and names its groups by position in that
list; `case` shuffles the memories (the order a cluster arrives in says nothing), numbers them
by alias and turns the groups into the expected decisions. Every alias a group does not cover
is expected to be kept, and the case lists that KEEP too, so `expected` is a full partition.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, PEOPLE, day

__all__ = ["CITIES", "EMPLOYERS", "PEOPLE", "ago", "case", "day", "group", "memory"]


def ago(today: date, days: int) -> date:
    return today - timedelta(days=days)


def memory(content: str, valid: date | None, kind: str = "fact", recalls: int = 0) -> dict[str, Any]:
    return {
        "content": content,
        "kind": kind,
        "valid_at": valid.isoformat() if valid else None,
        "recalls": recalls,
    }


def group(action: str, members: list[int], must_keep: list[str], content: str) -> dict[str, Any]:
    """A MERGE or SUMMARIZE of the memories at `members` (positions in the template's list);
    `must_keep` are the words the new content cannot lose, `content` one good answer (the label
    a demonstration shows; the metric reads only `must_keep`)."""
    words = [word for word in must_keep if word.lower() not in content.lower()]
    if words:
        raise ValueError(f"the reference content lacks its own must_keep terms {words}: {content!r}")
    return {"action": action, "members": members, "must_keep": must_keep, "content": content}


def case(
    rng: random.Random, today: date, items: list[dict[str, Any]], groups: list[dict[str, Any]]
) -> dict[str, Any]:
    order = list(range(len(items)))
    rng.shuffle(order)
    alias = {position: index + 1 for index, position in enumerate(order)}
    covered = [position for item in groups for position in item["members"]]
    if len(covered) != len(set(covered)) or any(len(item["members"]) < 2 for item in groups):
        raise ValueError("a group covers fewer than two memories, or two groups share one")
    expected = [
        {
            "action": item["action"],
            "aliases": sorted(alias[position] for position in item["members"]),
            "must_keep": item["must_keep"],
            "content": item["content"],
        }
        for item in groups
    ]
    kept = sorted(alias[position] for position in range(len(items)) if position not in covered)
    if kept:
        expected.append({"action": "KEEP", "aliases": kept, "must_keep": [], "content": None})
    return {
        "today": today.isoformat(),
        "memories": [{"alias": alias[position], **items[position]} for position in order],
        "expected": expected,
    }
