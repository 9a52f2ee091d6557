"""Core memory blocks and the ReAct tools, called the way an agent calls them."""

from __future__ import annotations

import pytest

from dspy_memory import BlockError, Memory
from dspy_memory.embed import HashEmbedder

from .scripted import fused_lm

pytestmark = pytest.mark.backends


def test_blocks_have_limits_read_only_flags_and_versions(memory):
    memory.blocks.set("human", "Name: Ada", user_id="ada", char_limit=40, description="facts about the user")
    memory.blocks.append("human", "Lives in Denver", user_id="ada")
    with pytest.raises(BlockError, match="over its limit of 40; shorten or replace"):
        memory.blocks.append("human", "x" * 40, user_id="ada")
    block = memory.blocks.replace("human", "Denver", "Austin", user_id="ada")
    assert block.value == "Name: Ada\nLives in Austin" and block.version == 3
    assert [(v.version, v.actor) for v in memory.blocks.history("human", user_id="ada")] == [
        (1, "developer"),
        (2, "agent"),
        (3, "agent"),
    ]
    memory.blocks.set("persona", "I am a helpful assistant.", user_id="ada", read_only=True)
    with pytest.raises(BlockError, match="read-only"):
        memory.blocks.replace("persona", "helpful", "evil", user_id="ada")
    memory.blocks.set("persona", "I am a careful assistant.", user_id="ada")  # the developer may
    with pytest.raises(BlockError, match="not in block"):
        memory.blocks.replace("human", "Paris", "Rome", user_id="ada")
    with pytest.raises(BlockError, match="label"):
        memory.blocks.set("bad label!", "x", user_id="ada")
    assert memory.blocks.get("human", user_id="bob") is None  # scopes apart
    assert [b.label for b in memory.blocks.list(user_id="ada")] == ["human", "persona"]
    context = memory.context("anything", user_id="ada", budget_tokens=200)
    assert context.text.startswith("## Core memory\n<human>\nName: Ada\nLives in Austin\n</human>")


def test_tools_speak_in_ids_dates_and_status(db_path):
    def moves(turns, existing):
        text = turns[-1]["text"]
        home = next((m["alias"] for m in existing if "lives in" in m["content"]), None)
        city = "Denver" if "Denver" in text else "Boston"
        op = {
            "content": f"Ada lives in {city}.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": city,
            "valid_at": "2024-03-08" if city == "Denver" else "2024-01-10",
        }
        return [{"action": "INVALIDATE", "target": home, **op} if home else {"action": "ADD", **op}]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        memory.add("Ada: I live in Boston", user_id="ada", at="2024-01-10")
        memory.add("Ada: I live in Denver now", user_id="ada", at="2024-03-15")
        memory.add("Bob: I live in Rome", user_id="bob")
        memory.blocks.set("human", "Ada", user_id="ada")
        tools = {tool.name: tool for tool in memory.tools(user_id="ada", allow_forget=True)}
        now = tools["recall"](query="where does Ada live")
        assert now.splitlines()[0] == "1 memories (current):"
        assert now.splitlines()[1].endswith("] current since 2024-03-08 | Ada lives in Denver.")
        then = tools["recall"](query="where does Ada live", as_of="2024-02-01")
        assert then.splitlines()[1].endswith("] current since 2024-01-10 | Ada lives in Boston.")
        boston_id = then.split("[")[1].split("]")[0]
        assert len(boston_id) == 8
        history = tools["memory_history"](memory_id=boston_id)
        assert "ADD: Ada lives in Boston." in history and "INVALIDATE: Ada lives in Denver." in history
        # Another user's memories cannot be named, even by a full id.
        bob = memory.get_all(user_id="bob")[0].id
        for name in ("forget", "memory_history"):
            assert tools[name](memory_id=bob).startswith("error: no memory")
        assert tools["revise"](memory_id=bob, content="x", reason="y").startswith("error: no memory")
        assert len(memory.get_all(user_id="bob")) == 1
        # Errors are one line, never a traceback.
        for result in (
            tools["recall"](query="x", k="many"),
            tools["revise"](memory_id="ab", content="x", reason="y"),
            tools["core_memory_replace"](label="human", old="nope", new="x"),
            tools["core_memory_append"](label="missing", text="x"),
            tools["remember"](content="  "),
        ):
            assert result.startswith("error: ") and "\n" not in result and "Traceback" not in result
        assert tools["core_memory_append"](label="human", text="moved to Denver").startswith(
            "block human is now"
        )
        assert tools["forget"](memory_id=boston_id) == f"forgot [{boston_id}]"
        assert memory.search("Boston", user_id="ada", as_of="2024-02-01") == []
