"""BM25 with the user's statistics, computed from FTS5's own scores.

FTS5's bm25() takes its statistics from the whole file: the row count, each term's document
frequency and the average row length. In a file several users share, one user's ranking would
then depend on what the others wrote (a word common among them weighs little for everyone), and
a user would rank differently alone in a file than sharing one. So each query term is scored
on its own, and every file-wide statistic in its score is swapped for the user's (as
PostgreSQL ranks, store/postgres/keywords.py), or, for a scope without a user, the scope's.

FTS5 scores a term t in a row d as  s = I(t) (k1 + 1) F / (F + K(d)),  K(d) = k1 (1 - b + b |d| /
avgdl),  F the term's column-weighted count in d. Then:
- I(t) (k1 + 1), the bound: the same term scored again with huge column weights (F >> K);
- F / K(d) = s / (bound - s);
- K(d): |d| from the row's FTS5 size record, avgdl the file's (its averages record);
- the user's score: I from the user's row count and the rows of it whose own text holds t (as
  PostgreSQL counts: a context repeats its neighbours' words), K from its mean |d|, F as above.
The scores are the same, to rounding, as those of the same rows in a file of their own
(tests/test_keyword_partition.py).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

# FTS5's bm25() constants (fts5_aux.c); its IDF floor for a term in over half the rows.
K1, B, IDF_FLOOR = 1.2, 0.75, 1e-6
# Column weight that makes F dwarf K: an error of K / (WEIGHT F) < 1e-9 on the bound.
_HUGE = 1e12
# FTS5's averages record (the file's row count, then each column's token count).
_AVERAGES_ID = 1


def varints(blob: bytes) -> np.ndarray:
    """The SQLite-format varints in `blob` (FTS5's size and averages records): big-endian 7-bit
    groups, the high bit set on all but the last. No count here needs the ninth byte's special
    case (2^56)."""
    data = np.frombuffer(blob, np.uint8).astype(np.int64)
    if not len(data):
        return np.zeros(0, np.int64)
    ends = data < 0x80
    varint = np.concatenate(([0], np.cumsum(ends)[:-1]))  # which varint each byte is of
    last = np.flatnonzero(ends)  # each varint's last byte
    shift = 7 * (last[varint] - np.arange(len(data)))
    return np.bincount(varint, weights=(data & 0x7F) << shift).astype(np.int64)


class ScopeStatistics:
    """The row count and mean row length of the rows of a scope (those an FTS5 match of its
    scope tokens finds), read from their size records.

    Cached while the scope's size, as `rows` tells it, is the one they were read at (within 10%
    once the scope holds over `exact_rows` rows: its mean then barely moves, and reading it
    costs ~1 us a row)."""

    def __init__(self, *, exact_rows: int) -> None:
        self.exact_rows = exact_rows
        self._cache: dict[str, tuple[int, float, int]] = {}
        self._lock = threading.Lock()

    def of(self, conn: Any, match: str, *, rows: int, tolerant: bool = True) -> tuple[int, float]:
        """(rows, mean length) of the rows FTS5 `match` finds (a match of scope tokens only).
        `rows`: a count that changes when the scope does; `tolerant` False when it counts more
        than the scope (any change then reads the scope again)."""
        with self._lock:
            cached = self._cache.get(match)
        if cached is not None:
            counted, length, seen = cached
            if seen == rows or (tolerant and rows > self.exact_rows and abs(seen - rows) <= 0.1 * seen):
                return counted, length
        sizes = tuple(
            row[0]
            for row in conn.execute(
                "SELECT d.sz FROM memories_fts AS f JOIN memories_fts_docsize AS d ON d.id = f.rowid "
                "WHERE memories_fts MATCH ?",
                (match,),
            )
        )
        counted = len(sizes)
        length = (float(_sizes(sizes).sum()) / counted if counted else 0.0) or 1.0
        with self._lock:
            self._cache[match] = (counted, length, rows)
        return counted, length

    def clear(self) -> None:
        """Forget what is cached (scope tokens name users: a purge must not leave them here)."""
        with self._lock:
            self._cache.clear()


def file_average_length(conn: Any) -> float:
    """The file's mean row length, as bm25() computes it."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = ?", (_AVERAGES_ID,)).fetchone()
    if row is None or not row[0]:
        return 1.0
    total_rows, *columns = varints(row[0]).tolist()
    return sum(columns) / total_rows if total_rows else 1.0


def _sizes(blobs: tuple[bytes, ...]) -> np.ndarray:
    """Rows' lengths (every column's tokens) from their size records, one varint a column
    each, decoded together."""
    values = varints(b"".join(blobs))
    return values.reshape(len(blobs), -1).sum(axis=1) if len(values) else np.zeros(len(blobs))


def partition_scores(
    conn: Any,
    matches: list[str],
    *,
    frequencies: list[int],
    context_weight: float,
    statistics: tuple[int, float],
) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, scores), best first: BM25 of every row one of `matches` finds (FTS5 MATCH
    strings, one query term each, within the searched scope), with the `statistics` (rows, mean
    length) of the rows they are taken over (the user's) and each term's document `frequencies`
    there."""
    partition_rows, partition_length = statistics
    file_length = file_average_length(conn)
    row_ids, parts = [], []
    for index, match in enumerate(matches):
        matched = conn.execute(
            "SELECT f.rowid, bm25(memories_fts, 1.0, 0.0, ?), bm25(memories_fts, ?, 0.0, ?), d.sz "
            "FROM memories_fts AS f JOIN memories_fts_docsize AS d ON d.id = f.rowid "
            "WHERE memories_fts MATCH ?",
            (context_weight, _HUGE, _HUGE, match),
        ).fetchall()
        if not matched:
            continue
        ids, scores, bounds, sizes = zip(*matched)
        # bm25() is negative (lower is better); the bound is the same for every row.
        score, bound = -np.array(scores, np.float64), -min(bounds)
        lengths = _sizes(sizes)
        holding = frequencies[index]  # rows of the user whose own text holds the term
        # Statistics cached while the scope grew within 10% (or read by another snapshot) can
        # count fewer rows than match: the IDF is then held at its floor, not the log of a
        # negative number.
        idf = max(math.log((max(partition_rows - holding, 0) + 0.5) / (holding + 0.5)), IDF_FLOOR)
        file_k = K1 * (1 - B + B * lengths / file_length)
        partition_k = K1 * (1 - B + B * lengths / partition_length)
        # F / K from the score; where it reaches the bound, F dwarfs any K (the share is 1).
        gap = bound - score
        saturated = gap <= 0
        frequency = score / np.where(saturated, 1.0, gap) * file_k
        share = np.where(saturated, 1.0, frequency / (frequency + partition_k))
        row_ids.append(np.array(ids, np.int64))
        parts.append(idf * (K1 + 1) * share)
    if not row_ids:
        return np.zeros(0, np.int64), np.zeros(0)
    rows, inverse = np.unique(np.concatenate(row_ids), return_inverse=True)
    totals = np.bincount(inverse, weights=np.concatenate(parts))
    order = np.lexsort((rows, -totals))
    return rows[order], totals[order]
