"""MemoryReAct: `dspy.ReAct` with long-term memory.

Before the agent plans, it is given what memory knows about the task (core blocks, facts,
conflicts, timelines, recent conversation) and what earlier runs tried and how that went. After
the run, each tool step and the final answer are logged as episodes, processed in the
background, so the next run can learn from this one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import dspy
from typing_extensions import Unpack

from dspy_memory.agent.tools import TOOL_NAMES
from dspy_memory.scopes import ScopeArgs, exact_scope

if TYPE_CHECKING:
    from dspy_memory.memory import Memory

STEP_MARK = "tool_step"  # metadata["dspy_memory"] of logged steps, to find earlier attempts
_FAILED = ("error:", "Execution error")


class MemoryReAct(dspy.Module):
    """A ReAct agent whose memory persists across runs.

    >>> agent = MemoryReAct("question -> answer", memory=memory, user_id="ada", tools=[search_web])
    >>> agent(question="Where should I go running this weekend?").answer

    The memory tools (`memory.tools(...)`, limited by `allow`; none can destroy data unless
    allow_forget=True; memory_feedback only with allow_feedback=True) are added to `tools`. The scope is fixed here; the model cannot choose it. `budget_tokens` bounds the injected context.
    """

    def __init__(
        self,
        signature: str | type[dspy.Signature],
        *,
        memory: Memory,
        tools: Sequence[Any] = (),
        allow: list[str] | None = None,
        allow_forget: bool = False,
        allow_feedback: bool = False,
        max_iters: int = 10,
        budget_tokens: int = 1000,
        earlier_attempts: int = 5,
        log_steps: bool = True,
        **scope: Unpack[ScopeArgs],
    ) -> None:
        super().__init__()
        self.memory = memory
        self.scope = exact_scope("MemoryReAct", scope)
        self.budget_tokens = budget_tokens
        self.earlier_attempts = earlier_attempts
        self.log_steps = log_steps
        base = dspy.ensure_signature(signature)
        self.task_fields = list(base.input_fields)
        with_memory = base.prepend(
            "memory_context",
            dspy.InputField(
                desc="What long-term memory knows about this user and task, and what earlier attempts "
                "tried and how they ended. Facts carry dates; prefer current facts over superseded ones."
            ),
            type_=str,
        )
        memory_tools = memory.tools(
            **self.scope.model_dump(), allow=allow, allow_forget=allow_forget, allow_feedback=allow_feedback
        )
        self.react = dspy.ReAct(with_memory, tools=[*tools, *memory_tools], max_iters=max_iters)

    # -- before and after ------------------------------------------------------------------------

    def _task(self, inputs: dict[str, Any]) -> str:
        return "\n".join(f"{name}: {inputs[name]}" for name in self.task_fields if name in inputs)

    def memory_context(self, task: str) -> str:
        """What the agent is told before it plans."""
        ids = self.scope.model_dump()
        context = self.memory.context(task, budget_tokens=self.budget_tokens, **ids).text
        hits = self.memory.search(
            task, k=self.earlier_attempts, kinds=["turn"], filters={"dspy_memory": STEP_MARK}, **ids
        )
        if hits:
            lines = [
                f"- {hit.memory.valid_at:%Y-%m-%d} {'FAILED' if hit.memory.metadata.get('success') is False else 'ok'}: "
                f"{(hit.provenance[0].content if hit.provenance else hit.content)[:300]}"
                for hit in hits
            ]
            context += "\n\n## Earlier attempts at similar tasks\n" + "\n".join(lines)
        return context or "(nothing remembered yet)"

    def _log(self, task: str, prediction: dspy.Prediction) -> None:
        """Log the run as episodes: the task and the answer go through the write path (the LM
        extracts what is worth keeping); other tools' steps become searchable raw memories
        (earlier attempts); the memory tools' own steps are only logged, since their
        observations are memories already."""
        if not self.log_steps:
            return
        ids = self.scope.model_dump()
        trajectory = prediction.get("trajectory", {}) or {}
        steps: list[dict[str, Any]] = []
        memory_steps: list[dict[str, Any]] = []
        index = 0
        while f"tool_name_{index}" in trajectory:
            name = str(trajectory[f"tool_name_{index}"])
            observation = str(trajectory.get(f"observation_{index}", ""))
            if name != "finish":
                arguments = json.dumps(trajectory.get(f"tool_args_{index}", {}), default=str)
                step = {
                    "role": "tool",
                    "name": name,
                    "source": "tool_step",
                    "content": f"{name}({arguments}) -> {observation[:2000]}",
                    "metadata": {
                        "dspy_memory": STEP_MARK,
                        "tool": name,
                        "step": index,
                        "success": not observation.startswith(_FAILED),
                    },
                }
                (memory_steps if name in TOOL_NAMES else steps).append(step)
            index += 1
        outputs = {key: prediction[key] for key in prediction.keys() if key != "trajectory"}
        answer = "; ".join(f"{key}: {value}" for key, value in outputs.items())
        if memory_steps:
            self.memory.log(memory_steps, **ids)
        if steps:
            self.memory.add(steps, infer=False, background=True, **ids)
        self.memory.add(
            [{"role": "user", "content": task}, {"role": "assistant", "content": answer}],
            background=True,
            **ids,
        )

    # -- running ---------------------------------------------------------------------------------

    def forward(self, **inputs: Any) -> dspy.Prediction:
        task = self._task(inputs)
        prediction = self.react(memory_context=self.memory_context(task), **inputs)
        self._log(task, prediction)
        return prediction

    async def aforward(self, **inputs: Any) -> dspy.Prediction:
        """`forward` for `await agent.acall(...)`: memory is read and the run logged by the
        memory's workers (docs/async.md), the tools' `acall`s run off the loop as well."""
        task = self._task(inputs)
        context = await self.memory.workers.run(self.memory_context, task)
        prediction = await self.react.acall(memory_context=context, **inputs)
        await self.memory.workers.run(self._log, task, prediction)
        return prediction
