"""MicroBatcher (dspy_memory/embed/batching.py): concurrent callers' texts go through the model
together, and each caller gets exactly its own vectors, its own error, and no wait when alone.

Synchronization is by events: a gated model holds the first batch while other callers queue,
and the tests wait for the queue to reach a known length (a state, not a guessed duration)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dspy_memory import EmbeddingError
from dspy_memory.embed import HashEmbedder, MicroBatcher, make_embedder

PATIENCE = 60.0  # seconds a state may take to come about on a loaded machine


class GatedModel(HashEmbedder):
    """The hash embedder, counting its model calls; with `hold()`, the next call waits for
    `release()` (so callers can queue behind it); texts containing "bad" fail their batch."""

    def __init__(self) -> None:
        super().__init__(32, cache_size=0)
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self._gate: threading.Event | None = None  # for the next call
        self._held = threading.Event()

    def hold(self) -> None:
        self._gate = self._held = threading.Event()
        self.entered.clear()

    def release(self) -> None:
        self._held.set()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        gate, self._gate = self._gate, None
        if gate is not None:
            self.entered.set()
            assert gate.wait(PATIENCE), "the test never released the model"
        if any("bad" in text for text in texts):
            raise ValueError("this model cannot read 'bad'")
        return super()._embed_batch(texts)


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


def expected(texts: list[str]) -> np.ndarray:
    return HashEmbedder(32, cache_size=0).embed(texts)


def queue_behind_a_held_batch(batcher: MicroBatcher, model: GatedModel, requests: list[list[str]]):
    """One caller's batch held in the model while `requests` queue; returns (leader, futures)."""
    pool = ThreadPoolExecutor(max_workers=len(requests) + 1)
    model.hold()
    leader = pool.submit(batcher.embed, ["the first caller"])
    assert model.entered.wait(PATIENCE)
    futures = [pool.submit(batcher.embed, texts) for texts in requests]
    wait_until(lambda: batcher.waiting == len(requests), f"{len(requests)} callers queued")
    return pool, leader, futures


def test_concurrent_callers_get_exactly_their_own_vectors_in_one_model_call():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=0, max_batch=64)
    requests = [[f"caller {i} text {j}" for j in range(1 + i % 3)] for i in range(12)]
    pool, leader, futures = queue_behind_a_held_batch(batcher, model, requests)
    model.release()
    assert np.array_equal(leader.result(PATIENCE), expected(["the first caller"]))
    for texts, future in zip(requests, futures):
        assert np.array_equal(future.result(PATIENCE), expected(texts))
    # The first call ran alone; all twelve callers' 24 texts went through the model together.
    assert [len(call) for call in model.calls] == [1, sum(map(len, requests))]
    assert batcher.batches == 2
    pool.shutdown()


def test_batches_hold_at_most_max_batch_texts_and_keep_arrival_order():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=0, max_batch=4)
    requests = [["a1", "a2"], ["b1"], ["c1", "c2"], ["d1", "d2", "d3", "d4", "d5"], ["e1"]]
    pool, _, futures = queue_behind_a_held_batch(batcher, model, requests)
    model.release()
    for texts, future in zip(requests, futures):
        assert np.array_equal(future.result(PATIENCE), expected(texts))
    # In order: a+b (c would make 5), c, d alone (bigger than a batch), e.
    assert model.calls[1:] == [["a1", "a2", "b1"], ["c1", "c2"], ["d1", "d2", "d3", "d4", "d5"], ["e1"]]
    pool.shutdown()


def test_many_threads_at_once_each_get_their_own_vectors():
    batcher = MicroBatcher(GatedModel(), wait_ms=1, max_batch=16)
    start = threading.Barrier(24)

    def caller(index: int) -> list[tuple[list[str], np.ndarray]]:
        start.wait(PATIENCE)
        seen = []
        for round_ in range(20):
            texts = [f"thread {index} round {round_} text {j}" for j in range(1 + (index + round_) % 4)]
            seen.append((texts, batcher.embed(texts)))
        query = f"question of thread {index}"
        seen.append(([query], batcher.embed_query(query)[None]))
        return seen

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = [future.result(PATIENCE) for future in [pool.submit(caller, i) for i in range(24)]]
    for seen in results:
        for texts, vectors in seen:
            assert np.array_equal(vectors, expected(texts))
    assert batcher.waiting == 0


def test_one_callers_bad_text_fails_only_that_caller():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=0)
    requests = [["good one"], ["a bad text"], ["good two", "good three"]]
    pool, _, futures = queue_behind_a_held_batch(batcher, model, requests)
    model.release()
    assert np.array_equal(futures[0].result(PATIENCE), expected(["good one"]))
    with pytest.raises(EmbeddingError, match="cannot read 'bad'"):
        futures[1].result(PATIENCE)
    assert np.array_equal(futures[2].result(PATIENCE), expected(["good two", "good three"]))
    # The shared batch failed once; then each caller embedded its own texts.
    assert model.calls[1] == ["good one", "a bad text", "good two", "good three"]
    assert sorted(map(tuple, model.calls[2:])) == [("a bad text",), ("good one",), ("good two", "good three")]
    pool.shutdown()


