"""PostgreSQL indexes a user's vectors in blocks of exact_max_rows rows (a partial HNSW index per
fixed range of row ids), built in the background after the write that fills a block; the rows
after the last block, and those of a block whose build is pending, are scanned exactly. A search merges the blocks' nearest rows with the exact scan's, and
the planner serves each block through its own index; erasure drops an emptied block's index;
two writers build each block once; an invalid index is rebuilt; a store with the indexes of
before (one per partition, or one for the table) is moved to blocks when it is opened."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import ConfigError
from dspy_memory.store.postgres.hnsw_blocks import LEGACY_INDEX, Blocks, index_name
from dspy_memory.store.queries import TimeView
from dspy_memory.types import Scope

from .pg import Raw, fresh_schema

EMBEDDER = HashEmbedder(64)
TEXTS = [
    f"memory {i} of {i % 7} kind {i % 13} about {['tea', 'maps', 'boats', 'rain'][i % 4]}" for i in range(130)
]
QUERIES = ("memory 42 of 0 kind 3", "boats in the rain", "kind 5 about maps", "tea")


@pytest.fixture
def pg_url(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return url


def hnsw_indexes(url: str) -> dict[str, bool]:
    """{index name: valid} of the HNSW indexes on the vector table."""
    with Raw(url) as raw:
        rows = raw.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND c.relnamespace = current_schema()::regnamespace"
        ).fetchall()
    return {row[0]: bool(row[1]) for row in rows}


def row_ids(url: str, user: str) -> list[int]:
    with Raw(url) as raw:
        rows = raw.execute(
            "SELECT row_id FROM memory_vectors WHERE partition_key = ? ORDER BY row_id", (user,)
        )
        return [row[0] for row in rows.fetchall()]


def block_names(url: str, user: str, size: int) -> dict[str, bool]:
    """{name: True} of the blocks `user`'s rows fill, `size` rows each, from the first row."""
    with Raw(url) as raw:
        key_hash = raw.execute("SELECT hashtext(?)", (user,)).fetchone()[0]
    ids, names, first = row_ids(url, user), {}, 0
    for end in range(size, len(ids) + 1, size):
        names[f"mv_hnsw_{'n' if key_hash < 0 else 'p'}{abs(key_hash)}_{first}_{ids[end - 1]}"] = True
        first = ids[end - 1]
    return names


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
    """The plan of the dense search's nearest-rows query in `user`'s partition."""
    vectors = memory.store.vectors
    with memory.store.snapshot() as conn:
        key_hash, blocks = vectors.blocks.searchable(conn.raw, user, 10**9)
        sql, params = vectors.nearest_query(
            EMBEDDER.embed_query("tea"),
            10,
            partition=user,
            agent_id=None,
            run_id=None,
            key_hash=key_hash,
            ranges=Blocks.ranges(blocks),
        )
        conn.execute("ANALYZE memory_vectors")
        # A tiny table is cheaper to sort than to search: show that the indexes can serve it.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        return "\n".join(row[0] for row in conn.execute("EXPLAIN " + sql, params).fetchall())


def settled(memory: Memory) -> None:
    """Wait for the block builds the writes asked for (they run in the background)."""
    assert memory.store.vectors.wait_for_builds(60)


def test_a_block_is_indexed_after_the_write_that_fills_it_and_the_tail_stays_unindexed(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        memory.add(TEXTS[:49], user_id="ada", infer=False)
        memory.add(TEXTS[:30], user_id="bob", infer=False)
        settled(memory)
        assert hnsw_indexes(pg_url) == {}
        memory.add(TEXTS[49:50], user_id="ada", infer=False)
        settled(memory)
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 50) and len(hnsw_indexes(pg_url)) == 1
        memory.add(TEXTS[50:], user_id="ada", infer=False)  # 130 rows: two blocks and a tail of 30
        settled(memory)
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 50) and len(hnsw_indexes(pg_url)) == 2
        for query in QUERIES:
            assert_exact(nearest(memory, query, "bob", 10), query, TEXTS[:30], 10)


def test_search_over_small_blocks_and_the_tail_equals_an_exact_scan(pg_url):
    """Blocks of 30 rows are searched with ef_search 40: the graph reaches every row, so the
    merged answer is the exact one, whether the nearest rows are in a block or in the tail."""
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 30}) as memory:
        for offset in range(0, len(TEXTS), 20):
            memory.add(TEXTS[offset : offset + 20], user_id="ada", infer=False)
        settled(memory)
        assert len(hnsw_indexes(pg_url)) == 4  # 120 rows in blocks, 10 in the tail
        for query in (*QUERIES, TEXTS[-1], TEXTS[-3]):  # the last two: nearest in the tail
            assert_exact(nearest(memory, query, "ada", 10), query, TEXTS, 10)
            assert_exact(nearest(memory, query, "ada", 40), query, TEXTS, 40)


