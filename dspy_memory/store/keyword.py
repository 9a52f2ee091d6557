"""Search terms of a query, cut where the keyword index cuts words. Shared by the backends;
user text reaches an index only as these terms, quoted by the backend."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from dspy_memory.errors import InvalidInputError

# ASCII letters and digits: FTS5's unicode61 tokenizer splits on every other ASCII character,
# and a quoted string of separators would be an empty phrase.
_ASCII_SEPARATOR = re.compile(r"[^A-Za-z0-9\x80-\U0010ffff]")


class _Separators:
    """Which non-ASCII characters the index's tokenizer (unicode61, Unicode 6.1 tables) splits
    words on, asked of FTS5 itself once per character. Python's tables are newer and disagree:
    a code point unassigned in Python's Unicode, an emoji newer than 6.1 or a combining accent
    is part of a word in the index, so a query must keep it."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._conn: Any = None

    def of(self, text: str) -> set[str]:
        wanted = {ch for ch in text if not ch.isascii()}
        with self._lock:
            for ch in wanted - self._known.keys():
                self._known[ch] = self._splits(ch)
            return {ch for ch in wanted if self._known[ch]}

    def _splits(self, ch: str) -> bool:
        if "\ud800" <= ch <= "\udfff":  # a lone surrogate is no text (searchable() drops them)
            return True
        if self._conn is None:
            from dspy_memory.store.sqlite.connection import resolve_driver

            self._conn = resolve_driver().connect(":memory:", check_same_thread=False)
            self._conn.execute(
                "CREATE VIRTUAL TABLE probe USING fts5(x, tokenize = 'unicode61 remove_diacritics 2')"
            )
            self._conn.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab(probe, 'row')")
        self._conn.execute("DELETE FROM probe")
        self._conn.execute("INSERT INTO probe (x) VALUES (?)", (f"q{ch}z",))
        return self._conn.execute("SELECT count(*) FROM probe_terms").fetchone()[0] != 1


_SEPARATORS = _Separators()


def _words(text: str) -> list[str]:
    """`text` cut into words where the index's tokenizer cuts it."""
    cut = _ASCII_SEPARATOR.sub(" ", text)
    if not cut.isascii():
        separators = _SEPARATORS.of(cut)
        if separators:
            cut = "".join(" " if ch in separators else ch for ch in cut)
    return cut.split()


# Dropped from keyword queries: they match most rows (the slowest part of BM25) while adding
# almost nothing to the ranking. A query made only of stopwords keeps them.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves
    """.split()
)


def query_terms(text: str, *, drop_stopwords: bool = True, max_terms: int = 32) -> list[str]:
    """Lower-cased, de-duplicated search terms of `text`, in order of first appearance."""
    if not isinstance(text, str):
        raise InvalidInputError(f"a search query must be a string, not {type(text).__name__}")
    terms = list(dict.fromkeys(word.lower() for word in _words(text)))
    if drop_stopwords:
        content = [term for term in terms if term not in STOPWORDS]
        terms = content or terms
    return terms[:max_terms]


def budgeted_terms(
    terms: Sequence[str], estimates: Sequence[float], budget: float
) -> tuple[list[str], bool] | None:
    """Which of `terms` to rank, given how many rows each is `estimated` to match, so that the
    rows ranked stay within `budget` (ranking costs per matched row): rarest first while they
    fit (the most common then select nothing, as in Elasticsearch's common-terms query), or every
    term required when even the rarest matches more. None when no term matches anything."""
    present = sorted(
        (estimate, index, term)
        for index, (term, estimate) in enumerate(zip(terms, estimates))
        if estimate > 0
    )
    if not present:
        return None
    if present[0][0] > budget:
        return [term for _, _, term in present], True
    chosen: list[str] = []
    spent = 0.0
    for estimate, _, term in present:
        if chosen and spent + estimate > budget:
            break
        chosen.append(term)
        spent += estimate
    return chosen, False
