"""The background writer: add returns once episodes are on disk; bursts are one LM call."""

from __future__ import annotations

import threading
import time

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Scope

from .scripted import Gate


def remember_each_turn(call):
    return {"ops": [{"action": "ADD", "content": f"Said: {turn['text']}"} for turn in call.inputs["turns"]]}


def test_add_returns_before_the_lm_is_called_and_flush_drains(db_path):
    gate = Gate()
    lm = scripted_lm(gate.wrap(remember_each_turn))
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"debounce_seconds": 0}) as memory:
        result = memory.add("I moved to Denver.", user_id="ada", background=True)
        assert result.queued and result.mode == "fused" and result.ops == []
        # The episode is on disk already, pending, while the LM has not answered.
        [episode] = memory.store.episodes.list(Scope(user_id="ada"))
        assert episode.status == "pending" and episode.infer
        assert gate.entered.wait(timeout=10)
        assert memory.get_all(user_id="ada") == []
        gate.opened.set()
        [done] = memory.flush(timeout=30)
        assert [op.content for op in done.ops] == ["Said: I moved to Denver."]
        assert done.usage.lm_calls == 1
        assert [m.content for m in memory.get_all(user_id="ada")] == ["Said: I moved to Denver."]


def test_a_burst_in_one_scope_is_one_lm_call(db_path):
    lm = scripted_lm(remember_each_turn)
    settings = {"debounce_seconds": 0.5, "max_wait_seconds": 30}
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write=settings) as memory:
        for i in range(5):
            memory.add(f"message {i}", user_id="ada", background=True)
            time.sleep(0.05)  # within the debounce window: postpones processing
        memory.add("hello from bob", user_id="bob", background=True)
        time.sleep(1.5)  # let the window pass without flushing
        assert len(lm.engine.calls) == 2
        by_scope = {len(call.inputs["turns"]): call for call in lm.engine.calls}
        assert sorted(by_scope) == [1, 5]
        assert [t["text"] for t in by_scope[5].inputs["turns"]] == [f"message {i}" for i in range(5)]
        results = memory.flush()
        assert sorted(len(r.episodes) for r in results) == [1, 5]


def test_max_batch_and_max_wait_bound_a_batch(db_path):
    lm = scripted_lm(remember_each_turn)
    settings = {"debounce_seconds": 60, "max_wait_seconds": 60, "max_batch": 3}
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write=settings) as memory:
        memory.add([f"m{i}" for i in range(7)], user_id="ada", background=True)
        memory.flush(timeout=30)
        assert [len(call.inputs["turns"]) for call in lm.engine.calls] == [3, 3, 1]


def test_close_drains_the_queue(db_path):
    lm = scripted_lm(remember_each_turn)
    memory = Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"debounce_seconds": 30})
    memory.add("remember me", user_id="ada", background=True)
    memory.close()
    with Memory(db_path, embedder=HashEmbedder(64)) as reopened:
        assert [m.content for m in reopened.get_all(user_id="ada")] == ["Said: remember me"]
        assert reopened.store.episodes.list(Scope(user_id="ada"))[0].status == "done"


def test_many_threads_adding_at_once(db_path):
    lm = scripted_lm(remember_each_turn)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"debounce_seconds": 0.05}) as memory:

        def chat(user):
            for i in range(10):
                memory.add(f"{user} says {i}", user_id=user, background=True)

        threads = [threading.Thread(target=chat, args=(f"user{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        memory.flush(timeout=60)
        for n in range(4):
            contents = sorted(m.content for m in memory.get_all(user_id=f"user{n}"))
            assert contents == sorted(f"Said: user{n} says {i}" for i in range(10))
        assert memory.stats()["writes"]["lm_calls"] == len(lm.engine.calls) < 40


def test_background_raw_mode_without_an_lm(memory):
    result = memory.add("raw and later", user_id="ada", background=True)
    assert result.queued and result.mode == "raw"
    memory.flush()
    assert [m.kind for m in memory.get_all(user_id="ada")] == ["turn"]


def test_raw_and_inferred_adds_of_one_scope_are_separate_batches(db_path):
    lm = scripted_lm(remember_each_turn)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"debounce_seconds": 5}) as memory:
        memory.add("kept raw", user_id="ada", infer=False, background=True)
        memory.add("for the LM", user_id="ada", background=True)
        results = memory.flush()
        assert sorted(r.mode for r in results) == ["fused", "raw"]
        assert [call.inputs["turns"][0]["text"] for call in lm.engine.calls] == ["for the LM"]
        assert sorted(m.content for m in memory.get_all(user_id="ada")) == ["Said: for the LM", "kept raw"]
