"""Adapters that refuse a truncated or malformed answer instead of repairing it.

DSPy's ChatAdapter and JSONAdapter read structured fields with `json_repair`, which turns an
answer cut off by a token limit (`[{"action": "ADD", "content": "Ada lives in Lis`) into a
plausible value ("Ada lives in Lis"). For memory that is silent corruption: a fragment stored as
a fact. These adapters first require every structured output field to be complete JSON; a
failed parse fails the call, DSPy's retry path runs, and the write path keeps the input raw.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import dspy
import regex
from dspy.adapters.chat_adapter import field_header_pattern
from dspy.utils.exceptions import AdapterParseError

_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def _strict_json(text: str) -> Any:
    """json.loads of `text` (a Markdown code fence around it is allowed); ValueError if it is
    not complete JSON."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    return json.loads(fenced.group(1) if fenced else stripped)


# Scalars: DSPy's own format writes them as Python does ("True", 3), and json_repair cannot turn
# a cut-off scalar into another plausible value the way it completes a list or an object.
_SCALARS = (str, bool, int, float)


def _structured(signature: type[dspy.Signature]) -> list[str]:
    """Output fields whose values must be complete JSON: lists, objects and models."""
    return [
        name
        for name, field in signature.output_fields.items()
        if field.annotation not in _SCALARS and typing.get_origin(field.annotation) is not typing.Literal
    ]


def _refuse(adapter: str, signature: type[dspy.Signature], completion: str, why: str) -> AdapterParseError:
    return AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion, message=why)


# A balanced {...} object, as JSONAdapter finds one inside prose (recursive: the `regex` module).
_OBJECT = regex.compile(r"\{(?:[^{}]|(?R))*\}", regex.DOTALL)


class StrictJSONAdapter(dspy.JSONAdapter):
    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        value = _object(completion)
        if value is None:
            # Prose around a complete object is fine; an object cut short has no balanced match.
            found = _OBJECT.search(completion)
            if found is None or _object(found.group(0)) is None:
                why = "the answer is not a complete JSON object"
                raise _refuse("StrictJSONAdapter", signature, completion, why)
            completion = found.group(0)
        return super().parse(signature, completion)


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = _strict_json(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class StrictChatAdapter(dspy.ChatAdapter):
    def _make_json_adapter_fallback(self) -> dspy.JSONAdapter:
        return StrictJSONAdapter(
            use_native_function_calling=self.use_native_function_calling,
            parallel_tool_calls=self.parallel_tool_calls,
        )

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        fields = super().parse(signature, completion)
        sections = _sections(completion)
        for name in _structured(signature):
            try:
                _strict_json(sections.get(name, ""))
            except ValueError as exc:
                why = f"field {name} is not complete JSON ({exc})"
                raise _refuse("StrictChatAdapter", signature, completion, why) from None
        return fields


def _sections(completion: str) -> dict[str, str]:
    """The text under each [[ ## name ## ]] header (the first one of each name), as ChatAdapter
    splits it."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in completion.splitlines():
        match = field_header_pattern.match(line.strip())
        if match:
            current = None if match.group(1) in sections else sections.setdefault(match.group(1), [])
            rest = line.strip()[match.end() :].strip()
            if current is not None and rest:
                current.append(rest)
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}
