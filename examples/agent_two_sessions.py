"""A ReAct agent that remembers across sessions.

    DSPY_MEMORY_LM=ollama_chat/llama3.2 python examples/agent_two_sessions.py   # a real model
    python examples/agent_two_sessions.py --embedder test                       # offline, scripted

Session 1: the user says they moved; the agent stores it with its `remember` tool. Session 2: a
new agent on the same file answers "where do I live?" with `recall`, and sees the move date.
Without an LM configured, a scripted LM plays the model so the example runs anywhere.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import dspy

from dspy_memory import Memory
from dspy_memory.agent.react import MemoryReAct
from dspy_memory.testing import scripted_agent_lm, tools_called


def scripted_model() -> Any:
    """Stands in for a real model: remembers in session 1, recalls in session 2."""

    def plan(question: str, trajectory: str, memory_context: str) -> tuple[str, dict[str, Any]] | None:
        done = tools_called(trajectory)
        if "remember" in question and "remember" not in done:
            return "remember", {"content": "Ada moved to Denver on 2024-03-08."}
        if "Where" in question and "recall" not in done:
            return "recall", {"query": "where does Ada live"}
        return None

    def answer(question: str, trajectory: str) -> str:
        if "current since " in trajectory:
            line = next(line for line in trajectory.splitlines() if "current since " in line)
            return f"{line.split('| ')[-1]} (recorded as true since {line.split('current since ')[1][:10]})"
        return "Noted, I will remember that."

    def write(turns: list[dict[str, Any]], existing: list[dict[str, Any]]) -> list[dict[str, Any]]:
        text = " ".join(turn["text"] for turn in turns)
        if "moved to Denver" in text and not existing:
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

    return scripted_agent_lm(plan, answer, write=write)


def main(embedder: str | None = None, lm: Any = None) -> dict[str, Any]:
    model = os.environ.get("DSPY_MEMORY_LM")
    lm = lm or (dspy.LM(model) if model else scripted_model())
    with tempfile.TemporaryDirectory() as tmp, dspy.context(lm=lm):
        path = Path(tmp) / "agent.db"
        with Memory(path, embedder=embedder) as memory:  # session 1
            agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
            first = agent(question="I moved to Denver on March 8th, 2024 - please remember that.")
            print("session 1:", first.answer)
        with Memory(path, embedder=embedder) as memory:  # session 2: a new process would do the same
            agent = MemoryReAct("question -> answer", memory=memory, user_id="ada")
            second = agent(question="Where do I live now, and since when?")
            print("session 2:", second.answer)
            memory.flush()
            logged = [
                f"{e.source}: {e.content[:70]}" for e in memory.store.episodes.list(memory_scope("ada"))
            ]
            print("episodes logged:", *logged, sep="\n  ")
        return {"first": first.answer, "second": second.answer, "logged": logged}


def memory_scope(user: str) -> Any:
    from dspy_memory.types import Scope

    return Scope(user_id=user)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default=None, help="embedder spec (default: local MiniLM)")
    main(parser.parse_args().embedder)
