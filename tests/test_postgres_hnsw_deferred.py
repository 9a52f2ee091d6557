"""PostgreSQL builds a partition's HNSW index only once the partition outgrows exact_max_rows:
below it searches are exact scans (and inserts and erasures pay no graph), above it they go
through the partition's own index; the build is safe with two writers, a failed build is
retried, an emptied partition loses its index and a store made with the old table-wide index
is moved to per-partition ones when it is opened."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.postgres.vectors import LEGACY_INDEX, index_name
from dspy_memory.store.queries import TimeView
from dspy_memory.types import Scope

from .pg import Raw, fresh_schema

EMBEDDER = HashEmbedder(64)
TEXTS = [
    f"memory {i} of {i % 7} kind {i % 13} about {['tea', 'maps', 'boats', 'rain'][i % 4]}" for i in range(120)
]


@pytest.fixture
def pg_url(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return url


def partition_indexes(url: str) -> dict[str, bool]:
    """{index name: valid} of the HNSW indexes on the vector table."""
    with Raw(url) as raw:
        rows = raw.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND c.relnamespace = current_schema()::regnamespace"
        ).fetchall()
    return {row[0]: bool(row[1]) for row in rows}


def name_of(url: str, user: str) -> str:
    with Raw(url) as raw:
        return index_name(raw.execute("SELECT hashtext(?)", (user,)).fetchone()[0])


def nearest(memory: Memory, query: str, user: str, k: int) -> list[tuple[str, float]]:
    """(content, cosine) of the store's dense search, best first."""
    scope = Scope(user_id=user)
    view = TimeView.at()
    hits = memory.store.dense_search(
        EMBEDDER.embed_query(query),
        scope,
        memory.store.memory_predicate(scope, view),
        k,
        coarse=k,
        reference=view.as_of,
    )
    contents = memory.store.contents([hit.row_id for hit in hits])
    return [(contents[hit.row_id], hit.score) for hit in hits]


def exact(query: str, texts: list[str], k: int) -> list[tuple[str, float]]:
    """The `k` texts nearest to `query` by cosine, computed here, with their similarities."""
    vectors = EMBEDDER.embed(texts)
    q = EMBEDDER.embed([query])[0]
    scores = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    return [(texts[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:k]]


def assert_exact(found: list[tuple[str, float]], query: str, texts: list[str], k: int) -> None:
    """`found` is the exact answer: the same similarity at every rank, the same texts (where
    two texts tie, either order)."""
    expected = exact(query, texts, k)
    assert np.allclose([score for _, score in found], [score for _, score in expected], atol=1e-5)
    last = expected[-1][1]
    assert {c for c, s in found if s > last + 1e-5} == {c for c, s in expected if s > last + 1e-5}


def explain(memory: Memory, user: str) -> str:
    store = memory.store
    with store.snapshot() as conn:
        key_hash = store.vectors._index_of(conn, user)
        sql, params = store.vectors.nearest_query(
            EMBEDDER.embed_query("tea"), 10, partition=user, agent_id=None, run_id=None, key_hash=key_hash
        )
        conn.execute("ANALYZE memory_vectors")
        # A tiny table is cheaper to sort than to search: show that the index can serve the query.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        return "\n".join(row[0] for row in conn.execute("EXPLAIN " + sql, params).fetchall())


def test_a_partition_within_exact_max_rows_has_no_index_and_its_search_is_exact(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 200}) as memory:
        memory.add(TEXTS, user_id="ada", infer=False)
        assert partition_indexes(pg_url) == {}
        for query in ("memory 42 of 0 kind 3", "boats in the rain", "kind 5 about maps"):
            assert_exact(nearest(memory, query, "ada", 10), query, TEXTS, 10)


def test_the_add_that_takes_a_partition_past_exact_max_rows_builds_its_index_and_search_uses_it(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 100}) as memory:
        memory.add(TEXTS[:100], user_id="ada", infer=False)
        memory.add(TEXTS[:30], user_id="bob", infer=False)
        assert partition_indexes(pg_url) == {}
        memory.add(TEXTS[100:], user_id="ada", infer=False)
        assert partition_indexes(pg_url) == {name_of(pg_url, "ada"): True}  # bob's stays without
        assert name_of(pg_url, "ada") in explain(memory, "ada")
        assert "hnsw" not in explain(memory, "bob").lower()
        found = [content for content, _ in nearest(memory, "memory 42 of 0 kind 3", "ada", 5)]
        best = {content for content, _ in exact("memory 42 of 0 kind 3", TEXTS, 5)}
        assert len(set(found) & best) >= 4  # HNSW is approximate
        assert {content for content, _ in nearest(memory, "tea", "bob", 30)} == set(TEXTS[:30])


def test_two_writers_crossing_the_threshold_at_once_build_one_valid_index(pg_url):
    errors: list[BaseException] = []
    with (
        Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as first,
        Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as second,
    ):
        start = threading.Barrier(2)

        def write(memory: Memory, texts: list[str]) -> None:
            try:
                start.wait()
                for offset in range(0, len(texts), 10):
                    memory.add(texts[offset : offset + 10], user_id="ada", infer=False)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [
            threading.Thread(target=write, args=(first, TEXTS[:60])),
            threading.Thread(target=write, args=(second, TEXTS[60:])),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert partition_indexes(pg_url) == {name_of(pg_url, "ada"): True}
        assert len(first.get_all(user_id="ada", limit=500)) == len(TEXTS)


def test_an_invalid_index_left_by_a_failed_build_is_built_again_by_the_next_write(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        memory.add(TEXTS[:60], user_id="ada", infer=False)
        name = name_of(pg_url, "ada")
        with Raw(pg_url) as raw:  # what an interrupted CREATE INDEX CONCURRENTLY leaves
            raw.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(?)", (name,))
        memory.store.vectors._indexed.clear()  # as a new process would know it
        assert partition_indexes(pg_url) == {name: False}
        assert_exact(nearest(memory, "tea", "ada", 60), "tea", TEXTS[:60], 60)  # exact meanwhile
        memory.add(TEXTS[60:62], user_id="ada", infer=False)
        assert partition_indexes(pg_url) == {name: True}


def test_a_partition_that_shrinks_keeps_its_index_and_an_emptied_one_loses_it(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        records = memory.add(TEXTS[:60], user_id="ada", infer=False).memories
        for record in records[:20]:
            memory.delete(record.id, user_id="ada")
        assert partition_indexes(pg_url) == {name_of(pg_url, "ada"): True}
        assert_exact(nearest(memory, "rain", "ada", 40), "rain", TEXTS[20:60], 40)
        memory.delete_scope(user_id="ada")
        assert partition_indexes(pg_url) == {}
        memory.add(TEXTS[:60], user_id="ada", infer=False)  # a partition filled again gets one again
        assert partition_indexes(pg_url) == {name_of(pg_url, "ada"): True}


def test_a_store_with_the_old_table_wide_index_moves_to_partition_indexes_when_opened(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        memory.add(TEXTS[:80], user_id="ada", infer=False)
        memory.add(TEXTS[:10], user_id="bob", infer=False)
    with Raw(pg_url) as raw:  # as a store made before issue 30 has it
        raw.execute(f"DROP INDEX {name_of(pg_url, 'ada')}")
        raw.execute(f"CREATE INDEX {LEGACY_INDEX} ON memory_vectors USING hnsw (embedding vector_cosine_ops)")
    assert partition_indexes(pg_url) == {LEGACY_INDEX: True}
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        assert partition_indexes(pg_url) == {name_of(pg_url, "ada"): True}
        assert len(nearest(memory, "tea", "ada", 10)) == 10
