"""The facade: construction does no work through the LM, and scope keywords are checked."""

from __future__ import annotations

import time

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.types import Scope

from .scripted import fused_lm

pytestmark = pytest.mark.backends


def test_opening_a_file_never_calls_the_lm_first_use_resumes(db_path):
    calls: list[str] = []

    def decide(turns, existing):
        calls.extend(turn["text"] for turn in turns)
        return [{"action": "ADD", "content": "Ada lives in Denver.", "subject": "Ada"}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide)) as memory:
        # A crash right after the episodes were persisted: pending, with no memories.
        [episode] = memory._writer.persist("Ada: I live in Denver.", Scope(user_id="ada"), infer=True)
        [raw] = memory._writer.persist("Ada: hello", Scope(user_id="ada"))
    lm = fused_lm(decide)
    memory = Memory(
        db_path, embedder=HashEmbedder(64), lm=lm, pending_grace_seconds=0, write={"debounce_seconds": 0}
    )
    try:
        time.sleep(0.3)  # time for a background writer to have started, had opening queued work
        assert calls == [] and lm.engine.calls == []
        assert [e.status for e in memory.store.episodes.get_many([episode.id, raw.id])] == [
            "pending",
            "pending",
        ]
        memory.search("Denver", user_id="ada")  # the first use resumes: raw now, inferred in the background
        [result] = memory.flush()
        assert result.episodes[0].id == episode.id and result.episodes[0].status == "done"
        assert len(calls) == 1
        assert memory.store.episodes.get_many([raw.id])[0].status == "done"
        assert memory.resume() == 0  # nothing left; an explicit call is harmless
    finally:
        memory.close()


def test_resume_can_be_called_explicitly_and_can_be_turned_off(db_path):
    with Memory(db_path, embedder=HashEmbedder(32), process_pending_on_open=False) as memory:
        memory._writer.persist(["one", "two"], Scope(user_id="ada"))
    with Memory(
        db_path, embedder=HashEmbedder(32), pending_grace_seconds=0, process_pending_on_open=False
    ) as m:
        assert m.get_all(user_id="ada") == []  # off: first use leaves them alone
        assert m.resume() == 2
        assert sorted(r.content for r in m.get_all(user_id="ada")) == ["one", "two"]


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.search("x", user="ada"),
        lambda m: m.add("x", userid="ada"),
        lambda m: m.get("0123456789", user_id="ada", scope="ada"),
        lambda m: m.get_all(all_scopes=True),
    ],
)
def test_an_unknown_scope_keyword_is_refused_by_name(db_path, call):
    with Memory(db_path, embedder=HashEmbedder(32)) as memory:
        with pytest.raises(TypeError, match="unexpected keyword argument '(user|userid|scope|all_scopes)'"):
            call(memory)
