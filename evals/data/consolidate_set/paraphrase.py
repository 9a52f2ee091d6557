"""Paraphrase: two or three memories say the same thing in other words (what a write path that
missed a NOOP leaves behind), so the careful answer is one MERGE whose sentence keeps every
detail any of them adds."""

from __future__ import annotations

from evals.data.consolidate_set.kit import EMPLOYERS, ago, case, group, memory

NUTS = ["peanuts", "cashews", "walnuts", "hazelnuts"]
DOGS = [("Pixel", "beagle"), ("Biscuit", "corgi"), ("Nala", "greyhound"), ("Rocket", "border collie")]


def allergy_said_three_ways(rng, p, today):
    nut = rng.choice(NUTS)
    items = [
        memory(f"{p} is allergic to {nut}.", ago(today, 400), "profile", 5),
        memory(f"{p} has an allergy to {nut}.", ago(today, 90), "profile", 1),
        memory(f"{p} must avoid {nut} because they cause an allergic reaction.", ago(today, 12), "profile"),
    ]
    merged = f"{p} is allergic to {nut} and must avoid them."
    return case(rng, today, items, [group("MERGE", [0, 1, 2], [p, nut], merged)])


def employer_reworded(rng, p, today):
    employer = rng.choice(EMPLOYERS)
    items = [
        memory(f"{p} works at {employer}.", ago(today, 300), "profile", 3),
        memory(f"{p} is employed by {employer}.", ago(today, 20), "profile", 0),
    ]
    return case(rng, today, items, [group("MERGE", [0, 1], [p, employer], f"{p} works at {employer}.")])


def dog_with_breed_added(rng, p, today):
    name, breed = rng.choice(DOGS)
    items = [
        memory(f"{p} has a dog named {name}.", ago(today, 500), "profile", 7),
        memory(f"{p}'s dog {name} is a {breed}.", ago(today, 40), "profile", 1),
    ]
    merged = f"{p} has a dog named {name}, a {breed}."
    return case(rng, today, items, [group("MERGE", [0, 1], [p, name, breed], merged)])


def sunday_run_numbers(rng, p, today):
    km = rng.choice([5, 8, 10, 12, 21])
    items = [
        memory(f"{p} runs {km} km every Sunday morning.", ago(today, 200), "fact", 2),
        memory(f"Every Sunday, {p} goes for a {km}-kilometre run.", ago(today, 30), "fact", 0),
        memory(f"On Sunday mornings {p} runs {km} kilometres.", ago(today, 6), "fact", 0),
    ]
    merged = f"{p} runs {km} km every Sunday morning."
    return case(rng, today, items, [group("MERGE", [0, 1, 2], [p, str(km), "Sunday"], merged)])


TEMPLATES = [allergy_said_three_ways, employer_reworded, dog_with_breed_added, sunday_run_numbers]
