"""The SQLite keyword index (FTS5, BM25). User text never reaches MATCH except as quoted terms."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

from dspy_memory.store.keyword import budgeted_terms
from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate
from dspy_memory.store.sqlite.partition_bm25 import ScopeStatistics, partition_scores

# A purge that removes at least this share of the keyword index rebuilds the index ('rebuild':
# cost proportional to the index, ~1.5-2 us a row here) instead of removing each row's entries
# in place (FTS5 'secure-delete': ~0.7-0.9 ms a row of 14 words). Measured at 10k and 50k rows:
# break-even near 0.2%. See docs/architecture.md, "Erasure".
REWRITE_SHARE = 0.002
_REBUILD_BATCH = 5000


def indexed_entries(conn: Any, row_ids: list[int]) -> list[tuple[Any, ...]]:
    """(row_id, content, context, user_id, agent_id, run_id) of memory rows, as the index holds
    them: the context from the row's `turn_context` links (store/exchange_import.py)."""
    from dspy_memory.store.exchange_import import keyword_entries

    rows = conn.execute(
        "SELECT row_id, content, user_id, agent_id, run_id FROM memories "
        "WHERE row_id IN (SELECT value FROM json_each(?)) ORDER BY row_id",
        (json.dumps(row_ids),),
    ).fetchall()
    return keyword_entries(conn, rows)


def match_expression(
    terms: list[str],
    scope_tokens: list[str] | None = None,
    *,
    require_all: bool = False,
    own_text: bool = False,
) -> str | None:
    """An FTS5 MATCH string: any (or all) of `terms` in `content` or `context` (a raw turn's
    conversation; `own_text`: in `content` only), all of `scope_tokens` in `scope`."""
    if not terms:
        return None
    # Terms hold no separator (so no quote); quoting makes FTS5 read keywords such as OR, NOT
    # and NEAR as plain words.
    content = (" AND " if require_all else " OR ").join(f'"{term}"' for term in terms)
    expression = f"{{{'content' if own_text else 'content context'}}} : ({content})"
    if scope_tokens:
        expression = f"{scope_expression(scope_tokens)} AND {expression}"
    return expression


def term_expression(term: str, tokens: list[str], *, own_text: bool = False) -> str:
    """An FTS5 MATCH string for the rows of the scope `tokens` holding `term` (`own_text`: in
    their own text, not their context)."""
    expression = match_expression([term], tokens, own_text=own_text)
    assert expression is not None  # a term makes an expression
    return expression


def scope_expression(tokens: list[str]) -> str:
    """An FTS5 MATCH string for the rows holding every one of the scope `tokens`."""
    return "scope : (" + " AND ".join(f'"{token}"' for token in tokens) + ")"


_COUNT = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?"


