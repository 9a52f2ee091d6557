"""The first ten templates (one per category), kept as the first family of each category."""

from __future__ import annotations

from datetime import date, timedelta

from evals.data.reconcile_set.kit import (
    CITIES,
    EMPLOYERS,
    FOODS,
    HOBBIES,
    PEOPLE,
    PETS,
    RELATIVE,
    SIBLINGS,
    case,
    day,
    fact,
    filler,
)


def paraphrase(rng, p, when):
    city = rng.choice(CITIES)
    old = fact(f"{p} lives in {city}.", p, "lives_in", city, day(rng, date(2023, 1, 1)), "profile")
    existing = [*filler(rng, p, rng.randrange(2), {city}), old]
    rng.shuffle(existing)
    phrasing = rng.choice(
        [f"My home is in {city}.", f"I'm based in {city}, as you know.", f"Yes, {city} is where I live."]
    )
    new = [fact(f"{p}'s home is in {city}.", p, "lives_in", city, when, "profile")]
    return case(
        "paraphrase",
        p,
        when,
        [phrasing],
        existing,
        new,
        [{"action": "NOOP", "target": existing.index(old) + 1}],
    )


def refinement(rng, p, when):
    general, specific = rng.choice(FOODS)
    old = fact(f"{p} likes {general}.", p, "likes", general, day(rng, date(2023, 1, 1)), "preference")
    existing = [*filler(rng, p, rng.randrange(3), {general}), old]
    rng.shuffle(existing)
    new = [fact(f"{p} likes {specific}.", p, "likes", general, when, "preference")]
    return case(
        "refinement",
        p,
        when,
        [f"When it comes to {general}, I mean {specific}."],
        existing,
        new,
        [{"action": "UPDATE", "target": existing.index(old) + 1}],
    )


def change(rng, p, when):
    a, b = rng.sample(CITIES, 2)
    old = fact(f"{p} lives in {a}.", p, "lives_in", a, day(rng, date(2023, 1, 1)), "profile")
    existing = [*filler(rng, p, rng.randrange(3), {a, b}), old]
    rng.shuffle(existing)
    moved = when - timedelta(days=rng.randrange(1, 20))
    new = [fact(f"{p} moved to {b} on {moved.isoformat()}.", p, "lives_in", b, moved, "profile")]
    return case(
        "change",
        p,
        when,
        [f"Big news: I left {a} and moved to {b} on {moved.strftime('%B %d')}."],
        existing,
        new,
        [{"action": "INVALIDATE", "target": existing.index(old) + 1, "correction": False}],
    )


def correction(rng, p, when):
    wrong, right = rng.sample(SIBLINGS, 2)
    old = fact(f"{p}'s sister is named {wrong}.", p, "sister", wrong, day(rng, date(2023, 1, 1)))
    existing = [*filler(rng, p, rng.randrange(3), {wrong, right}), old]
    rng.shuffle(existing)
    new = [fact(f"{p}'s sister is named {right}.", p, "sister", right, None)]
    return case(
        "correction",
        p,
        when,
        [f"Sorry, I misspoke earlier: my sister is {right}, not {wrong}."],
        existing,
        new,
        [{"action": "INVALIDATE", "target": existing.index(old) + 1, "correction": True}],
    )


def forget(rng, p, when):
    hobby = rng.choice(HOBBIES)
    old = fact(f"{p} enjoys {hobby}.", p, "likes", hobby, day(rng, date(2023, 1, 1)), "preference")
    existing = [*filler(rng, p, 1 + rng.randrange(2), {hobby}), old]
    rng.shuffle(existing)
    request = rng.choice(
        [
            f"Please forget that I like {hobby}.",
            f"Delete what you know about me and {hobby}.",
            f"Don't remember the {hobby} thing anymore, please.",
        ]
    )
    return case(
        "forget", p, when, [request], existing, [], [{"action": "DELETE", "target": existing.index(old) + 1}]
    )


