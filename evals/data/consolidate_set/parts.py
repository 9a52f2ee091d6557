"""Parts: one statement was written down in pieces (a name in one memory, its date or number in
another), so the careful answer is one MERGE whose sentence holds every piece."""

from __future__ import annotations

from datetime import date

from evals.data.consolidate_set.kit import CITIES, ago, case, day, group, memory

SISTERS = ["Lena", "Marta", "Sofia", "Clara", "Nadia", "Irene"]
SPOUSES = ["Daniel", "Amara", "Luca", "Yara", "Jonah", "Marisol"]


def sister_name_and_birthday(rng, p, today):
    sister = rng.choice(SISTERS)
    born = day(rng, date(1988, 1, 1), 3000)
    items = [
        memory(f"{p} has a younger sister named {sister}.", ago(today, 600), "profile", 4),
        memory(
            f"{p}'s younger sister was born on {born:%B} {born.day}, {born.year}.", ago(today, 50), "profile"
        ),
    ]
    merged = f"{p}'s younger sister {sister} was born on {born:%B} {born.day}, {born.year}."
    return case(rng, today, items, [group("MERGE", [0, 1], [sister, f"{born:%B}", str(born.year)], merged)])


def flight_code_and_date(rng, p, today):
    city = rng.choice(CITIES)
    code = f"{rng.choice(['TP', 'LH', 'BA', 'KL'])}{rng.randrange(100, 999)}"
    leaves = day(rng, today, 60)
    items = [
        memory(f"{p} booked flight {code} to {city}.", ago(today, 3), "event", 1),
        memory(
            f"{p}'s flight to {city} leaves on {leaves:%B} {leaves.day}, {leaves.year}.",
            ago(today, 2),
            "event",
        ),
    ]
    merged = f"{p} booked flight {code} to {city}, leaving on {leaves:%B} {leaves.day}, {leaves.year}."
    return case(rng, today, items, [group("MERGE", [0, 1], [code, city, f"{leaves:%B}"], merged)])


def wedding_year_and_anniversary(rng, p, today):
    spouse = rng.choice(SPOUSES)
    year = rng.randrange(2008, 2020)
    month, dom = rng.choice([("June", 12), ("September", 3), ("May", 27), ("October", 9)])
    items = [
        memory(f"{p} married {spouse} in {year}.", ago(today, 700), "profile", 6),
        memory(f"{p}'s wedding anniversary is on {month} {dom}.", ago(today, 100), "profile", 2),
    ]
    merged = f"{p} married {spouse} on {month} {dom}, {year}."
    return case(rng, today, items, [group("MERGE", [0, 1], [spouse, month, str(dom), str(year)], merged)])


def locker_number_and_code(rng, p, today):
    number, code = rng.randrange(10, 300), rng.randrange(1000, 9999)
    items = [
        memory(f"{p}'s locker at the gym is number {number}.", ago(today, 80), "fact", 1),
        memory(f"The combination of {p}'s gym locker is {code}.", ago(today, 70), "fact", 0),
    ]
    merged = f"{p}'s gym locker is number {number}, with the combination {code}."
    return case(rng, today, items, [group("MERGE", [0, 1], [str(number), str(code)], merged)])


TEMPLATES = [
    sister_name_and_birthday,
    flight_code_and_date,
    wedding_year_and_anniversary,
    locker_number_and_code,
]
