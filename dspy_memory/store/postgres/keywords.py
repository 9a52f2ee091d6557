"""PostgreSQL keyword search: a tsvector per memory row (GIN), ranked by BM25 over the scope.

A row's own text is weighted A, a raw turn's conversation context (store/turns.py) B, with B
counting `context_weight` of A, its words cut where FTS5 cuts them (`WORDS` below, schema
version 13). Only the tsvector is stored, never the text again. Queries are
built with websearch_to_tsquery from the shared search terms, each quoted, so user text is never
read as query syntax (websearch_to_tsquery also never fails on odd input). As on SQLite, the
best rows are ranked inside the index first and the filters apply to those, widening when they
reject too many.

Ranking is FTS5's bm25() (store/sqlite/keywords.py: k1 1.2, b 0.75, the same IDF), with the
statistics of the searched partition (the user's rows; user-less rows share one), so no other
user's rows weigh on a ranking (as on SQLite, store/sqlite/partition_bm25.py). A term's frequency in
a row is the number of its positions, those in the context counting `context_weight`; a row's
length is its number of distinct lexemes, against the partition's average. A term's document
frequency counts the rows whose own text holds it: a context repeats its neighbours' words, so
counting it too would make every word about four times as common (turn_context_before + after
+ 1) and, in a scope of a few hundred turns, push ordinary words past half the rows, where the
IDF is nil. The counts come from the rows the query matches (the planner below keeps them
within the budget); when every term is required they are counted in the partition.

Ranking costs every matching row a recheck and a rank (~1.5-2 us each here with ts_rank): an OR
of three common terms over 100k memories matched 41k rows and took 30-55 ms. So, as the SQLite
index does, scopes larger than `score_budget` rows take terms rarest first while the rows they
match stay within the budget, and require every term when even the rarest matches more; 100k
one-scope keyword search went from ~55 ms to a few ms. Term counts are read from the GIN index
per scope and cached while the scope's size stays within 10%, as is a large scope's average
row length.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from dspy_memory.store.backend import NO_USER
from dspy_memory.store.keyword import budgeted_terms
from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate

# Words are cut where FTS5's unicode61 cuts them (schema version 13): at every ASCII character
# that is not a letter or digit, where PostgreSQL's parser alone keeps some together
# ("team/support" a path, "J.K." a host, "3.5" a number, "well-known" a compound too), so a row's
# text has those turned into spaces before the parser reads it; query terms are already cut
# (store/keyword.py). Stemming and stopwords stay PostgreSQL's `english`: FTS5's Porter without
# stopwords was measured too, and with each user's statistics it found less on LoCoMo (R@10
# 0.7429 against 0.7454, docs/benchmarks.md).
CONFIG = "english"
_ASCII_PUNCTUATION = "".join(ch for ch in map(chr, range(33, 127)) if not ch.isalnum())
WORDS = (
    f"""CREATE FUNCTION words_vector(t text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $words$
        SELECT to_tsvector('{CONFIG}', translate(t,
            '{_ASCII_PUNCTUATION.replace("'", "''")}', '{" " * len(_ASCII_PUNCTUATION)}')) $words$""",
)
# Every row's vector again from its text and the context its turn_context links name, built as
# store/exchange_import.py's keyword_entries builds it ("name: text" lines in order).
REINDEX_WORDS = """UPDATE memory_terms AS t
    SET terms = setweight(words_vector(m.content), 'A') || setweight(words_vector(coalesce(c.text, '')), 'B')
    FROM memories AS m LEFT JOIN (
        SELECT l.row_id, string_agg(
            CASE WHEN coalesce(e.name, '') = '' THEN e.content ELSE e.name || ': ' || e.content END,
            E'\\n' ORDER BY e.occurred_at, e.rowid) AS text
        FROM turn_context AS l JOIN episodes AS e ON e.id = l.episode_id GROUP BY l.row_id
    ) AS c ON c.row_id = m.row_id
    WHERE m.row_id = t.row_id"""
# FTS5's bm25() constants (term frequency saturation, length normalization).
K1, B = 1.2, 0.75


def tsquery_text(terms: list[str], *, require_all: bool = False) -> str:
    """websearch_to_tsquery input: the terms quoted, joined by `or` (or nothing: all)."""
    return (" " if require_all else " or ").join(f'"{term}"' for term in terms)


def _ranking_sql(source: str, where: str, statistics: str) -> str:
    """BM25 of the rows of `source` matching the query, best first. Parameters, in order: the
    terms and their document frequencies (NULL: counted among the matched rows, by their own
    text), the source's,
    the query, the where clause's, the context weight, the statistics', the limit."""
    # A large scope's N is its vector count (vector_partitions): should a count of the index
    # ever exceed it, the IDF is held at its floor rather than taking the log of a negative.
    # Each matched row's vector is cut to the query's lexemes before it is unnested (ts_delete
    # twice): unnesting whole vectors cost ~20 us a row, the cut ones ~5. MATERIALIZED keeps
    # each step computed once (inlined, the per-term counts ran once per row and term).
    return f"""
    WITH query AS MATERIALIZED (
        SELECT q.i, q.hits, tsvector_to_array(to_tsvector('{CONFIG}', q.term)) AS lexemes
        FROM unnest(?::text[], ?::bigint[]) WITH ORDINALITY AS q(term, hits, i)
    ), lexemes AS MATERIALIZED (
        SELECT DISTINCT query.i, l.lexeme FROM query CROSS JOIN unnest(query.lexemes) AS l(lexeme)
    ), matched AS MATERIALIZED (
        SELECT t.row_id, length(t.terms) AS length, ts_delete(t.terms, tsvector_to_array(
            ts_delete(t.terms, (SELECT array_agg(lexeme) FROM lexemes)))) AS kept
        FROM {source}, websearch_to_tsquery('{CONFIG}', ?) AS mq
        WHERE t.terms @@ mq{where}
    ), frequencies AS MATERIALIZED (
        SELECT matched.row_id, matched.length, query.i, min(
            coalesce(cardinality(array_positions(u.weights, 'A')), 0)
            + ?::float8 * coalesce(cardinality(array_positions(u.weights, 'B')), 0)
        ) AS f, min(coalesce(cardinality(array_positions(u.weights, 'A')), 0)) AS own
        FROM matched CROSS JOIN LATERAL unnest(matched.kept) AS u
        JOIN lexemes ON lexemes.lexeme = u.lexeme JOIN query ON query.i = lexemes.i
        GROUP BY matched.row_id, matched.length, query.i, query.lexemes
        HAVING count(*) = cardinality(query.lexemes)
    ), statistics AS MATERIALIZED ({statistics}
    ), weighted AS MATERIALIZED (
        SELECT query.i, greatest(
            ln((greatest(statistics.rows - h.hits, 0) + 0.5) / (h.hits + 0.5)), 1e-6) AS idf
        FROM query CROSS JOIN statistics CROSS JOIN LATERAL (
            SELECT coalesce(query.hits, (
                SELECT count(*) FROM frequencies WHERE frequencies.i = query.i AND frequencies.own > 0
            )) AS hits OFFSET 0) AS h
    )
    SELECT frequencies.row_id, sum(
        weighted.idf * frequencies.f * {K1 + 1} / (frequencies.f + {K1} * (
            {1 - B} + {B} * frequencies.length / statistics.average_length))
    ) AS rank
    FROM frequencies JOIN weighted ON weighted.i = frequencies.i CROSS JOIN statistics
    GROUP BY frequencies.row_id
    ORDER BY rank DESC, frequencies.row_id LIMIT ?"""


class KeywordIndex:
    def __init__(
        self, *, context_weight: float, score_budget: int = 1000, frequency_cache_size: int = 50_000
    ) -> None:
        self.context_weight = context_weight
        self.score_budget = score_budget
        # (partition or None, term, own text only) -> (matching rows counted up to the cap,
        # scope rows then, cap)
        self._frequencies_cache: OrderedDict[tuple[str | None, str, bool], tuple[int, int, int]] = (
            OrderedDict()
        )
        # partition or None -> (average row length, scope rows then), for scopes over the budget
        self._lengths_cache: dict[str | None, tuple[float, int]] = {}
        self._cache_size = frequency_cache_size
        self._lock = threading.Lock()

    def insert(self, conn: Any, rows: list[tuple[int, str, str, str | None, str | None, str | None]]) -> None:
        # One statement for the batch, its text the same every time (prepared once per
        # connection), the rows bound as one JSON array: a statement per row, or the rows as
        # arrays (which psycopg builds in Python), cost several times more.
        conn.execute(
            "INSERT INTO memory_terms (row_id, partition_key, terms) "
            "SELECT r.row_id, r.partition_key, setweight(words_vector(r.content), 'A') || "
            "setweight(words_vector(r.context), 'B') FROM json_to_recordset(?::json) "
            "AS r(row_id bigint, partition_key text, content text, context text)",
            (
                json.dumps(
                    [
                        {
                            "row_id": row_id,
                            "partition_key": user or NO_USER,
                            "content": content,
                            "context": context,
                        }
                        for row_id, content, context, user, _, _ in rows
                    ]
                ),
            ),
        )

    def set_contexts(self, conn: Any, contexts: list[tuple[int, str]]) -> None:
        """Replace the conversation context of rows: (row_id, context)."""
        conn.executemany(
            "UPDATE memory_terms AS t SET terms = setweight(words_vector(m.content), 'A') || "
            "setweight(words_vector(?), 'B') FROM memories m WHERE m.row_id = t.row_id AND t.row_id = ?",
            [(text, row_id) for row_id, text in contexts],
        )

    def erase(self, conn: Any, row_ids: list[int], *, total_rows: int) -> int:
        if not row_ids:
            return 0
        deleted = conn.execute(
            "DELETE FROM memory_terms WHERE row_id IN (SELECT value FROM json_each(?))",
            (json.dumps(row_ids),),
        ).rowcount
        self.clear_cache()
        return deleted

    def count(self, conn: Any) -> int:
        return int(conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0])

    def clear_cache(self) -> None:
        """Forget cached term counts and lengths (terms and user ids are content: a purge must
        not leave them here)."""
        with self._lock:
            self._frequencies_cache.clear()
            self._lengths_cache.clear()

    def frequencies(
        self, conn: Any, terms: list[str], partition: str | None, *, cap: int, rows: int, own: bool = False
    ) -> list[int]:
        """How many rows of `partition` (every partition: None) match each term (`own`: in
        their own text, not their context), counted up to `cap` + 1. Cached while the
        partition's size stays within 10% of `rows`, the size they were read at: slightly stale
        counts barely move a term's weight."""
        counts: dict[str, int] = {}
        with self._lock:
            for term in terms:
                cached = self._frequencies_cache.get((partition, term, own))
                if (
                    cached is not None
                    and abs(cached[1] - rows) <= 0.1 * rows
                    and (cached[0] <= cached[2] or cached[2] >= cap)
                ):
                    counts[term] = min(cached[0], cap + 1)
        missing = list(dict.fromkeys(term for term in terms if term not in counts))
        if missing:
            where = "t.partition_key = ? AND " if partition is not None else ""
            query = f"websearch_to_tsquery('{CONFIG}', ?)"
            if own:
                # The term's lexemes, each in the row's own text (weight A).
                query = (
                    "(SELECT string_agg(quote_literal(l) || ':A', ' & ')::tsquery "
                    f"FROM unnest(tsvector_to_array(to_tsvector('{CONFIG}', ?))) AS l)"
                )
            one = (
                f"(SELECT count(*) FROM (SELECT 1 FROM memory_terms t WHERE {where}"
                f"t.terms @@ {query} LIMIT ?) AS matched)"
            )
            params: list[Any] = []
            for term in missing:
                text = term if own else tsquery_text([term])
                params += [*([partition] if partition is not None else []), text, cap + 1]
            fetched = conn.execute("SELECT " + ", ".join(one for _ in missing), params).fetchone()
            with self._lock:
                for term, count in zip(missing, fetched):
                    counts[term] = int(count)
                    if not count:
                        # An absent term is dropped from the query, so a cached zero would hide
                        # the first row that brings it (and counting an absent term is cheap).
                        continue
                    self._frequencies_cache[(partition, term, own)] = (int(count), rows, cap)
                    self._frequencies_cache.move_to_end((partition, term, own))
                while len(self._frequencies_cache) > self._cache_size:
                    self._frequencies_cache.popitem(last=False)
        return [counts[term] for term in terms]

    def average_length(self, conn: Any, partition: str | None, *, rows: int) -> float:
        """The mean length (distinct lexemes) of the rows of `partition` (None: all), cached
        while its size stays within 10% of `rows`."""
        with self._lock:
            cached = self._lengths_cache.get(partition)
        if cached is not None and abs(cached[1] - rows) <= 0.1 * rows:
            return cached[0]
        where, params = ("WHERE partition_key = ?", [partition]) if partition is not None else ("", [])
        value = conn.execute(f"SELECT avg(length(terms)) FROM memory_terms {where}", params).fetchone()[0]
        length = max(float(value or 0), 1.0)
        with self._lock:
            self._lengths_cache[partition] = (length, rows)
        return length

    def plan(
        self, conn: Any, terms: list[str], partition: str | None, *, rows: int
    ) -> tuple[list[str], bool] | None:
        """Which of `terms` to rank in a scope of `rows` rows, and whether to require all of
        them; None when no term matches anything."""
        if rows <= self.score_budget:
            return terms, False
        counts = self.frequencies(conn, terms, partition, cap=self.score_budget, rows=rows)
        return budgeted_terms(terms, counts, self.score_budget)

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
        where, where_params = "", []
        user, partition = scope[0], None
        if user is not None or scope_rows is not None:
            partition = user if user is not None else NO_USER
            where, where_params = " AND t.partition_key = ?", [partition]
        rows = total_rows if scope_rows is None else scope_rows
        planned = self.plan(conn, terms, partition, rows=rows)
        if planned is None:
            return []
        chosen, require_all = planned
        # Each term's document frequency: counted among the matched rows, unless every term
        # is required (then the matched rows hold every term: count them in the scope).
        hits: list[int | None] = [None] * len(chosen)
        if require_all:
            hits = list(self.frequencies(conn, chosen, partition, cap=rows, rows=rows, own=True))
        scope_where, scope_params = (
            ("WHERE partition_key = ?", [partition]) if partition is not None else ("", [])
        )
        statistics = (
            "SELECT count(*)::float8 AS rows, greatest(avg(length(terms)), 1)::float8 AS average_length "
            f"FROM memory_terms {scope_where}"
        )
        statistics_params: list[Any] = scope_params
        if rows > self.score_budget:
            statistics = "SELECT ?::float8 AS rows, ?::float8 AS average_length"
            statistics_params = [rows, self.average_length(conn, partition, rows=rows)]
        source, source_params = "memory_terms t", []
        if partition is not None and scope_rows is not None and scope_rows <= self.score_budget:
            # A small scope: its rows by primary key, each tested, costs less than the GIN
            # index's matches over every scope (OFFSET 0 keeps the match out of the scan).
            # Measured, 1,000 rows of 100k, three common terms: 0.5 ms instead of 3.8 ms.
            source = "(SELECT row_id, terms FROM memory_terms WHERE partition_key = ? OFFSET 0) AS t"
            source_params, where, where_params = [partition], "", []
        sql = _ranking_sql(source, where, statistics)
        query = tsquery_text(chosen, require_all=require_all)
        fetch = n * 2
        while True:
            ranked = conn.execute(
                sql,
                [
                    chosen,
                    hits,
                    *source_params,
                    query,
                    *where_params,
                    float(self.context_weight),
                    *statistics_params,
                    fetch,
                ],
            ).fetchall()
            kept = {
                row[0]: row[1:]
                for row in conn.execute(
                    f"SELECT {SIGNAL_COLUMNS} FROM {CANDIDATES_FROM} WHERE {predicate}",
                    [reference, json.dumps([row[0] for row in ranked]), *params],
                )
            }
            hits_found = [
                Candidate(row_id, float(rank), *kept[row_id]) for row_id, rank in ranked if row_id in kept
            ]
            if len(hits_found) >= n or len(ranked) < fetch:
                return hits_found[:n]
            fetch *= 4
