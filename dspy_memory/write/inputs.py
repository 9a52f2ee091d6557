"""What `Memory.add` accepts, turned into episode drafts; how a turn reads as text; and the
checks of the facade's other arguments (metadata, ids, counts). A refused argument raises
`InvalidInputError` before anything is stored."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.types import (
    EPISODE_SOURCES,
    INT64_MAX,
    INT64_MIN,
    Episode,
    EpisodeSource,
    EpisodeStatus,
    Scope,
)
from dspy_memory.util.text import shown, valid_text
from dspy_memory.util.timeutil import TimeLike, format_db, interval_seconds, to_datetime, utcnow

if TYPE_CHECKING:
    from dspy_memory.governance.redact import Redactor

MAX_JSON_DEPTH = 64


def check_json(value: Any, name: str, *, depth: int = 0) -> None:
    """Refuse what would not come back from the file as given: values other than str, int,
    float, bool, None, lists (tuples) and dicts with string keys; NaN and infinities (not JSON);
    integers outside 64 bits (SQLite cannot compare them); lone surrogates; nesting deeper
    than MAX_JSON_DEPTH."""
    if depth > MAX_JSON_DEPTH:
        root = name.split("[", 1)[0]
        raise InvalidInputError(f"{root} is nested more than {MAX_JSON_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        valid_text(value, name)
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidInputError(
                f"{name}={shown(value)} does not fit in 64 bits; store large numbers as strings"
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(
                f"{name}={shown(value)} is not a JSON number; use a finite number or None"
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(
                    f"{name} has a key {shown(key)}: keys must be strings (JSON would turn it into one)"
                )
            valid_text(key, f"a key of {name}")
            check_json(item, f"{name}[{key[:40]!r}]", depth=depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_json(item, f"{name}[{index}]", depth=depth + 1)
    else:
        raise InvalidInputError(
            f"{name} holds {shown(value)}; JSON values are str, int, float, bool, None, lists "
            "and dicts (convert dates and other objects to strings)"
        )


def check_metadata(metadata: Any, name: str = "metadata") -> dict[str, Any]:
    """A metadata dict that JSON stores and reads back unchanged (tuples read back as lists)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{name} must be a dict, not {type(metadata).__name__}")
    check_json(metadata, name)
    return dict(metadata)


# Roles of messages that are not a person speaking: what they say about the user is second-hand.
NOT_A_PERSON = frozenset({"assistant", "tool", "system"})


def said_by_a_person(episode: Episode) -> bool:
    return episode.role not in NOT_A_PERSON and episode.source != "tool_step"


MessagesInput = str | Mapping[str, Any] | Sequence[Any]

_MESSAGE_KEYS = {"role", "content", "name", "metadata", "at", "source"}


@dataclass
class Draft:
    source: EpisodeSource
    content: str
    role: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    at: TimeLike | None = None


def _content(value: Any, name: str) -> str:
    """Text to remember: valid, and not empty (an empty add would store nothing, silently)."""
    text = valid_text(value, name)
    if not text.strip():
        raise InvalidInputError(f"{name} is empty: there is nothing to remember")
    return text


def _message(item: Mapping[str, Any], position: int) -> Draft:
    where = f"message {position}"
    content = valid_text(item.get("content"), f"{where}: 'content'")
    for key in ("role", "name"):
        if item.get(key) is not None:
            valid_text(item[key], f"{where}: {key!r}")
    metadata = check_metadata(item.get("metadata"), f"{where}: 'metadata'")
    source = item.get("source") or "message"
    if source not in EPISODE_SOURCES:
        raise InvalidInputError(
            f"{where}: 'source' must be one of {list(EPISODE_SOURCES)}, not {shown(source)}"
        )
    unknown = set(item) - _MESSAGE_KEYS
    extra = check_metadata({key: item[key] for key in unknown}, f"{where}: extra keys")
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
        return [Draft(source="text", content=_content(messages, "the text to add"))]
    if isinstance(messages, Mapping):
        if "content" in messages:
            draft = _message(messages, 0)
            _content(draft.content, "message 0: 'content'")
            return [draft]
        if "role" in messages:  # a message whose text is under another key, e.g. "text"
            raise InvalidInputError(
                "a message needs 'content' (the text to remember); got keys "
                f"{', '.join(sorted(map(str, messages)))}. A dict without 'role' is stored as JSON data."
            )
        check_json(messages, "the JSON to add")
        return [Draft(source="json", content=json.dumps(messages, ensure_ascii=False, sort_keys=True))]
    if isinstance(messages, Sequence) and not isinstance(messages, (bytes, bytearray)):
        drafts = []
        for position, item in enumerate(messages):
            if isinstance(item, Draft):  # checked already, one by one (bulk ingestion)
                drafts.append(item)
            elif isinstance(item, str):
                drafts.append(Draft(source="text", content=valid_text(item, f"message {position}")))
            elif isinstance(item, Mapping) and "content" in item:
                drafts.append(_message(item, position))
            else:
                raise InvalidInputError(
                    f"message {position} must be a string or a dict with 'role' and 'content', "
                    f"got {type(item).__name__}"
                )
        if not drafts:
            raise InvalidInputError("add() got an empty list of messages")
        if not any(draft.content.strip() for draft in drafts):
            raise InvalidInputError("every message is empty: there is nothing to remember")
        # A blank message among others (e.g. an assistant turn that only called a tool) is kept
        # as an episode, so the transcript stays whole, and makes no memory.
        return drafts
    raise InvalidInputError(
        "add() takes a string, a message dict, or a list of messages "
        f"({{'role': ..., 'content': ...}}), not {type(messages).__name__}"
    )


