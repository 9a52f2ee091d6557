"""PostgreSQL's keyword index cuts words where FTS5's unicode61 cuts them (store/postgres/
keywords.py, schema version 13): the same text and query match the same memories on both
backends, and a database indexed before the change is indexed again when it is opened. Stemming
and stopwords differ by choice (PostgreSQL's `english`, FTS5's Porter with every word kept), so
the queries here are words both stem alike and neither drops."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .pg import Raw, fresh_schema

TEXTS = [
    "It's one of those days, don't you think",
    "We walked on the beach at noon",
    "Use the team/support channel for advice/assistance",
    "Ask J.K. about the well-known café",
    "The players' tickets cost 3.5 dollars",
    "Ada's dog tried running in the park",
]
QUERIES = [
    "team",
    "support",
    "advice",
    "assistance",
    "j",
    "k",
    "well",
    "known",
    "3",
    "5",
    "player",
    "tried",
    "run",
    "café",
    "dogs",
    "walk",
    "beach",
]


@pytest.fixture
def pg_url(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return url


def open_memory(path):
    # No conversation context: each memory is found by its own words alone.
    return Memory(
        path, embedder=HashEmbedder(32), retrieval={"turn_context_before": 0, "turn_context_after": 0}
    )


def matches(path):
    with open_memory(path) as memory:
        memory.add(TEXTS, user_id="ada", infer=False)
        return {
            query: sorted(
                hit.memory.content for hit in memory.search(query, user_id="ada", recipe="keyword", k=20)
            )
            for query in QUERIES
        }


def test_the_same_text_and_query_match_the_same_memories_on_both_backends(pg_url, tmp_path):
    """Slashes, initials, decimal points and hyphens cut words as FTS5 cuts them (PostgreSQL's
    parser alone reads "team/support" as a path, "J.K." as a host, "3.5" as one number)."""
    sqlite, postgres = matches(str(tmp_path / "memory.db")), matches(pg_url)
    differing = {
        query: (sqlite[query], postgres[query]) for query in QUERIES if sqlite[query] != postgres[query]
    }
    assert differing == {}
    assert all(sqlite[query] for query in QUERIES)


def terms_of(url):
    with Raw(url) as raw:
        return dict(
            raw.conn.execute("SELECT row_id, terms::text FROM memory_terms ORDER BY row_id").fetchall()
        )


def test_a_database_indexed_before_words_were_cut_as_fts5_cuts_them_is_indexed_again_when_opened(pg_url):
    conversation = [
        {"role": "user", "name": "Ada", "content": "It's one of those days."},
        {"role": "assistant", "content": "Use the team/support channel."},
        {"role": "user", "name": "Ada", "content": "J.K. said the same."},
    ]
    with Memory(pg_url, embedder=HashEmbedder(32)) as memory:
        memory.add(conversation, user_id="ada", infer=False)
        memory.add("a note of its own", user_id="ada", infer=False)
    indexed = terms_of(pg_url)
    # What version 12 left: every row's words as PostgreSQL's parser alone cuts them, and no
    # function of version 13.
    with Raw(pg_url) as raw:
        raw.conn.execute(
            "UPDATE memory_terms AS t SET terms = setweight(to_tsvector('english', m.content), 'A') "
            "FROM memories AS m WHERE m.row_id = t.row_id"
        )
        raw.conn.execute("DROP FUNCTION words_vector(text)")
        # ... nor what later versions added (15: expiry columns, retention policies).
        for table in ("memories", "episodes"):
            raw.conn.execute(f"ALTER TABLE {table} DROP COLUMN expires_at")
        raw.conn.execute("DROP TABLE retention_settings")
        raw.conn.execute("DELETE FROM schema_migrations WHERE version >= 13")
    assert terms_of(pg_url) != indexed
    with Memory(pg_url, embedder=HashEmbedder(32)) as memory:
        assert terms_of(pg_url) == indexed
        hits = memory.search("support", user_id="ada", recipe="keyword", k=5)
    assert hits and hits[0].memory.content == "Use the team/support channel."
