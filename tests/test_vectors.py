import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.sqlite.vectors import _code_words, _hamming, sign_codes

TEXTS = [f"memory number {i} about topic {i % 17} and place {i % 5}" for i in range(400)]


def open_memory(path, **retrieval):
    return Memory(path, embedder=HashEmbedder(128), retrieval=retrieval)


def test_numpy_hamming_matches_vec0(db_path):
    with open_memory(db_path) as memory:
        memory.add(TEXTS[:50], user_id="u")
        query = memory.embedder.embed_query("topic 3")
        code = sign_codes(query[None, :])[0]
        with memory.store.snapshot() as conn:
            vec0 = dict(
                conn.execute(
                    "SELECT rowid, distance FROM memory_vec WHERE code MATCH vec_bit(?) AND k = 50",
                    (code.tobytes(),),
                ).fetchall()
            )
            rows = conn.execute("SELECT row_id, code FROM memory_vectors").fetchall()
        codes = np.frombuffer(b"".join(r[1] for r in rows), np.uint8).reshape(len(rows), -1)
        mine = _hamming(_code_words(codes), _code_words(code[None, :])[:, 0])
        assert {r[0]: int(d) for r, d in zip(rows, mine)} == {k: int(v) for k, v in vec0.items()}


@pytest.mark.parametrize("cache_min_rows", [0, 10**9])
def test_dense_search_is_exact_on_small_sets(db_path, cache_min_rows):
    """With the coarse pass wide enough to hold everything, dense search is exact cosine."""
    with open_memory(db_path, vector_cache_min_rows=cache_min_rows, coarse_min=1000) as memory:
        memory.add(TEXTS, user_id="u")
        for query in ("topic 3 place 1", "memory number 42", "something else entirely"):
            vector = memory.embedder.embed_query(query)
            exact = np.sort(memory.embedder.embed(TEXTS) @ vector)[::-1][:10]
            hits = memory.search(query, user_id="u", k=10, recipe="dense")
            assert np.allclose([h.details.dense_similarity for h in hits], exact, atol=1e-5)


def test_cache_and_vec0_paths_agree(tmp_path):
    results = []
    for cache_min_rows in (0, 10**9):
        with open_memory(
            str(tmp_path / f"{cache_min_rows}.db"), vector_cache_min_rows=cache_min_rows
        ) as memory:
            memory.add(TEXTS, user_id="u")
            memory.add(TEXTS[:100], user_id="other")
            results.append([h.content for h in memory.search("topic 3", user_id="u", k=10, recipe="dense")])
    assert results[0] == results[1]


def test_code_cache_follows_writes_from_other_connections(db_path):
    """The cache of one Memory must see rows added and deleted through another."""
    reader = open_memory(db_path, vector_cache_min_rows=0)
    writer = open_memory(db_path, vector_cache_min_rows=0)
    writer.add(TEXTS[:20], user_id="u")
    assert len(reader.search("memory number", user_id="u", k=50, recipe="dense")) == 20
    added = writer.add("a brand new memory about zeppelins", user_id="u").memories[0]
    assert reader.search("zeppelins", user_id="u", k=1, recipe="dense")[0].id == added.id
    block = reader.store.vectors.cache._blocks["u"]
    assert block.size == 21  # appended, not reloaded from scratch
    writer.delete(added.id, user_id="u")
    hits = reader.search("zeppelins", user_id="u", k=50, recipe="dense")
    assert added.id not in {h.id for h in hits}
    assert reader.store.vectors.cache._blocks["u"].size == 20
    reader.close()
    writer.close()


def test_cache_respects_agent_and_run_filters(db_path):
    with open_memory(db_path, vector_cache_min_rows=0) as memory:
        memory.add(TEXTS[:30], user_id="u", agent_id="a1")
        memory.add(TEXTS[30:60], user_id="u", agent_id="a2", run_id="r")
        hits = memory.search("memory", user_id="u", agent_id="a2", k=50, recipe="dense")
        assert len(hits) == 30 and all(h.memory.agent_id == "a2" for h in hits)
        assert len(memory.search("memory", user_id="u", run_id="r", k=50, recipe="dense")) == 30


def test_cache_evicts_least_recently_used_partitions(db_path):
    with open_memory(db_path, vector_cache_min_rows=0, vector_cache_max_rows=25) as memory:
        memory.add(TEXTS[:20], user_id="u1")
        memory.add(TEXTS[20:40], user_id="u2")
        memory.search("memory", user_id="u1", recipe="dense")
        memory.search("memory", user_id="u2", recipe="dense")
        assert list(memory.store.vectors.cache._blocks) == ["u2"]
        assert len(memory.search("memory", user_id="u1", k=20, recipe="dense")) == 20
        assert list(memory.store.vectors.cache._blocks) == ["u1"]


def test_restrictive_filters_widen_the_coarse_pass(db_path):
    with open_memory(db_path, coarse_min=8, coarse_factor=1) as memory:
        memory.add(TEXTS[:200], user_id="u", metadata={"rare": False})
        memory.add("the only rare one about topic 3", user_id="u", metadata={"rare": True})
        hits = memory.search("memory number topic", user_id="u", recipe="dense", filters={"rare": True})
        assert [h.content for h in hits] == ["the only rare one about topic 3"]
