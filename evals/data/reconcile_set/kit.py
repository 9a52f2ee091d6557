"""Building blocks for reconcile cases: name pools, facts, memories and the case record.

Templates (one module per category in this package) build cases with these so every case has
the same shape: turns for the fused program, new facts for ReconcileFacts, existing memories
numbered by alias as the write path shows them, and the expected operations.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

PEOPLE = [
    "Ada",
    "Bob",
    "Carmen",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noor",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
]
CITIES = [
    "Boston",
    "Denver",
    "Austin",
    "Lisbon",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Oslo",
    "Madrid",
    "Seoul",
    "Chicago",
    "Porto",
    "Dublin",
    "Quito",
]
EMPLOYERS = [
    "Denver Health",
    "Acme Robotics",
    "the city library",
    "Blue Harbor Bank",
    "Northwind Labs",
    "St. Mary's Hospital",
    "a small bakery",
    "Globex",
    "the Oslo Opera",
    "Initech",
]
FOODS = [
    ("cheese", "cheddar and brie"),
    ("tea", "green tea, especially sencha"),
    ("pasta", "fresh pasta with pesto"),
    ("curry", "Thai green curry"),
    ("coffee", "espresso, no sugar"),
    ("bread", "sourdough rye"),
]
HOBBIES = [
    "jazz",
    "rock climbing",
    "chess",
    "pottery",
    "sailing",
    "birdwatching",
    "salsa dancing",
    "knitting",
]
PETS = [("cat", "Miso"), ("dog", "Pixel"), ("parrot", "Kiwi"), ("rabbit", "Clover"), ("dog", "Biscuit")]
SIBLINGS = ["Lena", "Marta", "Sofia", "Clara", "Nadia", "Irene"]
INSTRUMENTS = ["piano", "violin", "cello", "guitar", "flute"]
RELATIVE = [
    ("yesterday", -1),
    ("last week", -7),
    ("two weeks ago", -14),
    ("last month", -30),
    ("three days ago", -3),
]


def day(rng: random.Random, start: date = date(2024, 1, 1), span: int = 300) -> date:
    return start + timedelta(days=rng.randrange(span))


def fact(
    content: str, subject: str, predicate: str, obj: str | None, valid: date | None, kind: str = "fact"
) -> dict[str, Any]:
    return {
        "content": content,
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "valid_at": valid.isoformat() if valid else None,
        "kind": kind,
    }


def memory(alias: int, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "alias": alias,
        "content": item["content"],
        "subject": item["subject"],
        "predicate": item["predicate"],
        "valid_at": item["valid_at"],
    }


def case(
    category: str,
    person: str,
    when: date,
    turns: list[str],
    existing: list[dict[str, Any]],
    new: list[dict[str, Any]],
    ops: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    return {
        "category": category,
        "observed_at": f"{when.isoformat()} ({when.strftime('%A')})",
        "turns": [
            {"speaker": person, "text": text, "time": f"{when.isoformat()} 10:{i:02d}"}
            for i, text in enumerate(turns)
        ],
        "existing_memories": [memory(i + 1, item) for i, item in enumerate(existing)],
        "new_facts": new,
        "expected_ops": ops,
        **extra,
    }


def filler(rng: random.Random, person: str, n: int, avoid: set[str]) -> list[dict[str, Any]]:
    """Unrelated memories of the same person (what a search also returns)."""
    pool = [
        fact(
            f"{person} plays the {rng.choice(INSTRUMENTS)}.",
            person,
            "plays",
            None,
            day(rng, date(2023, 1, 1)),
        ),
        fact(
            f"{person} enjoys {rng.choice(HOBBIES)} on weekends.",
            person,
            "likes",
            None,
            day(rng, date(2023, 1, 1)),
            "preference",
        ),
        fact(
            f"{person}'s favourite city to visit is {rng.choice(CITIES)}.",
            person,
            "likes_visiting",
            None,
            day(rng, date(2023, 1, 1)),
            "preference",
        ),
    ]
    return [item for item in pool if not any(word in item["content"] for word in avoid)][:n]
