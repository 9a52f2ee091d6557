"""Contradiction: two current memories give different values of one slot (two homes, two
employers, two numbers). Which one holds is the write path's decision (INVALIDATE, with dates
and history); a merge would either pick one silently or glue both into a sentence that is
false. The careful answer keeps both."""

from __future__ import annotations

from evals.data.consolidate_set.kit import CITIES, EMPLOYERS, ago, case, memory


def lives_here_moved_there(rng, p, today):
    a, b = rng.sample(CITIES, 2)
    moved = ago(today, rng.randrange(20, 90))
    items = [
        memory(f"{p} lives in {a}.", ago(today, 700), "profile", 8),
        memory(f"{p} moved to {b} in {moved:%B %Y}.", moved, "profile", 1),
    ]
    return case(rng, today, items, [])


def two_employers(rng, p, today):
    first, second = rng.sample(EMPLOYERS, 2)
    items = [
        memory(f"{p} works at {first}.", ago(today, 500), "profile", 5),
        memory(f"{p} started a new job at {second}.", ago(today, 15), "profile", 0),
    ]
    return case(rng, today, items, [])


def vegetarian_then_steak(rng, p, today):
    items = [
        memory(f"{p} is a vegetarian.", ago(today, 800), "profile", 6),
        memory(f"{p} orders a steak every Friday.", ago(today, 40), "preference", 1),
        memory(f"{p} likes cooking Thai food.", ago(today, 200), "preference", 2),
    ]
    return case(rng, today, items, [])


def two_phone_numbers(rng, p, today):
    old, new = (f"+1 555 {number}" for number in rng.sample(range(1000, 9999), 2))
    items = [
        memory(f"{p}'s phone number is {old}.", ago(today, 400), "profile", 2),
        memory(f"{p}'s phone number is {new}.", ago(today, 10), "profile", 0),
    ]
    return case(rng, today, items, [])


TEMPLATES = [lives_here_moved_there, two_employers, vegetarian_then_steak, two_phone_numbers]
