"""Old episodes: a series of events of one trip, project or illness, years ago and rarely
recalled since. The careful answer is one SUMMARIZE of the series that keeps its names, places,
dates and numbers; a lasting fact that sits in the same cluster (and is recalled) is kept."""

from __future__ import annotations

from datetime import timedelta

from evals.data.consolidate_set.kit import CITIES, ago, case, group, memory

FRIENDS = ["Tomás", "Wen", "Adebayo", "Siobhan", "Raj", "Mei"]
BUILDERS = ["Kowalski & Sons", "BrightBuild", "Casa Nova Renovations", "Oak Lane Builders"]
DOCTORS = ["Dr. Okafor", "Dr. Lindqvist", "Dr. Haddad", "Dr. Moreau"]


def _start(rng, today):
    return ago(today, rng.randrange(500, 1100))


def trip_to_a_city(rng, p, today):
    city, friend = rng.choice(CITIES), rng.choice(FRIENDS)
    start = _start(rng, today)
    items = [
        memory(f"{p} flew to {city} on {start:%B} {start.day}, {start.year}.", start, "event"),
        memory(f"{p} visited the old town museum in {city}.", start + timedelta(days=1), "event"),
        memory(f"{p} had dinner with {friend} in {city}.", start + timedelta(days=2), "event", 1),
        memory(f"{p} flew home from {city} after four days.", start + timedelta(days=4), "event"),
    ]
    summary = (
        f"In {start:%B %Y} {p} spent four days in {city}: the old town museum and a dinner with {friend}."
    )
    return case(
        rng, today, items, [group("SUMMARIZE", [0, 1, 2, 3], [city, friend, str(start.year)], summary)]
    )


def kitchen_renovation(rng, p, today):
    builder, budget = rng.choice(BUILDERS), rng.choice([8000, 12000, 15000, 20000])
    start = _start(rng, today)
    items = [
        memory(f"{p} hired {builder} to renovate the kitchen.", start, "event", 1),
        memory(f"{p}'s kitchen renovation budget was {budget} euros.", start + timedelta(days=5), "fact"),
        memory(f"{p} chose green tiles for the new kitchen.", start + timedelta(days=20), "event"),
        memory(
            f"{p}'s kitchen renovation was finished in {start + timedelta(days=70):%B %Y}.",
            start + timedelta(days=70),
            "event",
        ),
    ]
    summary = (
        f"In {start.year} {p} had the kitchen renovated by {builder} for a budget of {budget} euros, with "
        f"green tiles; it was finished in {start + timedelta(days=70):%B %Y}."
    )
    keep = [builder, str(budget), str((start + timedelta(days=70)).year)]
    return case(rng, today, items, [group("SUMMARIZE", [0, 1, 2, 3], keep, summary)])


def flu_with_a_lasting_allergy(rng, p, today):
    doctor = rng.choice(DOCTORS)
    start = _start(rng, today)
    items = [
        memory(f"{p} caught the flu on {start:%B} {start.day}, {start.year}.", start, "event"),
        memory(f"{p} saw {doctor} about the flu.", start + timedelta(days=2), "event"),
        memory(f"{p} took five days off work with the flu.", start + timedelta(days=3), "event"),
        memory(f"{p} is allergic to penicillin.", start + timedelta(days=2), "profile", 9),
    ]
    summary = f"In {start:%B %Y} {p} had the flu, saw {doctor} and took five days off work."
    return case(
        rng, today, items, [group("SUMMARIZE", [0, 1, 2], [doctor, "five", str(start.year)], summary)]
    )


def marathon_training_block(rng, p, today):
    city = rng.choice(["Berlin", "Chicago", "Lisbon", "Valencia"])
    finish = f"{rng.randrange(3, 5)}:{rng.randrange(0, 59):02d}"
    start = _start(rng, today)
    race = start + timedelta(days=110)
    items = [
        memory(f"{p} signed up for the {city} marathon.", start, "event"),
        memory(f"{p} ran 32 km as the longest training run.", start + timedelta(days=80), "event"),
        memory(f"{p} finished the {city} marathon in {finish}.", race, "event", 1),
    ]
    summary = f"{p} trained for and ran the {city} marathon in {race:%B %Y} (longest run 32 km), finishing in {finish}."
    return case(rng, today, items, [group("SUMMARIZE", [0, 1, 2], [city, finish, "32"], summary)])


TEMPLATES = [trip_to_a_city, kitchen_renovation, flu_with_a_lasting_allergy, marathon_training_block]
