"""What the child processes of tests/test_backup.py run (spawned, so importable by name)."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder


def note(writer: int, i: int) -> str:
    return f"writer{writer} note {i:05d} about the garden"


def add_notes(path: str, writer: int, count: int, barrier, stop=None) -> None:
    """Raw memories, one commit each, in order, until `count`, or until `stop` is set (once the
    backup is done) and 3 more after it: a consistent copy of the file holds a prefix 0..k-1 of
    each writer's notes, and the file more than the copy."""
    memory = Memory(path, embedder=HashEmbedder(64), busy_timeout_ms=60_000)
    barrier.wait()
    after_stop = 0
    for i in range(count):
        memory.add(note(writer, i), user_id=f"writer{writer}", infer=False)
        if stop is not None and stop.is_set():
            after_stop += 1
            if after_stop >= 3:
                break
    memory.close()
