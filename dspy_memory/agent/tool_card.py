"""Memory for planner/executor agents (the tool-card pattern of OctoTools and similar): a card
a planner can read, `execute(query)` returning a structured bundle, and `log_step(...)`, a sink
executors call after every step."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from dspy_memory.scopes import ScopeArgs, exact_scope
from dspy_memory.types import Episode, Hit

if TYPE_CHECKING:
    from dspy_memory.memory import Memory

_AS_OF = re.compile(r"\bas of (\d{4}-\d{2}-\d{2})\b", re.IGNORECASE)


class MemoryTool:
    """A tool card over one scope of a Memory.

    >>> card = MemoryTool(memory, user_id="ada")
    >>> card.get_metadata()["tool_description"]
    >>> card.execute("Where does Ada live? as of 2024-02-01")["facts"][0]["content"]
    >>> card.log_step("Web_Search_Tool", {"query": "..."}, result, run_id="run-7")
    """

    tool_name = "Memory_Tool"
    tool_description = (
        "Looks up long-term memory about the user and past work: facts with the dates they became "
        "(and stopped being) true, where each came from (run and source), and confidence. Ask in "
        "words; add 'as of YYYY-MM-DD' to ask what was true on a past date."
    )
    input_types = {"query": "str - what to look up, e.g. 'Where does the user live?'"}
    output_type = (
        "dict - {'query', 'as_of', 'facts': [{'id', 'content', 'status', 'valid_at', 'invalid_at', "
        "'confidence', 'kind', 'run_id', 'metadata', 'sources': [{'episode_id', 'source', 'speaker', "
        "'occurred_at', 'run_id'}]}]} (logged steps have metadata tool and success)"
    )
    demo_commands = [
        {
            "command": 'execution = tool.execute(query="What food does the user like?")',
            "description": "Current facts about the user's food preferences.",
        },
        {
            "command": 'execution = tool.execute(query="Where did the user live as of 2024-02-01?")',
            "description": "What was true on a past date.",
        },
    ]

    def __init__(
        self,
        memory: Memory,
        *,
        k: int = 8,
        **scope: Unpack[ScopeArgs],
    ) -> None:
        self.memory = memory
        self.scope = exact_scope("MemoryTool", scope)
        self.k = k

    def get_metadata(self) -> dict[str, Any]:
        return {
            "tool_name": self.tool_name,
            "tool_description": self.tool_description,
            "input_types": self.input_types,
            "output_type": self.output_type,
            "demo_commands": self.demo_commands,
        }

    def execute(self, query: str, *, as_of: str | None = None, k: int | None = None) -> dict[str, Any]:
        """Facts relevant to `query` as a JSON-ready bundle; "as of YYYY-MM-DD" in the query (or
        `as_of=`) asks about a past date."""
        match = _AS_OF.search(query or "")
        if as_of is None and match:
            as_of = match.group(1)
            query = _AS_OF.sub("", query).strip()
        hits = self.memory.search(query, k=k or self.k, as_of=as_of, **self.scope.model_dump())
        return {"query": query, "as_of": as_of, "facts": [_fact(hit) for hit in hits]}

    def log_step(
        self,
        tool_name: str,
        inputs: Any,
        result: Any,
        *,
        run_id: str | None = None,
        success: bool | None = None,
        remember: bool = True,
    ) -> list[Episode]:
        """Record one executor step as a `tool_step` episode of this scope (and `run_id`). With
        remember=True it is also kept as a searchable memory (processed in the background)."""
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        failed = success is False or (
            success is None and text.lstrip().lower().startswith(("error", "traceback"))
        )
        step = {
            "role": "tool",
            "name": tool_name,
            "source": "tool_step",
            "content": f"{tool_name}({json.dumps(inputs, default=str)}) -> {text[:4000]}",
            "metadata": {"dspy_memory": "tool_step", "tool": tool_name, "success": not failed},
        }
        ids = self.scope.model_dump()
        if run_id is not None:
            ids["run_id"] = run_id
        if not remember:
            return self.memory.log([step], **ids)
        return self.memory.add([step], infer=False, background=True, **ids).episodes

    def __deepcopy__(self, memo: dict[int, Any]) -> MemoryTool:
        return self  # planners copy their tools; the card must keep writing to the same file


def _fact(hit: Hit) -> dict[str, Any]:
    record = hit.memory
    return {
        "id": record.id,
        "content": record.content,
        "status": record.status,
        "valid_at": record.valid_at.isoformat() if record.valid_at else None,
        "invalid_at": record.invalid_at.isoformat() if record.invalid_at else None,
        "confidence": record.confidence,
        "kind": record.kind,
        "run_id": record.run_id,
        "metadata": record.metadata,
        "sources": [
            {
                "episode_id": source.episode_id,
                "source": source.source,
                "speaker": source.name or source.role,
                "occurred_at": source.occurred_at.isoformat(),
                "run_id": record.run_id,
            }
            for source in hit.provenance
        ],
    }
