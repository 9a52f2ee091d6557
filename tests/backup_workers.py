"""What the child processes of tests/test_backup.py run (spawned, so importable by name)."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder


def note(writer: int, i: int) -> str:
    return f"writer{writer} note {i:05d} about the garden"


def add_notes(path: str, writer: int, count: int, barrier) -> None:
    """`count` raw memories, one commit each, in order: a consistent copy of the file holds a
    prefix 0..k-1 of each writer's notes."""
    memory = Memory(path, embedder=HashEmbedder(64), busy_timeout_ms=60_000)
    barrier.wait()
    for i in range(count):
        memory.add(note(writer, i), user_id=f"writer{writer}", infer=False)
    memory.close()