def expiry(expires_at: TimeLike | None, expires_in: Any) -> datetime | None:
    """When what `add` stores is to be erased: `expires_at` (a time) or `expires_in` (an
    interval from now: "24h", "30d", seconds or a timedelta), at most one; never in the past."""
    if expires_at is not None and expires_in is not None:
        raise InvalidInputError("pass expires_at= or expires_in=, not both")
    now = utcnow()
    if expires_in is not None:
        seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
        try:
            return to_datetime(now + timedelta(seconds=interval_seconds(seconds, "expires_in")))
        except OverflowError:
            raise InvalidInputError(f"expires_in={shown(expires_in)} ends after the year 9999") from None
    if expires_at is None:
        return None
    moment = to_datetime(expires_at, name="expires_at")
    if moment <= now:
        raise InvalidInputError(
            f"expires_at={format_db(moment)} is not in the future (now is {format_db(now)}): what "
            "expires is never stored; pass a later time or expires_in= (e.g. '24h')"
        )
    return moment


def episodes_from_input(
    messages: MessagesInput,
    scope: Scope,
    *,
    metadata: Any = None,
    at: TimeLike | None = None,
    infer: bool = False,
    status: EpisodeStatus = "pending",
    redact: Redactor | None = None,
    expires_at: datetime | None = None,
    ids: Sequence[str] | None = None,
) -> list[Episode]:
    """The episodes to persist for what `Memory.add` got: one per message, in the scope, with
    `metadata` under each message's own, said at the message's "at", else `at`, else now.
    Raises InvalidInputError before anything exists when any part is refused. With `redact`,
    secrets in contents and metadata values are replaced before anything is stored. `ids`: one
    per message instead of new ones (bulk ingestion derives them from the file, so a second
    run finds what the first stored)."""
    metadata = check_metadata(metadata)
    drafts = drafts_from_input(messages)
    if ids is not None and len(ids) != len(drafts):
        raise ValueError(f"{len(ids)} episode ids for {len(drafts)} messages")
    if redact:
        metadata = redact.json(metadata)
        drafts = [_redacted(draft, redact) for draft in drafts]
    default_time = to_datetime(at, name="at") if at is not None else utcnow()
    ingested = utcnow()
    ids = ids if ids is not None else [str(uuid.uuid4()) for _ in drafts]
    return [
        Episode(
            id=episode_id,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            run_id=scope.run_id,
            source=draft.source,
            role=draft.role,
            name=draft.name,
            content=draft.content,
            metadata={**metadata, **draft.metadata},
            occurred_at=to_datetime(draft.at, name="at") if draft.at is not None else default_time,
            ingested_at=ingested,
            infer=infer,
            status=status,
            expires_at=expires_at,
        )
        for episode_id, draft in zip(ids, drafts)
    ]


def _redacted(draft: Draft, redact: Redactor) -> Draft:
    if draft.source == "json":  # redact the values, so the text stays the JSON it was
        value = redact.json(json.loads(draft.content))
        content = json.dumps(value, ensure_ascii=False, sort_keys=True)
    else:
        content = redact.text(draft.content)
    return dataclasses.replace(draft, content=content, metadata=redact.json(draft.metadata))


def turn_text(episode: Episode) -> str:
    """What a raw turn memory says: the speaker's name travels with the words."""
    return f"{episode.name}: {episode.content}" if episode.name else episode.content
