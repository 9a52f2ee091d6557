"""Seeded synthetic memories and questions for store benchmarks.

Fact-like sentences of 8-16 words with people, places, organizations, activities and dates, so
term frequencies look like a real memory store (a few very common words, a long tail of names)
rather than random words. Questions are generated from a chosen memory so each has an answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FIRST = (
    "Ada Alan Amara Anders Anika Aria Arjun Bea Bruno Carmen Chen Clara Dario Dev Elif Elena Emil "
    "Esme Farah Felix Freya Gabriel Hana Hugo Ines Ivan Jonas Julia Kai Kenji Lara Leon Lina Luca "
    "Maya Mateo Mei Milo Nadia Niko Noor Omar Oskar Pablo Priya Quinn Rafael Rosa Sami Sara Soren "
    "Tariq Tess Uma Viktor Wen Yara Yusuf Zara Zoe"
).split()
LAST = (
    "Abe Baker Costa Dubois Eriksen Fischer Garcia Haddad Ito Jensen Kowalski Larsen Moreau Nakamura "
    "Okafor Petrov Quispe Rossi Santos Tanaka Ueda Varga Weber Xu Yilmaz Zhang"
).split()
CITIES = (
    "Denver Boston Lisbon Osaka Nairobi Oslo Lyon Austin Seattle Porto Kyoto Dublin Montreal Seville "
    "Krakow Tallinn Bergen Quito Hanoi Perth Utrecht Valencia Bilbao Tucson Halifax Cusco Ghent Split"
).split()
ORGS = (
    "Acme Globex Initech Umbrella Hooli Stark Wayne Wonka Tyrell Cyberdyne Soylent Vandelay Pied "
    "Piper Dunder Mifflin Aperture Black Mesa Gringotts Nakatomi"
).split()
JOBS = (
    "nurse teacher engineer pilot chef architect baker librarian paramedic designer carpenter "
    "pharmacist translator journalist electrician veterinarian"
).split()
ACTIVITIES = (
    "pottery climbing salsa chess sailing birdwatching kayaking woodworking calligraphy fencing "
    "gardening knitting surfing photography archery origami beekeeping skating"
).split()
FOODS = (
    "ramen tacos paella sushi pho curry lasagna falafel pierogi dumplings risotto ceviche goulash "
    "bibimbap shakshuka gnocchi"
).split()
PETS = "dog cat parrot rabbit tortoise hamster ferret goldfish".split()
PET_NAMES = "Pixel Biscuit Mango Pepper Nimbus Waffles Comet Juniper Olive Ziggy Maple Tofu".split()
MONTHS = ("January February March April May June July August September October November December").split()
RELATIONS = "sister brother mother father cousin friend neighbor colleague".split()
INSTRUMENTS = "violin cello piano ukulele drums saxophone trumpet harp banjo flute".split()
LANGUAGES = "Portuguese Japanese Swahili Norwegian Turkish Polish Korean Italian Greek Dutch".split()

TEMPLATES = (
    ("{a} moved to {city} in {month} {year}.", "Where did {a} move in {month} {year}?"),
    ("{a} works as a {job} at {org} in {city}.", "Where does {a} work as a {job}?"),
    ("{a} started taking {activity} classes in {month} {year}.", "When did {a} start {activity} classes?"),
    ("{a} prefers {food} over {food2} when eating out with {b}.", "What food does {a} prefer with {b}?"),
    ("{a} adopted a {pet} named {pet_name} in {month} {year}.", "What is the name of the {pet} {a} adopted?"),
    ("{a}'s {relation} {b} lives in {city} and works at {org}.", "Where does {a}'s {relation} {b} live?"),
    ("{a} is learning to play the {instrument} with help from {b}.", "Which instrument is {a} learning?"),
    ("{a} visited {city} with {b} for a {activity} trip in {month}.", "Who went to {city} with {a}?"),
    ("{a} is studying {language} to prepare for a move to {city}.", "Which language is {a} studying?"),
    (
        "{a} ran a half marathon in {city} on {day} {month} {year}.",
        "When did {a} run a half marathon in {city}?",
    ),
    ("{a} is allergic to {food} and avoids it at {org} lunches.", "What is {a} allergic to?"),
    ("{a} met {b} at a {activity} meetup in {city} last {month}.", "Where did {a} meet {b}?"),
    ("{a} gave a talk about {activity} at {org} in {month} {year}.", "What did {a} talk about at {org}?"),
    (
        "{a} bought a used car from {b} for {price} dollars in {month}.",
        "How much did {a} pay {b} for the car?",
    ),
    (
        "{a} plans to spend {month} {year} hiking near {city} with {b}.",
        "Where is {a} hiking in {month} {year}?",
    ),
    (
        "{a}'s favorite {food} place in {city} closed in {month} {year}.",
        "Which place of {a} closed in {city}?",
    ),
    ("{a} switched from {org} to {org2} as a senior {job} in {year}.", "Where did {a} work before {org2}?"),
    (
        "{a} teaches {language} to {b}'s children on {weekday} evenings.",
        "What does {a} teach {b}'s children?",
    ),
    ("{a} broke a wrist while {activity} in {city} during {month} {year}.", "How did {a} break a wrist?"),
    ("{a} and {b} got married in {city} on {day} {month} {year}.", "Where did {a} and {b} get married?"),
)
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


@dataclass
class SyntheticMemory:
    text: str
    question: str


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def generate(count: int, *, seed: int = 0) -> list[SyntheticMemory]:
    """`count` distinct memories, each with a question it answers."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[SyntheticMemory] = []
    while len(out) < count:
        text_template, question_template = rng.choice(TEMPLATES)
        org, org2 = rng.sample(ORGS, 2)
        food, food2 = rng.sample(FOODS, 2)
        slots = {
            "a": _person(rng),
            "b": _person(rng),
            "city": rng.choice(CITIES),
            "org": org,
            "org2": org2,
            "job": rng.choice(JOBS),
            "activity": rng.choice(ACTIVITIES),
            "food": food,
            "food2": food2,
            "pet": rng.choice(PETS),
            "pet_name": rng.choice(PET_NAMES),
            "month": rng.choice(MONTHS),
            "year": rng.randint(2015, 2025),
            "day": rng.randint(1, 28),
            "relation": rng.choice(RELATIONS),
            "instrument": rng.choice(INSTRUMENTS),
            "language": rng.choice(LANGUAGES),
            "price": rng.randrange(2000, 30000, 250),
            "weekday": rng.choice(WEEKDAYS),
        }
        text = text_template.format(**slots)
        if text in seen:
            continue
        seen.add(text)
        out.append(SyntheticMemory(text=text, question=question_template.format(**slots)))
    return out
