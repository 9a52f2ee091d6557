"""Memory as tools for `dspy.ReAct`: typed functions with docstrings a model can use well.

The scope is bound when the tools are made, so a model can never read or write another
user's memories. It is exact in every scope mode (docs/scopes.md): tools bound to
agent_id="x" alone reach agent x's memories stored without a user, never its users'. Every
tool returns a short text: results carry ids (first 8 characters), dates and status so the
agent can reason about time; failures come back as "error: ..." instead of a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dspy_memory.errors import DSPyMemoryError, InvalidInputError
from dspy_memory.read.context import LOW_CONFIDENCE
from dspy_memory.types import MemoryRecord, Scope
from dspy_memory.util.text import day

if TYPE_CHECKING:
    from dspy_memory.memory import Memory

TOOL_NAMES = (
    "recall",
    "remember",
    "revise",
    "forget",
    "memory_history",
    "memory_feedback",
    "core_memory_append",
    "core_memory_replace",
)
# The tools that cannot destroy anything: revise and the block edits keep every earlier version
# (history shows them), remember only adds. One injected instruction in a recalled memory must
# not be able to erase data, so `forget` (a hard delete) is given only on explicit opt-in.
DESTRUCTIVE_TOOLS = frozenset({"forget"})
# Tools given only on opt-in, and the option that gives each. memory_feedback keeps the model's
# verdicts as labelled examples the write program may be compiled on (docs/feedback.md): whether
# an agent's judgement is worth that is the developer's call, and an injected memory must not be
# able to fill the training data by default.
OPT_IN_TOOLS = {"forget": "allow_forget", "memory_feedback": "allow_feedback"}
DEFAULT_TOOL_NAMES = tuple(name for name in TOOL_NAMES if name not in OPT_IN_TOOLS)
_WHY = {
    "forget": "deletes memories for good",
    "memory_feedback": "keeps the agent's verdicts as examples the memory writer learns from",
}
SHORT_ID = 8


def short_id(memory_id: str) -> str:
    return memory_id[:SHORT_ID]


def describe(record: MemoryRecord) -> str:
    """One line: id, status with validity dates, confidence when low, content."""
    if record.status == "superseded":
        when = f"superseded: true {day(record.valid_at)} to {day(record.invalid_at)}"
    elif record.status == "expired":
        when = "retracted (was never true)"
    else:
        when = f"{record.status} since {day(record.valid_at)}"
    confidence = f" | low confidence {record.confidence:.1f}" if record.confidence < LOW_CONFIDENCE else ""
    return f"[{short_id(record.id)}] {when}{confidence} | {record.content}"


def _safe(function: Callable[..., str]) -> Callable[..., str]:
    """Tool errors reach the model as one short line, never a traceback with file paths."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return function(*args, **kwargs)
        except (DSPyMemoryError, ValueError, TypeError, LookupError) as exc:
            return f"error: {exc}"
        except Exception as exc:  # an unexpected failure is still one line for the model
            return f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

    return wrapper


def _tool_class() -> type:
    import dspy

    class MemoryToolFunction(dspy.Tool):
        """A dspy.Tool whose argument errors are one line for the model too (dspy.Tool
        validates arguments before calling, and ReAct would show a traceback)."""

        def __call__(self, **kwargs: Any) -> Any:
            try:
                return super().__call__(**kwargs)
            except ValueError as exc:
                return f"error: {exc}"

        async def acall(self, **kwargs: Any) -> Any:
            try:
                return await super().acall(**kwargs)
            except ValueError as exc:
                return f"error: {exc}"

    return MemoryToolFunction


def chosen_tools(
    allow: Iterable[str] | None = None, allow_forget: bool = False, allow_feedback: bool = False
) -> list[str]:
    """The tool names to make: `allow` (default: every tool permitted), where `forget` is
    permitted only with allow_forget=True and `memory_feedback` only with allow_feedback=True.
    Naming one in `allow` without its opt-in is an error rather than silently leaving it out, so
    nobody believes an agent can delete (or label) when it cannot."""
    opted = {"allow_forget": allow_forget, "allow_feedback": allow_feedback}
    for option, value in opted.items():
        if not isinstance(value, bool):
            raise InvalidInputError(f"{option} must be True or False, not {type(value).__name__}")
    if allow is not None and (isinstance(allow, (str, bytes)) or not isinstance(allow, Iterable)):
        raise InvalidInputError(f"allow takes a list of tool names from {list(TOOL_NAMES)}")
    permitted = [name for name in TOOL_NAMES if name not in OPT_IN_TOOLS or opted[OPT_IN_TOOLS[name]]]
    chosen = list(permitted if allow is None else allow)
    unknown = [name for name in chosen if name not in TOOL_NAMES]
    if unknown:
        raise InvalidInputError(f"unknown memory tools {unknown!r:.200}; choose from {list(TOOL_NAMES)}")
    refused = [name for name in chosen if name not in permitted]
    if refused:
        option = OPT_IN_TOOLS[refused[0]]
        raise InvalidInputError(
            f"{refused[0]!r} {_WHY[refused[0]]} and is not given to an agent by default: "
            f"pass {option}=True (CLI: --{option.replace('_', '-')}) to opt in"
        )
    return list(dict.fromkeys(chosen))