def test_a_lone_caller_gets_its_error_from_one_model_call():
    model = GatedModel()
    with pytest.raises(EmbeddingError, match="cannot read 'bad'"):
        MicroBatcher(model).embed(["bad"])
    assert model.calls == [["bad"]]


def test_a_lone_caller_does_not_wait_for_company():
    batcher = MicroBatcher(GatedModel(), wait_ms=60_000)
    start = time.monotonic()
    for index in range(2):
        batcher.embed([f"alone {index}"])
    assert time.monotonic() - start < PATIENCE / 2  # a minute each if it waited


def test_after_a_shared_batch_a_leader_waits_for_company_up_to_the_bound_and_no_longer():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=1000, max_batch=64)
    pool, _, futures = queue_behind_a_held_batch(batcher, model, [["x"], ["y"]])
    model.release()
    [future.result(PATIENCE) for future in futures]  # a batch of two: company is likely
    start = time.monotonic()
    batcher.embed(["nobody came"])
    assert 1.0 <= time.monotonic() - start < PATIENCE / 2
    start = time.monotonic()
    batcher.embed(["alone again"])  # the last batch was alone: no wait
    assert time.monotonic() - start < 1.0
    assert model.calls[-2:] == [["nobody came"], ["alone again"]]
    pool.shutdown()


def test_a_waiting_leader_goes_as_soon_as_the_batch_is_full():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=60_000, max_batch=2)
    pool, _, futures = queue_behind_a_held_batch(batcher, model, [["x"], ["y"]])
    model.release()
    [future.result(PATIENCE) for future in futures]  # a shared batch: the next leader will wait
    start = time.monotonic()
    waiting_leader = pool.submit(batcher.embed, ["first"])
    wait_until(lambda: batcher.waiting == 1, "the leader waits for company")
    second = batcher.embed(["second"])
    assert np.array_equal(waiting_leader.result(PATIENCE), expected(["first"]))
    assert np.array_equal(second, expected(["second"]))
    assert time.monotonic() - start < PATIENCE / 2  # not the full minute
    assert model.calls[-1] == ["first", "second"]
    pool.shutdown()


def test_close_with_callers_queued_serves_them_and_refuses_new_ones():
    model = GatedModel()
    batcher = MicroBatcher(model, wait_ms=0)
    requests = [["queued one"], ["queued two"]]
    pool, leader, futures = queue_behind_a_held_batch(batcher, model, requests)
    closer = threading.Thread(target=batcher.close)
    closer.start()
    closer.join(PATIENCE)
    assert not closer.is_alive()  # close() does not wait for the model
    with pytest.raises(EmbeddingError, match="was closed"):
        batcher.embed(["too late"])
    model.release()
    assert np.array_equal(leader.result(PATIENCE), expected(["the first caller"]))
    for texts, future in zip(requests, futures):
        assert np.array_equal(future.result(PATIENCE), expected(texts))
    pool.shutdown()


def test_cached_texts_do_not_queue_behind_a_running_batch():
    model = GatedModel()
    model.cache_size = 100
    batcher = MicroBatcher(model, wait_ms=0)
    cached = batcher.embed(["seen before"])
    pool, leader, _ = queue_behind_a_held_batch(batcher, model, [])
    assert np.array_equal(batcher.embed(["seen before"]), cached)  # while the model is held
    model.release()
    leader.result(PATIENCE)
    pool.shutdown()


def test_the_batcher_is_an_embedder_with_the_inner_ones_name_dim_and_extras():
    inner = HashEmbedder(16)
    batcher = MicroBatcher(inner)
    assert (batcher.name, batcher.dim) == (inner.name, inner.dim)
    assert np.array_equal(batcher.embed_query("Ada"), inner.embed_query("Ada"))
    assert batcher.cache_hits == inner.cache_hits  # anything else is the inner embedder's
    assert batcher.embed([]).shape == (0, 16)
    with pytest.raises(TypeError, match="list of texts"):
        batcher.embed("one text")
    with pytest.raises(TypeError, match="strings"):
        batcher.embed(["fine", 3])
    assert isinstance(make_embedder("local"), MicroBatcher)
    assert isinstance(make_embedder("test"), HashEmbedder)  # hashing gains nothing from batches


def test_minilm_vectors_batched_with_other_texts_match_their_own(minilm):
    texts = [
        "Ada moved to Denver last month.",
        "ok",
        "The quarterly review of the infrastructure budget was moved to the second week of May.",
        "What does Ada prefer for breakfast?",
    ]
    minilm.clear_cache()
    alone = np.concatenate([minilm.embed([text]) for text in texts])
    minilm.clear_cache()
    together = minilm.embed(texts)  # padded to the longest text; the padding is masked out
    minilm.clear_cache()
    assert np.abs(together - alone).max() < 1e-5
    assert (np.sum(together * alone, axis=1) > 0.99999).all()

    batcher = MicroBatcher(minilm, wait_ms=1)
    start = threading.Barrier(len(texts))

    def caller(text: str) -> np.ndarray:
        start.wait(PATIENCE)
        return batcher.embed([text])[0]

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        through = np.stack(list(pool.map(caller, texts)))
    minilm.clear_cache()
    assert np.abs(through - alone).max() < 1e-5
