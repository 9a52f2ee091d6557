"""The shape of every agent tool answer (agent/tools.py, and the same tools over MCP): failures as
one "error: ..." line, answers cut to the ToolSettings limits with a marker that says what was
cut. A tool's answer lands in the model's context whole, so nothing a memory holds or a caller
sends may make it unbounded (docs/agents.md#bounded-answers)."""

from __future__ import annotations

from pydantic import ValidationError

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.tool_settings import ToolSettings

CUT = "…"


def clip(line: str, limit: int, hint: str = "") -> str:
    """`line`, or its first characters and a marker counting the rest, in `limit` characters."""
    if len(line) <= limit:
        return line

    def marker(left: int) -> str:
        return f"{CUT} [truncated: {left:,} more characters{hint}]"

    # The marker for len(line) is at least as long as the one for fewer characters left.
    keep = max(0, limit - len(marker(len(line))))
    return line[:keep] + marker(len(line) - keep)


def bounded(answer: str, settings: ToolSettings, item_hint: str = "", rest_hint: str = "") -> str:
    """Each line of `answer` clipped to max_item_chars; then, when the whole is over
    max_output_chars, the lines that fit and a marker counting the lines left out."""
    lines = [clip(line, settings.max_item_chars, item_hint) for line in answer.split("\n")]
    text = "\n".join(lines)
    if len(text) <= settings.max_output_chars:
        return text

    def marker(count: int, chars: int) -> str:
        return f"{CUT} [truncated: {count} more lines ({chars:,} characters); {rest_hint or 'not shown'}]"

    room = settings.max_output_chars - len(marker(len(lines), len(text))) - 1
    kept: list[str] = []
    used = -1
    for line in lines:
        if used + 1 + len(line) > room:
            break
        kept.append(line)
        used += 1 + len(line)
    if not kept:  # a first line longer than the room left beside the marker
        kept = [clip(lines[0], room, item_hint)]
    rest = lines[len(kept) :]
    return "\n".join([*kept, marker(len(rest), len("\n".join(rest)))])


def argument_error(exc: ValidationError) -> str:
    """Arguments that do not fit a tool's schema, as one line: which argument and why (never the
    value given, which may be huge or hostile)."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "error: " + "; ".join(problems)


def error_line(exc: BaseException) -> str:
    """A failure as the one line a model reads, never a traceback with file paths."""
    if isinstance(exc, ValidationError):
        return argument_error(exc)
    if isinstance(exc, (DSPyMemoryError, ValueError, TypeError, LookupError)):
        said = str(exc)
    else:  # an unexpected failure: its kind and first line, as much as the model needs
        said = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return "error: " + " ".join(said.split())
