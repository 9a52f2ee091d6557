"""What `Memory.add` accepts, turned into episode drafts; and how a turn reads as text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.timeutil import TimeLike
from dspy_memory.types import EPISODE_SOURCES, Episode

MessagesInput = str | Mapping[str, Any] | Sequence[Any]

_MESSAGE_KEYS = {"role", "content", "name", "metadata", "at", "source"}


@dataclass
class Draft:
    source: str
    content: str
    role: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    at: TimeLike | None = None


def _message(item: Mapping[str, Any], position: int) -> Draft:
    content = item.get("content")
    if not isinstance(content, str):
        raise TypeError(f"message {position}: 'content' must be a string, got {type(content).__name__}")
    for key in ("role", "name"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise TypeError(f"message {position}: {key!r} must be a string")
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"message {position}: 'metadata' must be a dict")
    source = item.get("source") or "message"
    if source not in EPISODE_SOURCES:
        raise ValueError(
            f"message {position}: 'source' must be one of {list(EPISODE_SOURCES)}, not {source!r}"
        )
    unknown = set(item) - _MESSAGE_KEYS
    extra = {key: item[key] for key in unknown}
    return Draft(
        source=source,
        content=content,
        role=item.get("role"),
        name=item.get("name"),
        metadata={**extra, **metadata},
        at=item.get("at"),
    )


def drafts_from_input(messages: MessagesInput) -> list[Draft]:
    """Accept a string (text), a message dict, a list of message dicts or strings, or any other
    JSON-serializable dict (stored as a json episode)."""
    if isinstance(messages, str):
        return [Draft(source="text", content=messages)]
    if isinstance(messages, Mapping):
        if "content" in messages:
            return [_message(messages, 0)]
        try:
            return [Draft(source="json", content=json.dumps(messages, ensure_ascii=False, sort_keys=True))]
        except TypeError as exc:
            raise TypeError(f"a dict without 'content' is stored as JSON, but {exc}") from None
    if isinstance(messages, Sequence) and not isinstance(messages, (bytes, bytearray)):
        drafts = []
        for position, item in enumerate(messages):
            if isinstance(item, str):
                drafts.append(Draft(source="text", content=item))
            elif isinstance(item, Mapping) and "content" in item:
                drafts.append(_message(item, position))
            else:
                raise TypeError(
                    f"message {position} must be a string or a dict with 'role' and 'content', "
                    f"got {type(item).__name__}"
                )
        if not drafts:
            raise ValueError("add() got an empty list of messages")
        return drafts
    raise TypeError(
        "add() takes a string, a message dict, or a list of messages "
        f"({{'role': ..., 'content': ...}}), not {type(messages).__name__}"
    )


def turn_text(episode: Episode) -> str:
    """What a raw turn memory says: the speaker's name travels with the words."""
    return f"{episode.name}: {episode.content}" if episode.name else episode.content