def test_a_block_holding_most_of_the_nearest_rows_is_asked_again_for_all_of_them(pg_url):
    """Each of three blocks is first asked for its share (40 of 60): when the nearest rows all
    sit in one block, that block is asked again for 60, so none of them is missed."""
    plain = [f"plain note {i} on {['tea', 'maps', 'boats'][i % 3]}" for i in range(100)]
    orchids = [f"rare orchid {i} in bloom" for i in range(100)]
    later = [f"later note {i} on rain" for i in range(100)]
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 100}) as memory:
        for texts in (plain, orchids, later):
            memory.add(texts, user_id="ada", infer=False)
        settled(memory)
        assert len(hnsw_indexes(pg_url)) == 3
        found = nearest(memory, "orchid", "ada", 60)
    assert len(found) == 60 and all("orchid" in content for content, _ in found)


def test_the_planner_searches_each_block_through_its_own_index_and_the_tail_exactly(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        memory.add(TEXTS, user_id="ada", infer=False)
        settled(memory)
        plan = explain(memory, "ada")
    names = block_names(pg_url, "ada", 40)
    assert len(names) == 3
    assert all(f"Index Scan using {name}" in plan for name in names)
    assert plan.count("Index Scan using mv_hnsw_") == 3  # the tail's rows: no HNSW index
    assert f"(row_id > {row_ids(pg_url, 'ada')[119]})" in plan  # the tail, by its range of row ids


def test_erasure_keeps_a_partly_erased_block_drops_an_emptied_one_and_search_stays_exact(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        records = memory.add(TEXTS[:100], user_id="ada", infer=False).memories
        settled(memory)
        first, second = block_names(pg_url, "ada", 40)
        for record in records[:10] + records[40:80]:  # part of the first block, all the second
            memory.delete(record.id, user_id="ada")
        assert hnsw_indexes(pg_url) == {first: True}
        kept = TEXTS[10:40] + TEXTS[80:100]
        for query in QUERIES:
            assert_exact(nearest(memory, query, "ada", 20), query, kept, 20)
        memory.add(TEXTS[100:], user_id="ada", infer=False)  # the tail after the first block: 20 + 30
        settled(memory)
        end = first.rsplit("_", 1)[1]
        tail = [row for row in row_ids(pg_url, "ada") if row > int(end)]
        assert hnsw_indexes(pg_url) == {first: True, f"{first.rsplit('_', 2)[0]}_{end}_{tail[39]}": True}
        for query in QUERIES:
            assert_exact(nearest(memory, query, "ada", 20), query, kept + TEXTS[100:], 20)
        memory.delete_scope(user_id="ada")
        assert hnsw_indexes(pg_url) == {}
        memory.add(TEXTS[:45], user_id="ada", infer=False)  # a partition filled again gets blocks again
        settled(memory)
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 40)


def test_two_writers_filling_blocks_at_once_build_each_block_once(pg_url):
    errors: list[BaseException] = []
    with (
        Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 25}) as first,
        Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 25}) as second,
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
        settled(first)
        settled(second)
        first.add("an extra note about tea", user_id="ada", infer=False)  # builds what a skipped build left
        settled(first)
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 25)
        assert len(hnsw_indexes(pg_url)) == 5
        for memory in (first, second):
            for query in QUERIES:
                assert_exact(
                    nearest(memory, query, "ada", 10), query, [*TEXTS, "an extra note about tea"], 10
                )


def test_an_invalid_block_index_is_scanned_exactly_and_built_again_by_the_next_write(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        memory.add(TEXTS[:90], user_id="ada", infer=False)
        settled(memory)
        first, second = block_names(pg_url, "ada", 40)
        with Raw(pg_url) as raw:  # what an interrupted CREATE INDEX CONCURRENTLY leaves
            raw.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(?)", (first,))
        memory.store.vectors.blocks._blocks.clear()  # as a new process would know it
        assert hnsw_indexes(pg_url) == {first: False, second: True}
        for query in QUERIES:
            assert_exact(nearest(memory, query, "ada", 50), query, TEXTS[:90], 50)
        memory.add(TEXTS[90:91], user_id="ada", infer=False)
        settled(memory)
        assert hnsw_indexes(pg_url) == {first: True, second: True}


def holding_off_builds(url: str) -> Raw:
    """A connection in a transaction that has written to the vector table (ROW EXCLUSIVE): a
    CREATE INDEX CONCURRENTLY, once it has entered its index in the catalog (not valid yet),
    waits for it to end, as it waits for any writer that was already running."""
    raw = Raw(url)
    raw.execute("BEGIN")
    raw.execute("LOCK TABLE memory_vectors IN ROW EXCLUSIVE MODE")
    return raw


def wait_for_entry(url: str) -> None:
    deadline = time.monotonic() + 20
    while not hnsw_indexes(url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hnsw_indexes(url), "the build did not start"


def test_the_write_that_fills_a_block_returns_before_its_build_and_searches_meanwhile_are_exact(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        memory.add(TEXTS[:30], user_id="ada", infer=False)
        other = holding_off_builds(pg_url)
        try:
            memory.add(TEXTS[30:90], user_id="ada", infer=False)  # fills two blocks
            wait_for_entry(pg_url)
            assert not memory.store.vectors.wait_for_builds(0.5)  # still building
            assert not any(hnsw_indexes(pg_url).values())
            for query in QUERIES:
                assert_exact(nearest(memory, query, "ada", 50), query, TEXTS[:90], 50)
            memory.add(TEXTS[90:95], user_id="ada", infer=False)  # writers never wait for a build
        finally:
            other.rollback()
            other.close()
        settled(memory)
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 40) and len(hnsw_indexes(pg_url)) == 2
        for query in QUERIES:
            assert_exact(nearest(memory, query, "ada", 50), query, TEXTS[:95], 50)


def test_closing_waits_a_bounded_time_for_a_build_and_the_next_opening_builds_what_it_cut_off(pg_url):
    memory = Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40})
    memory.store.vectors.builds.close_wait_s = 0.3
    other = holding_off_builds(pg_url)
    try:
        memory.add(TEXTS[:50], user_id="ada", infer=False)
        wait_for_entry(pg_url)
        start = time.monotonic()
        memory.close()
        assert time.monotonic() - start < 5
    finally:
        other.rollback()
        other.close()
    # What a CREATE INDEX CONCURRENTLY cut off leaves: its index, not valid (never used).
    assert list(hnsw_indexes(pg_url).values()) == [False]
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 40)
        assert_exact(nearest(memory, "tea", "ada", 10), "tea", TEXTS[:50], 10)


