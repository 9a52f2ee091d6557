"""What the child processes of the concurrency tests run (spawned, so importable by name)."""

from __future__ import annotations

import json
import os
import random
import re
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import oracle_decisions, scripted_lm

MOVE = re.compile(r"I moved to (\w+)\.")
BASE = datetime(2024, 1, 1, tzinfo=timezone.utc)


def careful_lm(*, seed: int, log: str | None = None, max_delay: float = 0.02):
    """A write LM that decides like a careful model: a move invalidates the current home of the
    same person it is shown, anything else is one fact per turn. It sleeps a little per call so
    that concurrent writers overlap, and logs which turns it was shown."""
    rng = random.Random(seed)

    def fact(turn):
        moved = MOVE.search(turn["text"])
        if moved:
            return {
                "content": f"{turn['speaker']} lives in {moved.group(1)}.",
                "subject": turn["speaker"],
                "predicate": "lives_in",
                "object": moved.group(1),
                "valid_at": turn["time"],
            }
        return {"content": f"{turn['speaker']} noted: {turn['text']}", "subject": turn["speaker"]}

    def responder(call):
        time.sleep(rng.uniform(0, max_delay))
        turns = call.inputs["turns"]
        if log is not None:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(turn["text"]) + "\n" for turn in turns))
        return {"ops": oracle_decisions([fact(turn) for turn in turns], call.inputs["existing_memories"])}

    return scripted_lm(responder)


def move_many(path: str, writer: int, moves: int, barrier, threads: int = 1) -> None:
    """`moves` messages "I moved to CityW_I." by Ada, said at interleaved times."""
    memory = Memory(path, embedder=HashEmbedder(64), lm=careful_lm(seed=writer), pending_grace_seconds=3600)
    barrier.wait()
    for i in range(moves):
        at = BASE + timedelta(minutes=2 * i + writer)
        memory.add(
            {"role": "user", "name": "Ada", "content": f"I moved to City{writer}x{i}."}, user_id="ada", at=at
        )
    memory.close()


def replay(path: str, log: str, barrier) -> None:
    """Process whatever is unfinished in the file, as a second app server would on start."""
    memory = Memory(
        path, embedder=HashEmbedder(64), lm=careful_lm(seed=os.getpid(), log=log), pending_grace_seconds=3600
    )
    barrier.wait()
    results = memory.reprocess()
    Path(log + ".done").write_text(json.dumps([len(result.episodes) for result in results]))
    memory.close()
