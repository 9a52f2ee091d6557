"""Text normalization shared by the write path and the store: content hashes, entity names,
predicates."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

_NOT_WORD = re.compile(r"[^\w]+")


def content_hash(content: str) -> str:
    """Hash of a memory's text, insensitive to case and whitespace (for de-duplication)."""
    normalized = " ".join(content.split()).casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


# Relations that hold one value at a time: a new value replaces the old one, and two current
# values for one subject contradict each other (context assembly sets them apart).
SINGLE_VALUED_PREDICATES = frozenset(
    {
        "lives_in",
        "home",
        "address",
        "works_at",
        "employer",
        "job",
        "job_title",
        "works_shift",
        "age",
        "birthday",
        "married_to",
        "partner",
        "phone",
        "email",
        "status",
        "diet",
        "car",
    }
)


def day(value: Any, missing: str = "?") -> str:
    """A datetime as YYYY-MM-DD, for text shown to people and LMs."""
    return value.strftime("%Y-%m-%d") if value else missing


def normalize_name(name: str) -> str:
    """The key entities are de-duplicated by: case, accents, punctuation and spacing ignored
    ("Ada  Lovelace", "ada lovelace." and "Ada Lovelace" are one entity)."""
    decomposed = unicodedata.normalize("NFKD", name)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_NOT_WORD.sub(" ", plain.casefold()).split())


def normalize_predicate(predicate: str) -> str:
    """Predicates are snake_case ("Lives In" -> "lives_in") so timelines can group them."""
    return "_".join(normalize_name(predicate).split())[:64]