def test_erasure_right_after_the_write_that_fills_a_block_waits_for_its_build_and_forgets_the_rows(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        memory.add(TEXTS[:45], user_id="ada", infer=False)
        memory.add(TEXTS[:10], user_id="bob", infer=False)
        memory.delete_scope(user_id="ada")  # compact()'s VACUUM would wait for the build's lock
        assert hnsw_indexes(pg_url) == {}
        assert row_ids(pg_url, "ada") == []
        assert_exact(nearest(memory, "tea", "bob", 5), "tea", TEXTS[:10], 5)


def analyzed(url: str, table: str) -> bool:
    """Whether `table` was analyzed by a statement (autovacuum's own analyses are not counted)."""
    with Raw(url) as raw:
        row = raw.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ?",
            (table,),
        ).fetchone()
    return row is not None and row[0] is not None


def test_the_write_path_tables_are_analyzed_in_the_background_as_a_store_grows_from_empty(pg_url):
    texts = [f"note {i} about {['tea', 'maps'][i % 2]}" for i in range(1600)]
    with Memory(pg_url, embedder=EMBEDDER) as memory:
        memory.add(texts[:900], user_id="ada", infer=False)
        settled(memory)
        assert not analyzed(pg_url, "memories")  # below 1,000 rows: left to autovacuum
        memory.add(texts[900:], user_id="ada", infer=False)
        settled(memory)
        assert all(
            analyzed(pg_url, table) for table in ("memories", "episodes", "memory_sources", "memory_vectors")
        )


def test_a_block_index_dropped_by_another_process_leaves_its_rows_searchable(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 40}) as memory:
        memory.add(TEXTS[:100], user_id="ada", infer=False)
        settled(memory)
        memory.search("tea", user_id="ada", recipe="dense")  # this process knows both blocks
        first, _ = block_names(pg_url, "ada", 40)
        with Raw(pg_url) as raw:
            raw.execute(f"DROP INDEX {first}")
        for query in QUERIES:
            assert_exact(nearest(memory, query, "ada", 10), query, TEXTS[:100], 10)


def test_a_store_with_the_indexes_of_before_moves_to_blocks_when_opened(pg_url):
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        memory.add(TEXTS[:80], user_id="ada", infer=False)
        memory.add(TEXTS[:10], user_id="bob", infer=False)
        settled(memory)
    with Raw(pg_url) as raw:  # as stores made before blocks have them
        for name in hnsw_indexes(pg_url):
            raw.execute(f"DROP INDEX {name}")
        ada = index_name(raw.execute("SELECT hashtext(?)", ("ada",)).fetchone()[0])
        raw.execute(
            f"CREATE INDEX {ada} ON memory_vectors USING hnsw (embedding vector_cosine_ops) "
            "WHERE hashtext(partition_key) = hashtext('ada')"
        )
        raw.execute(f"CREATE INDEX {LEGACY_INDEX} ON memory_vectors USING hnsw (embedding vector_cosine_ops)")
    assert hnsw_indexes(pg_url) == {ada: True, LEGACY_INDEX: True}
    with Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 50}) as memory:
        assert hnsw_indexes(pg_url) == block_names(pg_url, "ada", 50)
        assert_exact(nearest(memory, "tea", "ada", 10), "tea", TEXTS[:80], 10)


def test_a_block_size_below_one_is_refused_clearly(pg_url):
    with pytest.raises(ConfigError, match="exact_max_rows"):
        Memory(pg_url, embedder=EMBEDDER, postgres={"exact_max_rows": 0})