def make_tools(
    memory: Memory,
    scope: Scope,
    allow: Iterable[str] | None = None,
    *,
    allow_forget: bool = False,
    allow_feedback: bool = False,
) -> list[Any]:
    """`dspy.Tool`s bound to `memory` and `scope`: `chosen_tools(allow, allow_forget, allow_feedback)`."""
    chosen = chosen_tools(allow, allow_forget, allow_feedback)
    ids = scope.model_dump()

    def resolve(memory_id: str) -> str:
        memory_id = str(memory_id).strip().strip("[]")
        if len(memory_id) < 4:
            raise ValueError("give the memory id as shown by recall (8 characters)")
        found = memory.store.ids_with_prefix(memory_id, scope)
        if not found:
            raise LookupError(f"no memory {memory_id!r} here; use recall to find ids")
        if len(found) > 1:
            raise LookupError(f"{memory_id!r} matches several memories; give more characters")
        return found[0]

    def recall(query: str, k: int = 5, as_of: str | None = None) -> str:
        """Search long-term memory for facts relevant to `query`, best first.

        Returns what is true now, or with `as_of` (a date, YYYY-MM-DD) what was true then. Each
        line shows the memory id, whether it is current or superseded with its dates, and the
        fact. Use it before answering questions about the user or past events."""
        hits = memory._retriever.search_at(query, scope, k=max(1, min(int(k), 20)), as_of=as_of or None)
        if not hits:
            return "no memories found" + (f" for {as_of}" if as_of else "")
        header = f"{len(hits)} memories" + (f" true on {as_of}" if as_of else " (current)")
        return "\n".join([header + ":", *(describe(hit.memory) for hit in hits)])

    def remember(content: str) -> str:
        """Save something worth remembering long-term (a fact, preference, event or procedure),
        written as a self-contained sentence with names and absolute dates."""
        if not isinstance(content, str) or not content.strip():
            return "error: nothing to remember: content is empty"
        result = memory.add({"role": "assistant", "content": content}, **ids)
        if result.error:
            return f"saved as raw text (the memory writer failed: {result.error})"
        lines = [f"{op.action} [{short_id(op.memory_id)}] {op.content or ''}".rstrip() for op in result.ops]
        if not result.ops:
            lines = [f"saved [{short_id(record.id)}] {record.content}" for record in result.memories]
        return "\n".join(lines) or "nothing new to remember"

    def revise(memory_id: str, content: str, reason: str) -> str:
        """Correct a memory that is wrong or incomplete; the old version is kept in its history."""
        record = memory.update(resolve(memory_id), content, reason=reason, **ids)
        return f"revised [{short_id(record.id)}] to version {record.version}: {record.content}"

    def forget(memory_id: str) -> str:
        """Delete a memory for good (no history is kept). Only when the user asks to forget it."""
        full = resolve(memory_id)
        memory.delete(full, **ids)
        return f"forgot [{short_id(full)}]"

    def memory_history(memory_id: str) -> str:
        """How a memory changed over time: when it was added, revised or invalidated, and why."""
        events = memory.history(resolve(memory_id), **ids)
        return "\n".join(
            f"{event.created_at:%Y-%m-%d} {event.event}"
            + (f": {event.new_content}" if event.new_content else "")
            + (f" (reason: {event.reason})" if event.reason else "")
            for event in events
        )

    def memory_feedback(memory_id: str, verdict: str, note: str = "") -> str:
        """Say that a recalled memory was wrong, outdated, irrelevant or useful for the task, with
        a short note; the memory writer learns from it. Use revise to correct the text itself."""
        record = memory.feedback(resolve(memory_id), verdict, note=note or None, **ids)
        return f"noted: [{short_id(record.memory_id or '')}] {record.verdict}"

    def core_memory_append(label: str, text: str) -> str:
        """Add a line to a core memory block (always in your context), e.g. label "human"."""
        block = memory.blocks.append(label, text, **ids)
        return f"block {block.label} is now {len(block.value)}/{block.char_limit} characters"

    def core_memory_replace(label: str, old: str, new: str) -> str:
        """Replace text in a core memory block; copy `old` exactly, `new` may be empty."""
        block = memory.blocks.replace(label, old, new, **ids)
        return f"block {block.label} is now {len(block.value)}/{block.char_limit} characters"

    functions = {
        "recall": recall,
        "remember": remember,
        "revise": revise,
        "forget": forget,
        "memory_history": memory_history,
        "memory_feedback": memory_feedback,
        "core_memory_append": core_memory_append,
        "core_memory_replace": core_memory_replace,
    }
    descriptions = {
        "query": "what to look for, in words",
        "k": "how many memories, 1-20",
        "as_of": "a past date YYYY-MM-DD to ask what was true then; leave empty for now",
        "content": "a self-contained sentence",
        "memory_id": "the id shown in brackets by recall",
        "reason": "why, in a few words",
        "verdict": "wrong, outdated, irrelevant or useful",
        "note": "why, in a few words (may be empty)",
        "label": "the block's label",
        "text": "the line to add",
        "old": "the exact text to replace",
        "new": "the new text",
    }
    tool = _tool_class()
    tools = []
    for name in chosen:
        code = functions[name].__code__
        arguments = code.co_varnames[: code.co_argcount]
        tools.append(
            tool(_safe(functions[name]), name=name, arg_desc={arg: descriptions[arg] for arg in arguments})
        )
    return tools
