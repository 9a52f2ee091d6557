"""Mixed: a cluster where some memories are duplicates or parts of one statement and the others
are distinct facts (or another person's): merge what belongs together, keep the rest."""

from __future__ import annotations

from evals.data.consolidate_set.kit import CITIES, EMPLOYERS, PEOPLE, ago, case, group, memory


def home_twice_and_a_job(rng, p, today):
    city, employer = rng.choice(CITIES), rng.choice(EMPLOYERS)
    items = [
        memory(f"{p} lives in {city}.", ago(today, 500), "profile", 6),
        memory(f"{p}'s home is in {city}.", ago(today, 30), "profile", 0),
        memory(f"{p} works at {employer}.", ago(today, 200), "profile", 3),
    ]
    return case(rng, today, items, [group("MERGE", [0, 1], [p, city], f"{p} lives in {city}.")])


def tea_twice_and_a_dislike(rng, p, today):
    tea = rng.choice(["sencha", "rooibos", "Earl Grey", "chai"])
    items = [
        memory(f"{p} likes {tea} tea.", ago(today, 300), "preference", 2),
        memory(f"{p}'s favourite tea is {tea}.", ago(today, 25), "preference", 1),
        memory(f"{p} dislikes coffee.", ago(today, 150), "preference", 2),
    ]
    merged = f"{p}'s favourite tea is {tea}."
    return case(rng, today, items, [group("MERGE", [0, 1], [p, tea], merged)])


def son_in_parts_and_a_friends_son(rng, p, today):
    other = rng.choice([name for name in PEOPLE if name != p])
    son, other_son = rng.sample(["Leo", "Mateo", "Kai", "Arjun", "Felix"], 2)
    year = rng.randrange(2012, 2022)
    items = [
        memory(f"{p}'s son is named {son}.", ago(today, 600), "profile", 5),
        memory(f"{p}'s son was born in {year}.", ago(today, 60), "profile", 1),
        memory(f"{other}'s son is named {other_son}.", ago(today, 100), "profile", 1),
    ]
    merged = f"{p}'s son {son} was born in {year}."
    return case(rng, today, items, [group("MERGE", [0, 1], [son, str(year)], merged)])


def two_pairs(rng, p, today):
    city = rng.choice(CITIES)
    month, dom = rng.choice([("March", 14), ("July", 4), ("October", 31), ("February", 2)])
    items = [
        memory(f"{p} was born in {city}.", ago(today, 700), "profile", 3),
        memory(f"{p}'s birthplace is {city}.", ago(today, 40), "profile", 0),
        memory(f"{p}'s birthday is on {month} {dom}.", ago(today, 400), "profile", 4),
        memory(f"{p} celebrates a birthday every {month} {dom}.", ago(today, 15), "profile", 0),
    ]
    groups = [
        group("MERGE", [0, 1], [p, city], f"{p} was born in {city}."),
        group("MERGE", [2, 3], [month, str(dom)], f"{p}'s birthday is on {month} {dom}."),
    ]
    return case(rng, today, items, groups)


TEMPLATES = [home_twice_and_a_job, tea_twice_and_a_dislike, son_in_parts_and_a_friends_son, two_pairs]