def unrelated(rng, p, when):
    kind, name = rng.choice(PETS)
    existing = filler(rng, p, 2 + rng.randrange(2), {name})
    new = [fact(f"{p} has a {kind} named {name}.", p, "has_pet", name, when, "profile")]
    return case(
        "unrelated",
        p,
        when,
        [f"I just adopted a {kind}, we call him {name}!"],
        existing,
        new,
        [{"action": "ADD"}],
    )


def other_person(rng, p, when):
    q = rng.choice([name for name in PEOPLE if name != p])
    a, b = rng.sample(CITIES, 2)
    theirs = fact(f"{q} lives in {a}.", q, "lives_in", a, day(rng, date(2023, 1, 1)), "profile")
    existing = [theirs, *filler(rng, p, rng.randrange(2), {a, b})]
    new = [fact(f"{p} lives in {b}.", p, "lives_in", b, when, "profile")]
    return case(
        "same_predicate_other_person",
        p,
        when,
        [f"My friend {q} lives in {a}; I live in {b} myself."],
        existing,
        new,
        [{"action": "ADD"}],
    )


def relative_date(rng, p, when):
    employer = rng.choice(EMPLOYERS)
    phrase, offset = rng.choice(RELATIVE)
    started = when + timedelta(days=offset)
    existing = filler(rng, p, 1 + rng.randrange(2), {employer})
    new = [
        fact(
            f"{p} started working at {employer} on {started.isoformat()}.",
            p,
            "works_at",
            employer,
            started,
            "profile",
        )
    ]
    return case(
        "relative_date",
        p,
        when,
        [f"I started my new job at {employer} {phrase}."],
        existing,
        new,
        [{"action": "ADD"}],
        expected_valid_at=started.isoformat(),
    )


def several(rng, p, when):
    a, b = rng.sample(CITIES, 2)
    general, specific = rng.choice(FOODS)
    kind, name = rng.choice(PETS)
    home = fact(f"{p} lives in {a}.", p, "lives_in", a, day(rng, date(2023, 1, 1)), "profile")
    food = fact(f"{p} likes {general}.", p, "likes", general, day(rng, date(2023, 1, 1)), "preference")
    existing = [home, food]
    rng.shuffle(existing)
    new = [
        fact(f"{p} moved to {b}.", p, "lives_in", b, when, "profile"),
        fact(f"{p} likes {general}.", p, "likes", general, when, "preference"),
        fact(f"{p} has a {kind} named {name}.", p, "has_pet", name, when, "profile"),
    ]
    ops = [
        {"action": "INVALIDATE", "target": existing.index(home) + 1, "correction": False},
        {"action": "NOOP", "target": existing.index(food) + 1},
        {"action": "ADD"},
    ]
    return case(
        "several_facts",
        p,
        when,
        [f"Updates: I moved to {b}, I still love {general}, and I got a {kind} called {name}."],
        existing,
        new,
        ops,
    )


def distractors(rng, p, when):
    q, r = rng.sample([name for name in PEOPLE if name != p], 2)
    a, b = rng.sample(CITIES, 2)
    employer, other = rng.sample(EMPLOYERS, 2)
    mine = fact(f"{p} works at {employer}.", p, "works_at", employer, day(rng, date(2023, 1, 1)), "profile")
    existing = [
        fact(f"{q} works at {other}.", q, "works_at", other, day(rng, date(2023, 1, 1)), "profile"),
        fact(f"{p} visited {a} last year.", p, "visited", a, day(rng, date(2023, 1, 1)), "event"),
        mine,
        fact(
            f"{r} used to work at {employer}.", r, "worked_at", employer, day(rng, date(2022, 1, 1)), "event"
        ),
    ]
    rng.shuffle(existing)
    new = [fact(f"{p} works at {other} since {when.isoformat()}.", p, "works_at", other, when, "profile")]
    return case(
        "distractors",
        p,
        when,
        [f"I left {employer}; from today I work at {other}, with {q}."],
        existing,
        new,
        [{"action": "INVALIDATE", "target": existing.index(mine) + 1, "correction": False}],
    )
