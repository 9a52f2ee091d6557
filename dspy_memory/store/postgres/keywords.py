"""PostgreSQL keyword search: a tsvector per memory row (GIN), ranked with ts_rank.

A row's own text is weighted A, a raw turn's conversation context (store/turns.py) B, with B
counting `context_weight` of A. Only the tsvector is stored, never the text again. Queries are
built with websearch_to_tsquery from the shared search terms, each quoted, so user text is never
read as query syntax (websearch_to_tsquery also never fails on odd input). As on SQLite, the
best rows are ranked inside the index first and the filters apply to those, widening when they
reject too many.
"""

from __future__ import annotations

import json
from typing import Any

from dspy_memory.store.backend import NO_USER
from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate

CONFIG = "english"
_VECTOR = f"setweight(to_tsvector('{CONFIG}', ?), 'A') || setweight(to_tsvector('{CONFIG}', ?), 'B')"


def tsquery_text(terms: list[str], *, require_all: bool = False) -> str:
    """websearch_to_tsquery input: the terms quoted, joined by `or` (or nothing: all)."""
    return (" " if require_all else " or ").join(f'"{term}"' for term in terms)


class KeywordIndex:
    def __init__(self, *, context_weight: float) -> None:
        self.context_weight = context_weight

    def insert(self, conn: Any, rows: list[tuple[int, str, str, str | None, str | None, str | None]]) -> None:
        conn.executemany(
            f"INSERT INTO memory_terms (row_id, partition_key, terms) VALUES (?, ?, {_VECTOR})",
            [(row_id, user or NO_USER, content, context) for row_id, content, context, user, _, _ in rows],
        )

    def set_contexts(self, conn: Any, contexts: list[tuple[int, str]]) -> None:
        """Replace the conversation context of rows: (row_id, context)."""
        conn.executemany(
            f"UPDATE memory_terms AS t SET terms = setweight(to_tsvector('{CONFIG}', m.content), 'A') || "
            f"setweight(to_tsvector('{CONFIG}', ?), 'B') FROM memories m WHERE m.row_id = t.row_id AND t.row_id = ?",
            [(text, row_id) for row_id, text in contexts],
        )

    def erase(self, conn: Any, row_ids: list[int], *, total_rows: int) -> int:
        if not row_ids:
            return 0
        return conn.execute(
            "DELETE FROM memory_terms WHERE row_id IN (SELECT value FROM json_each(?))",
            (json.dumps(row_ids),),
        ).rowcount

    def count(self, conn: Any) -> int:
        return int(conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0])

    def clear_cache(self) -> None:
        """Nothing is cached on this backend."""

    def search(
        self,
        conn: Any,
        terms: list[str],
        scope: tuple[str | None, str | None, str | None],
        n: int,
        *,
        predicate: str,
        params: list[Any],
        scope_rows: int | None,
        total_rows: int,
        reference: str,
    ) -> list[Candidate]:
        if not terms or n <= 0:
            return []
        weights = f"'{{0, 0, {float(self.context_weight)}, 1}}'::real[]"
        where, where_params = "", []
        user = scope[0]
        if user is not None or scope_rows is not None:
            where, where_params = " AND t.partition_key = ?", [user if user is not None else NO_USER]
        query = tsquery_text(terms)
        fetch = n * 2
        while True:
            ranked = conn.execute(
                f"SELECT t.row_id, ts_rank({weights}, t.terms, q) AS rank "
                f"FROM memory_terms t, websearch_to_tsquery('{CONFIG}', ?) AS q "
                f"WHERE t.terms @@ q{where} ORDER BY rank DESC, t.row_id LIMIT ?",
                [query, *where_params, fetch],
            ).fetchall()
            kept = {
                row[0]: row[1:]
                for row in conn.execute(
                    f"SELECT {SIGNAL_COLUMNS} FROM {CANDIDATES_FROM} WHERE {predicate}",
                    [reference, json.dumps([row[0] for row in ranked]), *params],
                )
            }
            hits = [
                Candidate(row_id, float(rank), *kept[row_id]) for row_id, rank in ranked if row_id in kept
            ]
            if len(hits) >= n or len(ranked) < fetch:
                return hits[:n]
            fetch *= 4
