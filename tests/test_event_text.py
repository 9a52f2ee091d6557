"""The ADD event of a memory does not store a second copy of the text: the version it created
holds it (docs/benchmarks.md, "Disk per memory", third round). What reads events sees the text
as before: history, export and import (which finds the events it already holds), on both
backends; and erasing the memory leaves no text in its events."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .leakscan import leaks, markers

pytestmark = pytest.mark.backends

WORD = markers(1, seed=20261128)[0]


def stored_texts(memory, memory_id):
    with memory.store.snapshot() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                "SELECT event, old_content, new_content FROM memory_events WHERE memory_id = ? ORDER BY id",
                (memory_id,),
            )
        ]


def test_an_add_event_stores_no_text_and_history_shows_the_text_of_its_version(memory):
    record = memory.add(f"ada keeps a {WORD} in the garden", user_id="ada").memories[0]
    updated = memory.update(record.id, "ada keeps two of them in the garden", user_id="ada")
    assert stored_texts(memory, record.id) == [
        ("ADD", None, None),
        ("UPDATE", f"ada keeps a {WORD} in the garden", "ada keeps two of them in the garden"),
    ]
    events = memory.history(record.id, user_id="ada")
    assert [(e.event, e.version, e.old_content, e.new_content) for e in events] == [
        ("ADD", 1, None, f"ada keeps a {WORD} in the garden"),
        (
            "UPDATE",
            updated.version,
            f"ada keeps a {WORD} in the garden",
            "ada keeps two of them in the garden",
        ),
    ]


def test_export_carries_the_add_events_text_and_a_second_import_adds_no_event(memory, tmp_path):
    record = memory.add(f"bo plants a {WORD}", user_id="bo").memories[0]
    path = str(tmp_path / "bo.jsonl")
    memory.export(path, user_id="bo")
    with open(path, encoding="utf-8") as file:
        assert f"bo plants a {WORD}" in next(
            line for line in file if line.startswith("{") and '"ADD"' in line
        )
    # Into another store, and back into this one: the event is held already.
    with Memory(str(tmp_path / "target.db"), embedder=HashEmbedder(64)) as target:
        assert target.import_(path).new["memory_event"] == 1
        assert target.import_(path).present["memory_event"] == 1
        assert [(e.event, e.new_content) for e in target.history(record.id, user_id="bo")] == [
            ("ADD", f"bo plants a {WORD}")
        ]
    report = memory.import_(path)
    assert report.new.get("memory_event", 0) == 0 and report.present["memory_event"] == 1


def test_an_erased_memory_leaves_no_text_in_its_events(memory):
    record = memory.add(f"cy hides a {WORD}", user_id="cy").memories[0]
    memory.delete(record.id, user_id="cy")
    assert all(
        e.new_content is None and e.old_content is None for e in memory.history(record.id, user_id="cy")
    )
    assert leaks(memory.store.path, [WORD]) == []
