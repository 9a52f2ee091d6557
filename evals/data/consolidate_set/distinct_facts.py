"""Distinct facts: memories of one subject that an embedding puts close together but that say
different things (two pets, two siblings, a profile), or the same thing about different
people. Nothing is a duplicate: the careful answer keeps them all."""

from __future__ import annotations

from evals.data.consolidate_set.kit import CITIES, EMPLOYERS, PEOPLE, ago, case, memory


def profile_sheet(rng, p, today):
    city, employer = rng.choice(CITIES), rng.choice(EMPLOYERS)
    items = [
        memory(f"{p} lives in {city}.", ago(today, 500), "profile", 9),
        memory(f"{p} works at {employer}.", ago(today, 300), "profile", 4),
        memory(
            f"{p} plays the {rng.choice(['piano', 'cello', 'guitar'])} in a local band.",
            ago(today, 90),
            "fact",
            1,
        ),
    ]
    return case(rng, today, items, [])


def a_cat_and_a_dog(rng, p, today):
    cat, dog = rng.choice(["Miso", "Oreo", "Sardine"]), rng.choice(["Pixel", "Biscuit", "Toffee"])
    items = [
        memory(f"{p} has a cat named {cat}.", ago(today, 400), "profile", 3),
        memory(f"{p} has a dog named {dog}.", ago(today, 60), "profile", 2),
    ]
    return case(rng, today, items, [])


def brother_and_sister_elsewhere(rng, p, today):
    a, b = rng.sample(CITIES, 2)
    brother, sister = rng.choice(["Marco", "Jun", "Idris"]), rng.choice(["Lena", "Sofia", "Nadia"])
    items = [
        memory(f"{p}'s brother {brother} lives in {a}.", ago(today, 250), "profile", 2),
        memory(f"{p}'s sister {sister} lives in {b}.", ago(today, 180), "profile", 1),
        memory(f"{p} visits family in {a} every December.", ago(today, 30), "fact", 0),
    ]
    return case(rng, today, items, [])


def same_allergy_two_people(rng, p, today):
    other = rng.choice([name for name in PEOPLE if name != p])
    nut = rng.choice(["peanuts", "shellfish", "sesame"])
    items = [
        memory(f"{p} is allergic to {nut}.", ago(today, 300), "profile", 4),
        memory(f"{other} is allergic to {nut}.", ago(today, 100), "profile", 1),
    ]
    return case(rng, today, items, [])


TEMPLATES = [profile_sheet, a_cat_and_a_dog, brother_and_sister_elsewhere, same_allergy_two_people]