def scope_token(kind: str, value: str) -> str:
    """An opaque FTS token for one scope id. Digits-only tail so stemming cannot alter it."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return f"{kind}{int.from_bytes(digest, 'big')}"


def scope_tokens(user_id: str | None, agent_id: str | None, run_id: str | None) -> list[str]:
    tokens = []
    if user_id is not None:
        tokens.append(scope_token("u", user_id))
    if agent_id is not None:
        tokens.append(scope_token("a", agent_id))
    if run_id is not None:
        tokens.append(scope_token("r", run_id))
    return tokens


class KeywordIndex:
    """FTS5 BM25 search over memory content, kept cheap on large scopes.

    FTS5 scores every row that matches, at ~2-3 us a row here: a 4-term OR query over a
    100k-memory scope matching 13k rows took 40 ms. So on scopes larger than `score_budget`
    rows, terms are taken rarest first while the rows they match stay within the budget; the
    most common terms then select nothing (as in Elasticsearch's common-terms query). When even
    the rarest term matches more than the budget, every term is required instead. Small scopes
    get a plain OR of all terms.
    """

    def __init__(
        self, *, score_budget: int = 1000, context_weight: float = 0.5, frequency_cache_size: int = 50_000
    ) -> None:
        self.score_budget = score_budget
        # BM25 weight of a term found in a raw turn's conversation context (store/turns.py)
        # against one found in the memory's own text (1.0).
        self.context_weight = context_weight
        # (scope tokens, term) -> (rows of the scope holding the term, counted up to the budget + 1;
        # the scope's rows then)
        self._frequencies_cache: OrderedDict[tuple[str, str], tuple[int, int]] = OrderedDict()
        self._cache_size = frequency_cache_size
        self._lock = threading.Lock()
        self.statistics = ScopeStatistics(exact_rows=score_budget)

    def insert(self, conn: Any, rows: list[tuple[int, str, str, str | None, str | None, str | None]]) -> None:
        """rows: (row_id, content, context, user_id, agent_id, run_id); context: a raw turn's
        conversation (store/turns.py), else empty."""
        conn.executemany(
            "INSERT INTO memories_fts (rowid, content, context, scope) VALUES (?, ?, ?, ?)",
            [
                (row_id, content, context, " ".join(scope_tokens(u, a, r)))
                for row_id, content, context, u, a, r in rows
            ],
        )

    def set_contexts(self, conn: Any, contexts: list[tuple[int, str]]) -> None:
        """Replace the conversation context of rows: (row_id, context). Call while the rows'
        `turn_context` links still name the episodes their old context quotes."""
        old = indexed_entries(conn, [row_id for row_id, _ in contexts])
        self._remove(conn, old)
        by_row = {entry[0]: entry for entry in old}
        self.insert(
            conn,
            [
                (row_id, by_row[row_id][1], text, *by_row[row_id][3:])
                for row_id, text in contexts
                if row_id in by_row
            ],
        )

    def delete(self, conn: Any, row_ids: list[int]) -> int:
        """Call before the rows, their links or the episodes those name are deleted."""
        entries = indexed_entries(conn, row_ids)
        self._remove(conn, entries)
        return len(entries)

    def _remove(self, conn: Any, entries: list[tuple[Any, ...]]) -> None:
        # The index stores no text (contentless, store/sqlite/migrations.py, 12): FTS5 removes a
        # row given exactly the text it was indexed with, rebuilt from the memory row and links.
        conn.executemany(
            "INSERT INTO memories_fts (memories_fts, rowid, content, context, scope) VALUES ('delete', ?, ?, ?, ?)",
            [
                (row_id, content, context, " ".join(scope_tokens(u, a, r)))
                for row_id, content, context, u, a, r in entries
            ],
        )

    def erase(self, conn: Any, row_ids: list[int], *, total_rows: int) -> int:
        """Delete rows so that none of their terms stays in the index segments (deleted rows
        otherwise stay there, marked deleted, until a merge). Call before the rows, their links
        or the episodes those name are deleted."""
        if not row_ids:
            return 0
        if len(row_ids) < REWRITE_SHARE * total_rows:
            self.secure_delete(conn, True)
            deleted = self.delete(conn, row_ids)
            self.clear_cache()
            return deleted
        erased = json.dumps(row_ids)
        deleted = int(
            conn.execute(
                "SELECT count(*) FROM memories WHERE row_id IN (SELECT value FROM json_each(?))", (erased,)
            ).fetchone()[0]
        )
        kept = [
            row[0]
            for row in conn.execute(
                "SELECT row_id FROM memories WHERE row_id NOT IN (SELECT value FROM json_each(?))", (erased,)
            )
        ]
        self.rebuild(conn, kept)
        return deleted

    def count(self, conn: Any) -> int:
        return int(conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0])

    def secure_delete(self, conn: Any, on: bool) -> None:
        """FTS5 'secure-delete': a deleted or changed row's terms leave the segments at once."""
        conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', ?)", (int(on),))

    def rebuild(self, conn: Any, row_ids: list[int]) -> None:
        """Write the index anew with these rows only: deleted rows' terms stay in FTS5 segments
        until merged ('optimize' merged segments but, measured, could leave a deleted term's
        bytes inside a leaf of the merged segment)."""
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
        for start in range(0, len(row_ids), _REBUILD_BATCH):
            self.insert(conn, indexed_entries(conn, row_ids[start : start + _REBUILD_BATCH]))
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget cached term counts (the terms are content: a purge must not leave them here)."""
        with self._lock:
            self._frequencies_cache.clear()
        self.statistics.clear()

    def frequencies(
        self, conn: Any, terms: list[str], tokens: list[str], *, cap: int, rows: int
    ) -> list[int]:
        """How many rows of the scope (the rows holding every one of its `tokens`; none: the
        whole index) hold each term, counted up to `cap` + 1.

        Counts are cached per scope while its size stays within 10% of `rows`, the size they
        were read at: they only steer which terms to score, so slightly stale counts are
        harmless.
        """
        scope = " ".join(tokens)
        counts: dict[str, int] = {}
        with self._lock:
            for term in terms:
                cached = self._frequencies_cache.get((scope, term))
                if cached is not None and abs(cached[1] - rows) <= 0.1 * rows:
                    counts[term] = cached[0]
        missing = list(dict.fromkeys(term for term in terms if term not in counts))
        if missing:
            sql = "SELECT " + ", ".join(
                "(SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?))"
                for _ in missing
            )
            params: list[Any] = []
            for term in missing:
                params += [match_expression([term], tokens), cap + 1]
            fetched = conn.execute(sql, params).fetchone()
            with self._lock:
                for term, count in zip(missing, fetched):
                    counts[term] = count
                    if count == 0:
                        # An absent term is dropped from the query, so a cached zero would hide
                        # the first row that brings it (and counting an absent term is cheap).
                        continue
                    self._frequencies_cache[(scope, term)] = (count, rows)
                    self._frequencies_cache.move_to_end((scope, term))
                while len(self._frequencies_cache) > self._cache_size:
                    self._frequencies_cache.popitem(last=False)
        return [min(counts[term], cap + 1) for term in terms]

    def plan(
        self, conn: Any, terms: list[str], tokens: list[str], *, scope_rows: int | None, total_rows: int
    ) -> tuple[list[str], list[str] | None, bool] | None:
        """Which of `terms` to match (and whether all of them) and the scope tokens to filter
        by, in a scope of `scope_rows` of `total_rows` rows (`scope_rows` None: unknown, as for
        scopes without a user)."""
        if not terms:
            return None
        # The scope filter in the search's MATCH pays off only when the scope is a small part of
        # the index; otherwise intersecting with its huge token list costs more than it saves
        # (the SQL filter on `memories` enforces the scope either way). An unknown share keeps
        # the filter and budgets as if the scope were the whole index.
        use_tokens: list[str] | None
        if scope_rows is None:
            scope_rows, use_tokens = total_rows, tokens
        else:
            use_tokens = tokens if total_rows and scope_rows < 0.5 * total_rows else None
        if scope_rows <= self.score_budget:
            return terms, use_tokens, False
        # Counted in the scope itself: the whole index's count scaled by the scope's share
        # would pick a term that is common elsewhere and absent here, and find nothing.
        counts = self.frequencies(conn, terms, tokens, cap=self.score_budget, rows=scope_rows)
        chosen = budgeted_terms(terms, counts, self.score_budget)
        return None if chosen is None else (chosen[0], use_tokens, chosen[1])

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
        """Best `n` rows satisfying `predicate` (over `memories m`) by BM25 (higher is better);
        a term in a raw turn's conversation context weighs `context_weight` of one in its text.

        Ranked with the statistics of the user's rows (a scope without a user: of the scope's),
        term by term (store/sqlite/partition_bm25.py). A query whose every term is common in the
        scope (all of them then required), and a search of the whole file, are ranked by FTS5
        in one query, with the file's statistics."""
        if n <= 0:
            return []
        tokens = scope_tokens(*scope)
        planned = self.plan(conn, terms, tokens, scope_rows=scope_rows, total_rows=total_rows)
        if planned is None:
            return []
        chosen, use_tokens, require_all = planned
        # Whose statistics: the user's, as the vector index and PostgreSQL partition.
        owner = scope_tokens(scope[0], None, None) if scope[0] is not None else tokens
        if owner and not require_all:
            # A term's document frequency: the rows whose own text holds it (as on
            # PostgreSQL): a context repeats its neighbours' words, and counting it would make
            # every word about four times as common.
            frequencies = [
                int(conn.execute(_COUNT, (term_expression(term, owner, own_text=True),)).fetchone()[0])
                for term in chosen
            ]
            row_ids, scores = partition_scores(
                conn,
                [term_expression(term, tokens) for term in chosen],
                frequencies=frequencies,
                context_weight=self.context_weight,
                statistics=self.statistics.of(
                    conn,
                    scope_expression(owner),
                    # a count that changes when the scope does: the user's rows (the same
                    # scope), else those of the user-less partition or the file (larger)
                    rows=total_rows if scope_rows is None else scope_rows,
                    tolerant=scope[0] is not None,
                ),
            )

            def best(count: int) -> list[tuple[int, float]]:
                return list(zip(row_ids[:count].tolist(), scores[:count].tolist()))
        else:
            match = match_expression(
                chosen, tokens if use_tokens is not None else None, require_all=require_all
            )

            def best(count: int) -> list[tuple[int, float]]:
                # Ranked inside FTS5 first, the filters applied to the best rows only: joining
                # every matching row to `memories` before ranking costs ~1.5 us a row.
                return [
                    (row_id, -rank)
                    for row_id, rank in conn.execute(
                        "SELECT rowid, bm25(memories_fts, 1.0, 0.0, ?) AS rank FROM memories_fts "
                        "WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?",
                        (self.context_weight, match, count),
                    )
                ]

        # Widen when the filters reject too many.
        fetch = n * 2
        while True:
            found = best(fetch)
            kept = {
                row[0]: row[1:]
                for row in conn.execute(
                    f"SELECT {SIGNAL_COLUMNS} FROM {CANDIDATES_FROM} WHERE {predicate}",
                    [reference, json.dumps([row_id for row_id, _ in found]), *params],
                )
            }
            hits = [Candidate(row_id, score, *kept[row_id]) for row_id, score in found if row_id in kept]
            if len(hits) >= n or len(found) < fetch:
                return hits[:n]
            fetch *= 4
