"""A scripted agent LM: plays dspy.ReAct's step and extract signatures, and the write program."""

from __future__ import annotations

import re

from dspy_memory.testing import scripted_lm


def agent_lm(plan, answer, write=None):
    """`plan(question, trajectory_text) -> (tool name, args) | None` (None: finish);
    `answer(question, trajectory_text) -> str`; `write(turns, existing) -> ops` for memory."""

    def responder(call):
        outputs = call.output_fields
        inputs = call.inputs
        if outputs == ["ops"]:
            return {"ops": write(inputs["turns"], inputs["existing_memories"]) if write else []}
        question = str(inputs.get("question", ""))
        trajectory = str(inputs.get("trajectory", ""))
        if "next_tool_name" in outputs:
            step = plan(question, trajectory, str(inputs.get("memory_context", "")))
            name, args = step if step else ("finish", {})
            return {"next_thought": f"I will use {name}.", "next_tool_name": name, "next_tool_args": args}
        return {"reasoning": "From the trajectory.", "answer": answer(question, trajectory)}

    return scripted_lm(responder, model="scripted/agent")


def steps_taken(trajectory: str) -> list[str]:
    return re.findall(r"\[\[ ## tool_name_\d+ ## \]\]\n(\w+)", trajectory)
