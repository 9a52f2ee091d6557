"""Text normalization shared by the write path and the store: content hashes, entity names,
predicates; and the one decision on text that is not valid Unicode."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from dspy_memory.errors import InvalidInputError

_NOT_WORD = re.compile(r"[^\w]+")
# A Python str holds every character as one code point, so any code point in this range is a
# lone surrogate (e.g. from bytes decoded with errors="surrogateescape", or half of a UTF-16
# pair): it has no UTF-8 form, so SQLite, the embedder and JSON cannot take it.
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def shown(value: Any, width: int = 60) -> str:
    """A short, safe rendering of a user's value for an error message: never the value's own
    __repr__ (which may be huge, or raise), never a lone surrogate (repr escapes them)."""
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if type(value) in (str, int, float, bool) or value is None:
        text = repr(value)
        return text if len(text) <= width else f"{text[: width - 4]}...{text[0]}"
    return f"a value of type {type(value).__name__}"


def surrogate_at(text: str) -> int | None:
    """Where the first lone surrogate of `text` is, or None when `text` is valid Unicode."""
    match = _SURROGATE.search(text)
    return match.start() if match else None


def valid_text(value: Any, name: str, *, error: type[Exception] = InvalidInputError) -> str:
    """`value` unchanged if it is a string that can be stored, else a clear `error`.

    Lone surrogates are refused, never repaired: what a user asks us to remember is stored
    exactly as given or not at all. (Queries are repaired instead: see `searchable`.)"""
    if not isinstance(value, str):
        raise error(f"{name} must be a string, not {type(value).__name__}")
    position = surrogate_at(value)
    if position is not None:
        raise error(
            f"{name} is not valid Unicode: it has a lone surrogate {value[position]!r} at position "
            f"{position} (bytes decoded with errors='surrogateescape', or half of a UTF-16 pair); "
            "decode the input properly, e.g. bytes.decode('utf-8', errors='replace')"
        )
    return value


def searchable(query: str) -> str:
    """A search query with each lone surrogate replaced by U+FFFD: nothing is stored, and the
    rest of the query can still be searched."""
    return _SURROGATE.sub(REPLACEMENT, query) if surrogate_at(query) is not None else query


def content_hash(content: str) -> str:
    """Hash of a memory's text, insensitive to case and whitespace (for de-duplication)."""
    normalized = " ".join(content.split()).casefold()
    # surrogatepass: any str hashes (text with a lone surrogate is refused where it enters, not here)
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()


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
    """A datetime as YYYY-MM-DD, for text shown to people and LMs (4-digit years, which
    strftime("%Y") does not pad on Linux)."""
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}" if value else missing


def normalize_name(name: str) -> str:
    """The key entities are de-duplicated by: case, accents, punctuation and spacing ignored
    ("Ada  Lovelace", "ada lovelace." and "Ada Lovelace" are one entity)."""
    decomposed = unicodedata.normalize("NFKD", name)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_NOT_WORD.sub(" ", plain.casefold()).split())


def normalize_predicate(predicate: str) -> str:
    """Predicates are snake_case ("Lives In" -> "lives_in") so timelines can group them."""
    return "_".join(normalize_name(predicate).split())[:64]


def check_id(memory_id: Any, name: str = "memory_id") -> str:
    """A memory id as given by add/search: a string (unknown ids are for the caller to report)."""
    return valid_text(memory_id, name)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, else an error that lists them."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(repr, choices))}, got {shown(value)}")
    return value


def check_flag(value: Any, name: str, *, error: type[Exception] = InvalidInputError) -> bool:
    """A True/False argument (1, 0, "yes" are refused: a flag given the wrong thing is a mistake)."""
    if not isinstance(value, bool):
        raise error(f"{name} must be True or False, not {type(value).__name__}")
    return value


def check_count(value: Any, name: str, *, low: int, high: int = 2**63 - 1) -> int:
    """An integer argument within [low, high] (bools are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{name} must be an integer from {low} to {high}, got {shown(value)}")
    return value


def is_postgres_url(location: object) -> bool:
    """Whether a store location is a PostgreSQL URL (else it is a SQLite file path)."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))
