"""Several writers on one file through the LM path: threads and processes racing on one fact,
and processes replaying one write-ahead log. One truth per slot, each episode processed once."""

from __future__ import annotations

import json
import multiprocessing
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm

from . import workers
from .pg import Raw

pytestmark = pytest.mark.backends


def homes(memory):
    return [m for m in memory.get_all(user_id="ada", limit=1000) if m.predicate == "lives_in"]


def invalidations(path):
    with Raw(path) as conn:
        return Counter(
            row[0] for row in conn.execute("SELECT memory_id FROM memory_events WHERE event = 'INVALIDATE'")
        )


def run(ctx, target, argsets):
    processes = [ctx.Process(target=target, args=args) for args in argsets]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
    assert [process.exitcode for process in processes] == [0] * len(processes)


def check_one_truth(path, moves):
    with Memory(path, embedder=HashEmbedder(64)) as memory:
        [home] = homes(memory)
        timeline = memory.timeline(subject="Ada", predicate="lives_in", user_id="ada")
        report = memory.check()
    assert report.ok, report
    assert len(timeline) + report.episodes.get("failed", 0) >= moves  # every move is a fact or kept raw
    assert max(invalidations(path).values()) == 1
    return home


def test_two_processes_moving_concurrently_leave_one_current_home(db_path):
    Memory(db_path, embedder=HashEmbedder(64)).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    run(ctx, workers.move_many, [(db_path, writer, 25, barrier) for writer in range(2)])
    check_one_truth(db_path, 50)


def test_two_threads_moving_concurrently_leave_one_current_home(db_path):
    Memory(db_path, embedder=HashEmbedder(64)).close()
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=workers.move_many, args=(db_path, w, 25, barrier)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check_one_truth(db_path, 50)


def test_two_processes_replaying_one_log_process_each_episode_once(db_path, tmp_path):
    def down(call):
        raise ConnectionError("LM outage")

    texts = [f"I keep item {i} in box {i * 13 % 97}." for i in range(150)]
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(down)) as memory:
        assert memory.add(texts, user_id="ada").error
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    logs = [str(tmp_path / f"lm-{n}.log") for n in range(2)]
    run(ctx, workers.replay, [(db_path, log, barrier) for log in logs])

    # Whichever process claimed an episode first processed it; the other got nothing of it.
    shown = Counter(
        json.loads(line) for log in logs if Path(log).exists() for line in open(log, encoding="utf-8")
    )
    assert shown == Counter(texts)  # every episode went to an LM exactly once
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        facts = [m for m in memory.get_all(user_id="ada", limit=1000) if m.kind == "fact"]
        assert sorted(m.content for m in facts) == sorted(f"user noted: {text}" for text in texts)
        assert memory.check().ok
        assert memory.store.episodes.unfinished(ingested_before="9999").episodes == []


def test_episodes_claimed_by_a_killed_process_are_replayed_at_once(db_path):
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = f"{socket.gethostname()}:{int(finished.stdout)}:killed"
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        episodes = memory._writer.persist([f"note {i}" for i in range(170)], memory_scope(), infer=True)
    with Raw(
        db_path
    ) as conn:  # as a writer killed with -9 mid-batch leaves them: pending, claimed for a while yet
        conn.execute(
            "UPDATE episodes SET claimed_by = ?, claim_expires_at = '9999-01-01T00:00:00.000000Z'", (dead,)
        )
        conn.execute(
            "INSERT INTO episodes (id, user_id, agent_id, run_id, source, role, name, content, metadata, "
            "occurred_at, ingested_at, status, error, attempts, infer, claimed_by, claim_expires_at) "
            "SELECT 'alive-' || id, user_id, agent_id, run_id, source, role, "
            "name, content, metadata, occurred_at, ingested_at, status, error, attempts, infer, "
            "'other-host:1:x', claim_expires_at FROM episodes LIMIT 1"
        )
    lm = workers.careful_lm(seed=1)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm) as memory:
        results = memory.reprocess()
        assert sum(len(result.episodes) for result in results) == 170
        assert {e.status for result in results for e in result.episodes} == {"done"}
        assert len([m for m in memory.get_all(user_id="ada", limit=1000) if m.kind == "fact"]) == 170
        # A live claim (another machine's writer, lease not over) is left alone.
        [waiting] = memory.store.episodes.get_many(["alive-" + episodes[0].id])
        assert waiting.status == "pending"


def memory_scope():
    from dspy_memory.types import Scope

    return Scope(user_id="ada")
