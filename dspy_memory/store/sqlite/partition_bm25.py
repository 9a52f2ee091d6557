"""BM25 with one partition's statistics, computed from FTS5's own scores.

FTS5's bm25() takes its statistics from the whole file: the row count, each term's document
frequency and the average row length. In a file several users share, one user's ranking would
then depend on what the others wrote (a word common among them weighs little for everyone), and
a user would rank differently alone in a file than sharing one. So each query term is scored
on its own, and every file-wide statistic in its score is swapped for the partition's: the
user's rows, or the user-less rows, as PostgreSQL partitions (store/postgres/keywords.py).

FTS5 scores a term t in a row d as  s = I(t) (k1 + 1) F / (F + K(d)),  K(d) = k1 (1 - b + b |d| /
avgdl),  F the term's column-weighted count in d. Then:
- I(t) (k1 + 1), the bound: the same term scored again with huge column weights (F >> K);
- F / K(d) = s / (bound - s);
- K(d): |d| from the row's FTS5 size record, avgdl the file's (its averages record);
- the partition's score: I from its row count and the rows of it matching t, K from its mean
  |d|, F as above.
The scores equal, to rounding, those FTS5 gives the same rows in a file of their own
(tests/test_keyword.py).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

# FTS5's bm25() constants (fts5_aux.c); its IDF floor for a term in over half the rows.
K1, B, IDF_FLOOR = 1.2, 0.75, 1e-6
# Column weight that makes F dwarf K: an error of K / (WEIGHT F) < 1e-9 on the bound.
_HUGE = 1e12
# FTS5's averages record (the file's row count, then each column's token count).
_AVERAGES_ID = 1


def varints(blob: bytes) -> Iterator[int]:
    """The SQLite-format varints in `blob` (FTS5's size records): big-endian 7-bit groups, the
    high bit set on all but the last; a ninth byte carries 8 bits."""
    value, length = 0, 0
    for byte in blob:
        length += 1
        if length == 9:
            yield (value << 8) | byte
            value, length = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            yield (value << 7) | byte
            value, length = 0, 0


def _size(blob: bytes | None) -> int:
    """A row's length as bm25() reads it: its tokens, every column counted."""
    return sum(varints(blob)) if blob else 0


class PartitionStatistics:
    """Each partition's row count and mean row length, read from the size records of its rows.

    Cached while the partition's size is the one they were read at (within 10% once it holds
    over `exact_rows` rows: its mean then barely moves, and reading it costs ~1 us a row)."""

    def __init__(self, *, exact_rows: int) -> None:
        self.exact_rows = exact_rows
        self._cache: dict[str | None, tuple[int, float, int]] = {}
        self._lock = threading.Lock()

    def of(self, conn: Any, user: str | None, *, rows: int) -> tuple[int, float]:
        """(rows, mean length) of the partition of `user` (None: the rows without a user);
        `rows`: its size now, as the vector index counts it."""
        with self._lock:
            cached = self._cache.get(user)
        if cached is not None:
            counted, length, seen = cached
            if seen == rows or (rows > self.exact_rows and abs(seen - rows) <= 0.1 * seen):
                return counted, length
        sizes = conn.execute(
            "SELECT d.sz FROM memories AS m JOIN memories_fts_docsize AS d ON d.id = m.row_id "
            "WHERE m.user_id IS ?",
            (user,),
        ).fetchall()
        counted = len(sizes)
        length = (sum(_size(row[0]) for row in sizes) / counted if counted else 0.0) or 1.0
        with self._lock:
            self._cache[user] = (counted, length, rows)
        return counted, length

    def clear(self) -> None:
        """Forget what is cached (user ids are content: a purge must not leave them here)."""
        with self._lock:
            self._cache.clear()


def file_average_length(conn: Any) -> float:
    """The file's mean row length, as bm25() computes it."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = ?", (_AVERAGES_ID,)).fetchone()
    if row is None or not row[0]:
        return 1.0
    total_rows, *columns = varints(row[0])
    return sum(columns) / total_rows if total_rows else 1.0


def partition_scores(
    conn: Any,
    matches: list[str],
    *,
    user: str | None,
    context_weight: float,
    statistics: tuple[int, float],
) -> dict[int, float]:
    """BM25 of every row of the partition of `user` (None: the user-less rows) that one of
    `matches` (FTS5 MATCH strings, one query term each) finds, with the partition's
    `statistics` (rows, mean length)."""
    partition_rows, partition_length = statistics
    file_length = file_average_length(conn)
    scores: dict[int, float] = {}
    for match in matches:
        matched = conn.execute(
            "SELECT f.rowid, bm25(memories_fts, 1.0, 0.0, ?), bm25(memories_fts, ?, 0.0, ?), d.sz "
            "FROM memories_fts AS f JOIN memories AS m ON m.row_id = f.rowid "
            "JOIN memories_fts_docsize AS d ON d.id = f.rowid "
            "WHERE memories_fts MATCH ? AND m.user_id IS ?",
            (context_weight, _HUGE, _HUGE, match, user),
        ).fetchall()
        if not matched:
            continue
        found = len(matched)
        # Statistics cached while the partition grew within 10% (or read by another snapshot)
        # can count fewer rows than match: the IDF is then held at its floor, not the log of a
        # negative number.
        idf = max(math.log((max(partition_rows - found, 0) + 0.5) / (found + 0.5)), IDF_FLOOR)
        # bm25() is negative (lower is better); the bound is the same for every row.
        bound = max(-row[2] for row in matched)
        for row_id, score, _, size in matched:
            score = -score
            if score <= 0:  # the term only in a column weighted 0
                continue
            length = _size(size)
            file_k = K1 * (1 - B + B * length / file_length)
            partition_k = K1 * (1 - B + B * length / partition_length)
            # F / K from the score; when it saturates the bound, F dwarfs any K.
            frequency = score / (bound - score) * file_k if bound > score else math.inf
            part = 1.0 if math.isinf(frequency) else frequency / (frequency + partition_k)
            scores[row_id] = scores.get(row_id, 0.0) + idf * (K1 + 1) * part
    return scores
