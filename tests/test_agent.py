"""Agents with memory: tools for dspy.ReAct, MemoryReAct across sessions, optimizer copies."""

from __future__ import annotations

import asyncio
import copy

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.agent.react import MemoryReAct
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_agent_lm as agent_lm
from dspy_memory.testing import tools_called as steps_taken
from dspy_memory.types import Scope

pytestmark = pytest.mark.backends


def write_move(turns, existing):
    text = " ".join(turn["text"] for turn in turns)
    if "Denver" in text and "2024-03-08" in text:
        return [
            {
                "action": "ADD",
                "content": "Ada moved to Denver on 2024-03-08.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Denver",
                "valid_at": "2024-03-08",
                "kind": "profile",
            }
        ]
    return []


def session_one_plan(question, trajectory, context):
    if "remember" not in steps_taken(trajectory):
        return "remember", {"content": "Ada moved to Denver on 2024-03-08."}
    return None


def session_two_plan(question, trajectory, context):
    if "recall" not in steps_taken(trajectory):
        return "recall", {"query": "where does Ada live"}
    return None


def answer_from_trajectory(question, trajectory):
    if "recall" in steps_taken(trajectory) and "current since " in trajectory:
        since = trajectory.split("current since ")[1][:10]
        return f"You live in Denver, since {since}."
    return "Noted."


def test_two_sessions_remember_then_recall_with_the_date(db_path):
    lm = agent_lm(session_one_plan, answer_from_trajectory, write=write_move)
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
        result = agent(question="I moved to Denver on March 8th, 2024; please remember it.")
        assert result.answer == "Noted."
        assert [m.content for m in memory.get_all(user_id="ada", kinds=["profile"])] == [
            "Ada moved to Denver on 2024-03-08."
        ]

    lm = agent_lm(session_two_plan, answer_from_trajectory, write=write_move)
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
        result = agent(question="Where do I live, and since when?")
        assert result.answer == "You live in Denver, since 2024-03-08."
        assert result.trajectory["tool_name_0"] == "recall"
        # The agent was told what memory knows before it planned.
        first_step = next(call for call in lm.engine.calls if "next_tool_name" in call.output_fields)
        assert "Ada moved to Denver on 2024-03-08." in first_step.inputs["memory_context"]
        memory.flush()
        episodes = memory.store.episodes.list(Scope(user_id="ada"))
        steps = [e for e in episodes if e.source == "tool_step"]
        assert [(e.name, e.metadata["success"]) for e in steps] == [("remember", True), ("recall", True)]
        assert "Denver" in steps[-1].content and steps[-1].status == "done"
        assert [e.content for e in episodes if e.role == "assistant"][-1] == (
            "reasoning: From the trajectory.; answer: You live in Denver, since 2024-03-08."
        )


def test_other_tools_steps_become_earlier_attempts(db_path):
    def flaky_weather(city: str) -> str:
        """Weather for a city."""
        raise_error = city == "Atlantis"
        return "error: unknown city" if raise_error else f"sunny in {city}"

    def plan(question, trajectory, context):
        if not steps_taken(trajectory):
            return "flaky_weather", {"city": "Atlantis"}
        return None

    lm = agent_lm(plan, lambda q, t: "no idea")
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = MemoryReAct("question -> answer", memory=memory, user_id="ada", tools=[flaky_weather])
        agent(question="weather in Atlantis?")
        memory.flush()
        context = agent.memory_context("question: weather in Atlantis?")
        assert "## Earlier attempts at similar tasks" in context
        assert "FAILED: flaky_weather(" in context and "Atlantis" in context


def test_memory_react_works_with_acall(db_path):
    lm = agent_lm(session_one_plan, answer_from_trajectory, write=write_move)
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
        result = asyncio.run(agent.acall(question="I moved to Denver on 2024-03-08, remember it"))
        assert result.answer == "Noted." and memory.get_all(user_id="ada")


def test_compiled_agents_still_use_the_same_database(db_path):
    lm = agent_lm(session_one_plan, answer_from_trajectory, write=write_move)
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
        trainset = [dspy.Example(question="remember my move", answer="Noted.").with_inputs("question")]
        compiled = dspy.LabeledFewShot(k=1).compile(agent, trainset=trainset)
        assert compiled is not agent and compiled.react is not agent.react
        assert compiled.memory is memory  # deep copies keep the Memory itself
        also = copy.deepcopy(compiled)
        also(question="I moved to Denver on 2024-03-08, remember it")
        assert [m.content for m in memory.get_all(user_id="ada", kinds=["profile"])] == [
            "Ada moved to Denver on 2024-03-08."
        ]


def test_plain_react_with_memory_tools(db_path):
    lm = agent_lm(session_one_plan, answer_from_trajectory, write=write_move)
    with dspy.context(lm=lm), Memory(db_path, embedder=HashEmbedder(64)) as memory:
        agent = dspy.ReAct("question -> answer", tools=memory.tools(user_id="ada"))
        agent(question="I moved to Denver on 2024-03-08")
        compiled = copy.deepcopy(agent)  # what optimizers do
        compiled(question="again")
        assert len(memory.get_all(user_id="ada")) == 1  # the second remember was a duplicate


@pytest.mark.parametrize("allow", [["recall"], ["recall", "remember"]])
def test_allow_limits_the_tools(memory, allow):
    assert [tool.name for tool in memory.tools(user_id="ada", allow=allow)] == allow
    with pytest.raises(ValueError, match="unknown memory tools"):
        memory.tools(user_id="ada", allow=["drop_database"])
