"""Memory.check(): each invariant it checks is caught when broken (a check that cannot fail
would prove nothing in the tests that rely on it)."""

from __future__ import annotations

import uuid

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store import NewMemory

from .scripted import fused_lm

pytestmark = pytest.mark.backends


@pytest.fixture
def memory(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        yield memory


def test_a_sound_file_passes(memory):
    memory.add(["Ada: hello", "Ada: I live in Denver."], user_id="ada")
    memory.log("kept in the log only", user_id="ada")  # no memory, on purpose: not lost
    report = memory.check()
    assert report.ok and report.episodes == {"done": 3} and report.episodes_lost == 0


def test_an_input_whose_only_memory_was_retired_is_lost(memory):
    [turn] = memory.add("Ada: I live in Denver.", user_id="ada").memories
    memory.store.expire(turn.id, scope=None, actor="system", event="MERGE")  # what reprocess did in 0.1
    report = memory.check()
    assert not report.ok and report.episodes_lost == 1


def test_two_current_values_of_a_single_valued_fact_are_caught(db_path):
    def careless(turns, existing):  # adds instead of invalidating
        city = turns[-1]["text"].split()[-1]
        return [
            {"action": "ADD", "content": f"Ada lives in {city}", "subject": "Ada", "predicate": "lives_in"}
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(careless)) as memory:
        memory.add("Ada: I live in Boston", user_id="ada")
        memory.add("Ada: I live in Denver", user_id="ada")
        [slot] = memory.check().slots_with_several_current
    assert slot["subject"] == "Ada" and slot["predicate"] == "lives_in" and slot["current"] == 2


def test_a_memory_invalidated_twice_is_caught(memory):
    [record] = memory.add("Ada lives in Boston.", user_id="ada").memories
    for city in ("Denver", "Austin"):  # two writers both ending the same version
        memory.store.supersede(
            record.id,
            scope=None,
            changes={"invalid_at": "2024-01-01T00:00:00.000000Z"},
            embedding=None,
            event="INVALIDATE",
            actor="lm",
            event_content=f"Ada lives in {city}.",
        )
    assert memory.check().invalidated_twice == [record.id]


def test_an_episode_processed_twice_is_caught(memory):
    [episode] = memory.log("Ada: I live in Denver.", user_id="ada")
    vector = memory.embedder.embed(["Ada lives in Denver."])[0]
    for _ in range(2):  # the same fact made by two writers from one message
        memory.store.insert_memories(
            [
                NewMemory(
                    id=str(uuid.uuid4()),
                    content="Ada lives in Denver.",
                    content_hash="same",
                    embedding=vector,
                    user_id="ada",
                    episode_ids=[episode.id],
                )
            ],
            actor="lm",
        )
    assert memory.check().episodes_processed_twice == [episode.id]
