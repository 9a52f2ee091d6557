"""Memory as tools for `dspy.ReAct`: typed functions with docstrings a model can use well.

The scope is bound when the tools are made, so a model can never read or write another
user's memories. It is exact in every scope mode (docs/scopes.md): tools bound to
agent_id="x" alone reach agent x's memories stored without a user, never its users'. Every
tool returns a short text: results carry ids (first 8 characters), dates and status so the
agent can reason about time; failures come back as "error: ..." instead of a traceback. Answers
are cut to `MemoryConfig.tools` (ToolSettings) with a marker saying what was cut. Each argument
is declared once, as an annotation that carries its description and bounds, for dspy.Tool and
the MCP server alike. Tools pickle (agent/binding.py says how).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, cast

import dspy
from pydantic import ConfigDict, Field, TypeAdapter, validate_call

from dspy_memory.agent.binding import Binding
from dspy_memory.agent.tool_answers import bounded, clip, error_line
from dspy_memory.errors import InvalidInputError
from dspy_memory.types import LOW_CONFIDENCE, MemoryRecord, Scope
from dspy_memory.util.text import check_flag, day

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


# -- the arguments: each declared once; dspy.Tool's args and arg_desc and the MCP input schema
# are both read from these annotations (descriptions and bounds alike).
MAX_K = 20
Query = Annotated[str, Field(description="what to look for, in words")]
HowMany = Annotated[int, Field(description=f"how many memories, 1-{MAX_K}", ge=1, le=MAX_K)]
AsOf = Annotated[
    str | None, Field(description="a past date YYYY-MM-DD to ask what was true then; leave empty for now")
]
Sentence = Annotated[str, Field(description="a self-contained sentence")]
ExpiresIn = Annotated[
    str | None,
    Field(
        description='keep it only this long, e.g. "24h" or "30d", then it is erased; it is saved '
        "as said, apart from other memories. Leave empty to keep it"
    ),
]
MemoryId = Annotated[str, Field(description="the id shown in brackets by recall")]
Why = Annotated[str, Field(description="why, in a few words")]
Verdict = Annotated[str, Field(description="wrong, outdated, irrelevant or useful")]
Note = Annotated[str, Field(description="why, in a few words (may be empty)")]
Label = Annotated[str, Field(description='the block\'s label, e.g. "human" (the user) or "persona" (you)')]
Line = Annotated[str, Field(description="the line to add")]
OldText = Annotated[str, Field(description="the exact text to replace")]
NewText = Annotated[str, Field(description="the new text")]

# What the truncation markers tell the model: after a cut line, where the whole text is; after
# left-out lines, how to ask for less.
_KEPT = "; the memory keeps them all (memory.get(id) in Python shows the whole)"
_HINTS = {
    "recall": (_KEPT, "ask with a smaller k or a narrower query"),
    "remember": (_KEPT, "every memory was saved"),
    "revise": (_KEPT, ""),
    "memory_history": (
        "; memory.history(id) in Python shows them all",
        "memory.history(id) in Python shows every event",
    ),
}


# -- the tools: module-level functions of a Binding (agent/binding.py) and their arguments -------


def recall(bound: Binding, query: Query, k: HowMany = 5, as_of: AsOf = None) -> str:
    """Search long-term memory for facts relevant to `query`, best first.

    Returns what is true now, or with `as_of` (a date, YYYY-MM-DD) what was true then. Each
    line shows the memory id, whether it is current or superseded with its dates, and the
    fact. Use it before answering questions about the user or past events."""
    hits = bound.memory.search(query, k=k, as_of=as_of or None, exact=True, **bound.ids)
    if not hits:
        return "no memories found" + (f" for {as_of}" if as_of else "")
    header = f"{len(hits)} memories" + (f" true on {as_of}" if as_of else " (current)")
    return "\n".join([header + ":", *(describe(hit.memory) for hit in hits)])


def remember(bound: Binding, content: Sentence, expires_in: ExpiresIn = None) -> str:
    """Save something worth remembering long-term (a fact, preference, event or procedure),
    written as a self-contained sentence with names and absolute dates."""
    if not content.strip():
        return "error: nothing to remember: content is empty"
    message = {"role": "assistant", "content": content}
    if expires_in:
        # Saved as said: through the write program an expiring note could revise a memory that
        # is to stay, which would then expire with it (store/retention.py): a tool destroys
        # nothing (docs/governance.md#least-privilege-for-agents).
        result = bound.memory.add(message, infer=False, expires_in=expires_in, **bound.ids)
    else:
        result = bound.memory.add(message, **bound.ids)
    if result.error:
        return f"saved as raw text (the memory writer failed: {result.error})"
    lines = [f"{op.action} [{short_id(op.memory_id)}] {op.content or ''}".rstrip() for op in result.ops]
    if not result.ops:
        lines = [f"saved [{short_id(record.id)}] {record.content}" for record in result.memories]
    return "\n".join(lines) or "nothing new to remember"


def revise(bound: Binding, memory_id: MemoryId, content: Sentence, reason: Why) -> str:
    """Correct a memory that is wrong or incomplete; the old version is kept in its history."""
    record = bound.memory.update(bound.resolve(memory_id), content, reason=reason, **bound.ids)
    return f"revised [{short_id(record.id)}] to version {record.version}: {record.content}"


def forget(bound: Binding, memory_id: MemoryId) -> str:
    """Delete a memory for good (no history is kept). Only when the user asks to forget it."""
    full = bound.resolve(memory_id)
    bound.memory.delete(full, **bound.ids)
    return f"forgot [{short_id(full)}]"


def memory_history(bound: Binding, memory_id: MemoryId) -> str:
    """How a memory changed over time: when it was added, revised or invalidated, and why."""
    events = bound.memory.history(bound.resolve(memory_id), **bound.ids)
    return "\n".join(
        f"{event.created_at:%Y-%m-%d} {event.event}"
        + (f": {event.new_content}" if event.new_content else "")
        + (f" (reason: {event.reason})" if event.reason else "")
        for event in events
    )


def memory_feedback(bound: Binding, memory_id: MemoryId, verdict: Verdict, note: Note = "") -> str:
    """Say that a recalled memory was wrong, outdated, irrelevant or useful for the task, with
    a short note; the memory writer learns from it. Use revise to correct the text itself."""
    record = bound.memory.feedback(bound.resolve(memory_id), verdict, note=note or None, **bound.ids)
    return f"noted: [{short_id(record.memory_id or '')}] {record.verdict}"


def core_memory_append(bound: Binding, label: Label, text: Line) -> str:
    """Add a line to a core memory block (always in your context), e.g. label "human" for what
    you know about the user or "persona" for yourself; those start empty if missing."""
    creatable = bound.settings.default_blocks
    block = bound.memory.blocks.append(label, text, creatable=creatable, **bound.ids)
    return f"block {block.label} is now {len(block.value)}/{block.char_limit} characters"


def core_memory_replace(bound: Binding, label: Label, old: OldText, new: NewText) -> str:
    """Replace text in a core memory block; copy `old` exactly, `new` may be empty."""
    block = bound.memory.blocks.replace(label, old, new, **bound.ids)
    return f"block {block.label} is now {len(block.value)}/{block.char_limit} characters"


TOOL_FUNCTIONS: dict[str, Callable[..., str]] = {
    function.__name__: function
    for function in (
        recall,
        remember,
        revise,
        forget,
        memory_history,
        memory_feedback,
        core_memory_append,
        core_memory_replace,
    )
}


@functools.cache
def _validated(function: Callable[..., str]) -> Callable[..., str]:
    # Arguments checked against the same annotations, also when a tool's function is called
    # directly (as MCP does): a wrong type or an out-of-range k is an error line, not a crash.
    return validate_call(config=ConfigDict(arbitrary_types_allowed=True))(function)


@functools.cache
def _signature(function: Callable[..., str]) -> inspect.Signature:
    """The arguments a model gives (the Binding comes first and is not one of them)."""
    signature = inspect.signature(function, eval_str=True)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


class BoundTool:
    """One tool function bound to a Binding: what a MemoryToolFunction calls and MCP publishes.
    Its answer is always a bounded text (tool_answers.py); it pickles (binding.py)."""

    def __init__(self, function: Callable[..., str], binding: Binding) -> None:
        self.function = function
        self.binding = binding

    @property
    def __signature__(self) -> inspect.Signature:  # what inspect.signature(tool.func) reports
        return _signature(self.function)

    def __call__(self, **arguments: Any) -> str:
        try:
            answer = _validated(self.function)(self.binding, **arguments)
        except Exception as exc:
            return self.error(exc)
        if answer.startswith("error: "):
            return self.error(answer)
        item_hint, rest_hint = _HINTS.get(self.function.__name__, ("", ""))
        return bounded(answer, self.binding.settings, item_hint, rest_hint)

    def error(self, failure: BaseException | str) -> str:
        """A failure as one line within max_item_chars."""
        line = failure if isinstance(failure, str) else error_line(failure)
        return clip(" ".join(line.split()), self.binding.settings.max_item_chars)


class MemoryToolFunction(dspy.Tool):
    """A dspy.Tool whose argument errors are one line for the model too (dspy.Tool validates
    arguments before calling, and ReAct would show a traceback)."""

    def __call__(self, **kwargs: Any) -> Any:
        try:
            return super().__call__(**kwargs)
        except ValueError as exc:
            return cast(BoundTool, self.func).error(exc)

    async def acall(self, **kwargs: Any) -> Any:
        """The tool run by its Memory's workers (docs/async.md): an agent's `acall` awaits it
        without blocking the event loop, and the LM calls inside it (remember's write program)
        are awaited on the loop."""
        return await cast(BoundTool, self.func).binding.memory.workers.run(self.__call__, **kwargs)


def chosen_tools(
    allow: Iterable[str] | None = None, allow_forget: bool = False, allow_feedback: bool = False
) -> list[str]:
    """The tool names to make: `allow` (default: every tool permitted), where `forget` is
    permitted only with allow_forget=True and `memory_feedback` only with allow_feedback=True.
    Naming one in `allow` without its opt-in is an error rather than silently leaving it out, so
    nobody believes an agent can delete (or label) when it cannot."""
    opted = {
        "allow_forget": check_flag(allow_forget, "allow_forget"),
        "allow_feedback": check_flag(allow_feedback, "allow_feedback"),
    }
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
) -> list[MemoryToolFunction]:
    """`dspy.Tool`s bound to `memory` and `scope`: `chosen_tools(allow, allow_forget, allow_feedback)`."""
    binding = Binding(memory, scope)
    return [
        _tool(TOOL_FUNCTIONS[name], binding) for name in chosen_tools(allow, allow_forget, allow_feedback)
    ]


def _tool(function: Callable[..., str], binding: Binding) -> MemoryToolFunction:
    parameters = _signature(function).parameters.values()
    args = {}
    for parameter in parameters:
        args[parameter.name] = TypeAdapter(parameter.annotation).json_schema()
        if parameter.default is not parameter.empty:
            args[parameter.name]["default"] = parameter.default
    tool = MemoryToolFunction(
        BoundTool(function, binding),
        name=function.__name__,
        desc=inspect.cleandoc(function.__doc__ or ""),
        args=args,
        arg_types={parameter.name: parameter.annotation for parameter in parameters},
        arg_desc={name: schema["description"] for name, schema in args.items()},
    )
    tool.has_kwargs = False  # dspy.Tool reads `**arguments` off BoundTool.__call__; unknown ones are refused
    return tool
