"""UPDATE, NOOP and DELETE decisions, and what each add costs (fused vs two-step)."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from dspy_memory.util.tokens import count_tokens

from .scripted import alias_of, fused_lm

pytestmark = pytest.mark.backends


def cheese(turns, existing):
    text = turns[-1]["text"]
    if "forget" in text:
        return [{"action": "DELETE", "target": alias_of(existing, "cheese"), "reason": "asked to forget"}]
    if "brie" in text:
        return [
            {
                "action": "UPDATE",
                "target": alias_of(existing, "cheese"),
                "content": "Ada likes cheddar and brie cheese.",
                "subject": "Ada",
                "predicate": "likes",
                "object": "cheese",
                "reason": "more detail",
            }
        ]
    if "still" in text:
        return [{"action": "NOOP", "target": alias_of(existing, "cheese")}]
    return [
        {
            "action": "ADD",
            "content": "Ada likes cheddar cheese.",
            "kind": "preference",
            "subject": "Ada",
            "predicate": "likes",
            "object": "cheese",
            "valid_at": "2024-01-01",
        }
    ]


@pytest.fixture
def cheesy(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(cheese)) as memory:
        memory.add("Ada: I like cheddar cheese.", user_id="ada", at="2024-01-01")
        yield memory


def test_update_refines_a_true_memory_as_a_new_version(cheesy):
    [before] = cheesy.get_all(user_id="ada")
    result = cheesy.add("Ada: cheese again: cheddar, and brie too.", user_id="ada", at="2024-02-01")
    assert [(op.action, op.memory_id) for op in result.ops] == [("UPDATE", before.id)]
    [after] = result.memories
    assert (after.id, after.version, after.content) == (before.id, 2, "Ada likes cheddar and brie cheese.")
    assert after.valid_at == before.valid_at  # a refinement does not move when it became true
    [add, update] = cheesy.history(before.id, user_id="ada")
    assert (update.event, update.old_content, update.new_content, update.reason) == (
        "UPDATE",
        "Ada likes cheddar cheese.",
        "Ada likes cheddar and brie cheese.",
        "more detail",
    )
    assert [hit.content for hit in cheesy.search("brie", user_id="ada")] == [
        "Ada likes cheddar and brie cheese."
    ]


def test_noop_records_provenance_and_strengthens(cheesy):
    [before] = cheesy.get_all(user_id="ada")
    result = cheesy.add("Ada: I still like cheddar cheese.", user_id="ada")
    assert [op.action for op in result.ops] == ["NOOP"]
    [hit] = cheesy.search("cheddar cheese", user_id="ada")
    assert hit.memory.strength == before.strength + 1.0 and hit.memory.version == 1
    assert len(hit.provenance) == 2 and "still" in hit.provenance[1].content
    assert [e.status for e in result.episodes] == ["done"]


def test_delete_on_an_explicit_request_purges(cheesy):
    [before] = cheesy.get_all(user_id="ada")
    result = cheesy.add("Ada: please forget what I said about cheese.", user_id="ada")
    assert [(op.action, op.memory_id) for op in result.ops] == [("DELETE", before.id)]
    assert cheesy.get(before.id, user_id="ada") is None
    assert cheesy.search("cheddar", user_id="ada") == []
    assert [e.event for e in cheesy.history(before.id, user_id="ada")][-1] == "DELETE"
    events = cheesy.history(before.id, user_id="ada")
    assert all(e.old_content is None and e.new_content is None for e in events)
    # Its entities went with it (no other memory names them).
    assert cheesy.graph("cheese", user_id="ada").entities == []
    assert cheesy.graph("Ada", user_id="ada").entities == []


def test_a_purge_keeps_entities_other_memories_still_name(cheesy):
    tea = fused_lm(
        lambda t, e: [{"action": "ADD", "content": "Ada likes tea.", "subject": "Ada", "object": "tea"}]
    )
    with Memory(cheesy.config, lm=tea) as other:
        other.add("Ada: tea", user_id="ada")
        [record] = [m for m in other.get_all(user_id="ada") if "cheddar" in m.content]
        other.delete(record.id, user_id="ada")
        assert sorted(e.name for e in other.graph("Ada", user_id="ada").entities) == ["Ada", "tea"]
        assert other.graph("cheese", user_id="ada").entities == []


def test_delete_without_a_request_to_forget_is_refused(db_path):
    def eager(turns, existing):
        return [{"action": "DELETE", "target": m["alias"]} for m in existing] or [
            {"action": "ADD", "content": "Ada likes tea.", "subject": "Ada"}
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(eager)) as memory:
        memory.add("Ada: I like tea.", user_id="ada")
        result = memory.add("Ada: tea is nice.", user_id="ada")
        assert result.ops == [] and "explicit request to forget" in result.rejected[0].reason
        # Nothing was deleted, and the input nothing was made from stays searchable as it was said.
        assert [(m.kind, m.content) for m in memory.get_all(user_id="ada")] == [
            ("turn", "Ada: tea is nice."),
            ("fact", "Ada likes tea."),
        ]


# -- cost accounting -------------------------------------------------------------------------


def counting_responder(call):
    """Answers all three write signatures; the turn mentions a city, an existing memory may too."""
    if call.output_fields == ["facts"]:
        return {
            "facts": [
                {
                    "content": "Ada lives in Denver.",
                    "subject": "Ada",
                    "predicate": "lives_in",
                    "object": "Denver",
                    "valid_at": "2024-03-01",
                }
            ]
        }
    existing = call.inputs["existing_memories"]
    op = {
        "content": "Ada lives in Denver.",
        "subject": "Ada",
        "predicate": "lives_in",
        "object": "Denver",
        "valid_at": "2024-03-01",
    }
    home = alias_of(existing, "Ada lives in")
    return {"ops": [{"action": "INVALIDATE", "target": home, **op} if home else {"action": "ADD", **op}]}


@pytest.mark.parametrize(("mode", "calls_first", "calls_later"), [("fused", 1, 1), ("two_step", 1, 2)])
def test_lm_calls_and_tokens_per_add(db_path, mode, calls_first, calls_later):
    lm = scripted_lm(counting_responder)
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm, write={"mode": mode}) as memory:
        memory.add("Ada: hello, I live in Boston.", user_id="bob", infer=False)  # another scope: unseen
        first = memory.add("Ada: I live in Denver now.", user_id="ada", at="2024-03-01")
        # With nothing to compare with, two-step skips its reconcile call.
        assert first.usage.lm_calls == calls_first
        memory.add("Ada: Ada lives in Boston, I said before.", user_id="ada", infer=False)
        later = memory.add(
            [
                {"role": "user", "name": "Ada", "content": "Ada lives in Denver since March."},
                {"role": "assistant", "content": "Noted, Denver it is."},
            ],
            user_id="ada",
            at="2024-03-02",
        )
        assert later.usage.lm_calls == calls_later and later.mode == mode
        prompts = lm.engine.calls[-calls_later:]
        assert later.usage.prompt_tokens == sum(count_tokens(call.prompt) for call in prompts)
        assert later.usage.completion_tokens > 0
        totals = memory.stats()["writes"]
        assert totals["runs"] == 2 and totals["lm_calls"] == calls_first + calls_later
        assert totals["prompt_tokens"] == first.usage.prompt_tokens + later.usage.prompt_tokens


def test_raw_mode_without_any_lm_makes_no_calls(memory):
    result = memory.add("Ada: I live in Denver.", user_id="ada")
    assert result.mode == "raw" and result.usage.lm_calls == 0
    assert [m.kind for m in result.memories] == ["turn"]


def test_infer_true_without_an_lm_says_how_to_configure_one(memory):
    from dspy_memory import LMUnavailableError

    with pytest.raises(LMUnavailableError, match="dspy.configure"):
        memory.add("hello", user_id="ada", infer=True)
    assert memory.store.episodes.list(__import__("dspy_memory").Scope(user_id="ada")) == []


def test_the_lm_set_with_dspy_configure_is_used(db_path):
    import dspy

    lm = fused_lm(lambda turns, existing: [{"action": "ADD", "content": "Ada likes tea.", "subject": "Ada"}])
    with Memory(db_path, embedder=HashEmbedder(64)) as memory, dspy.context(lm=lm):
        result = memory.add("Ada: tea please", user_id="ada")
        assert result.mode == "fused" and [m.content for m in result.memories] == ["Ada likes tea."]
        assert memory.add("Ada: raw", user_id="ada", infer=False).mode == "raw"


def test_update_keeps_what_the_lm_left_out(db_path):
    """A refinement that names only the new content keeps the memory's kind, confidence and
    importance (the compact program never sends them; a fused answer may leave them out)."""

    def refine(turns, existing):
        if not existing:
            return [
                {
                    "action": "ADD",
                    "content": "Ada likes cheddar cheese.",
                    "subject": "Ada",
                    "kind": "preference",
                    "confidence": 0.7,
                    "importance": 0.9,
                }
            ]
        return [{"action": "UPDATE", "target": 1, "content": "Ada likes cheddar and brie cheese."}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(refine)) as memory:
        memory.add("Ada: I like cheddar cheese.", user_id="ada")
        result = memory.add("Ada: cheddar, and brie too.", user_id="ada")
        assert [op.action for op in result.ops] == ["UPDATE"]
        [after] = [m for m in memory.get_all(user_id="ada") if m.kind != "turn"]
        assert (after.version, after.content) == (2, "Ada likes cheddar and brie cheese.")
        assert (after.kind, after.confidence, after.importance) == ("preference", 0.7, 0.9)
