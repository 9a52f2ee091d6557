"""Conversation files read as a stream of messages, for bulk ingestion (issue 32): JSONL of
messages, OpenAI-style message lists, ChatGPT's `conversations.json` export and the LoCoMo
format. A file is streamed (JSON arrays element by element with ijson), never loaded whole.

Each message keeps its conversation (or session), its time and where it was in the file; a
record that cannot be read is reported as a `Refusal` with where it is and why, and reading goes
on (a JSON array broken mid-file ends there: nothing after it can be found).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, BinaryIO

from dspy_memory.errors import InvalidInputError
from dspy_memory.util.text import shown
from dspy_memory.util.timeutil import to_datetime

FORMATS = ("jsonl", "openai", "chatgpt", "locomo")
CONVERT = (
    "formats read: jsonl (one message a line: role, name, content, at, conversation or session), "
    'openai (a JSON list of messages, a list of such lists, or JSONL of {"messages": [...]}), '
    "chatgpt (the conversations.json of a ChatGPT export), locomo (LoCoMo's samples). Another "
    "format: write one message a line as jsonl, e.g. "
    '{"role": "user", "name": "Ada", "content": "...", "at": "2024-03-01T09:30:00Z", "conversation": "c1"}'
)
# LoCoMo's session times, e.g. "1:56 pm on 8 May, 2023" (UTC: the dataset gives no zone).
LOCOMO_TIME = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Message:
    conversation: str  # the conversation or session it belongs to ("" when the file names none)
    content: str
    where: str  # e.g. "line 12", "conversation 3, message 5"
    role: str | None = None
    name: str | None = None
    at: datetime | None = None
    # The message's own id in the file, stable when the file is edited or exported again
    # (ChatGPT's node ids, LoCoMo's dia_id, an "id" field); None: only its place (`where`) is.
    key: str | None = None


@dataclass(frozen=True)
class Refusal:
    where: str
    reason: str


Read = Iterator[Message | Refusal]


class MessageStream:
    """The messages of one conversation file in file order, with refusals between them; how
    far the reading is (`position` of `size` bytes) for a progress bar."""

    def __init__(self, path: str | Path, format: str = "auto") -> None:
        if format not in (*FORMATS, "auto"):
            raise InvalidInputError(f"unknown format {shown(format)}; {CONVERT}")
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{path}: no such file to read conversations from")
        self.format = detect_format(path) if format == "auto" else format
        self.size = self.path.stat().st_size
        self._file: BinaryIO | None = None
        self._done = False

    def __iter__(self) -> Read:
        readers = {"jsonl": _jsonl, "openai": _openai, "chatgpt": _chatgpt, "locomo": _locomo}
        yield from readers[self.format](self)
        self._done = True

    @property
    def position(self) -> int:
        """Bytes of the file read so far (JSON arrays are parsed in chunks, so it runs a chunk
        ahead of the last message)."""
        if self._done:
            return self.size
        if self._file is None or self._file.closed:
            return 0
        return self._file.tell()

    def open(self) -> BinaryIO:
        self._file = open(self.path, "rb")
        return self._file


def read_messages(path: str | Path, format: str = "auto") -> MessageStream:
    """The messages of a conversation file, in file order, with refusals between them."""
    return MessageStream(path, format)


def detect_format(path: str | Path) -> str:
    """The format of a file, from its first record (InvalidInputError: none fits, saying which
    formats exist and how to convert)."""
    with open(path, "rb") as file:
        head = file.read(4096).lstrip()
        if head.startswith(b"{"):
            file.seek(0)
            first = file.readline()
            try:
                record = json.loads(first)
            except ValueError:
                record = None
            return "openai" if isinstance(record, dict) and "messages" in record else "jsonl"
        if head.startswith(b"["):
            file.seek(0)
            element = next(_array_items(file), None)
            if isinstance(element, list) or (isinstance(element, dict) and "role" in element):
                return "openai"
            if isinstance(element, dict) and "mapping" in element:
                return "chatgpt"
            if isinstance(element, dict) and isinstance(element.get("conversation"), dict):
                return "locomo"
    raise InvalidInputError(f"{path}: not a conversation file this version reads; {CONVERT}")


def _array_items(file: BinaryIO) -> Iterator[Any]:
    import ijson

    return ijson.items(file, "item", use_float=True)


def _items(stream: MessageStream, what: str) -> Iterator[tuple[int, Any] | Refusal]:
    """(number, element) of a JSON array file, streamed; a Refusal where it breaks."""
    import ijson

    with stream.open() as file:
        number = 0
        try:
            for number, item in enumerate(_array_items(file), start=1):
                yield number, item
        except ijson.JSONError as exc:
            yield Refusal(f"{what} {number + 1}", f"not valid JSON, nothing after it is read ({exc})")


def _text(value: Any) -> str | None:
    """A message's text: a string, or OpenAI's list of parts ({"type": "text", "text": ...})."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [part.get("text") if isinstance(part, Mapping) else part for part in value]
        texts = [part for part in parts if isinstance(part, str)]
        if len(texts) == len(parts):
            return "\n".join(texts)
    return None


def _message(record: Any, where: str, conversation: str, at: datetime | None = None) -> Message | Refusal:
    """A message from a {"role", "name", "content", "at"} object."""
    if not isinstance(record, Mapping):
        return Refusal(where, f"a message is an object, not {type(record).__name__}")
    content = _text(record.get("content"))
    if content is None:
        return Refusal(where, "no text content (content must be a string or a list of text parts)")
    for field in ("role", "name"):
        if record.get(field) is not None and not isinstance(record[field], str):
            return Refusal(where, f"{field} must be a string, not {type(record[field]).__name__}")
    try:
        when = to_datetime(record["at"], name="at") if record.get("at") is not None else at
    except InvalidInputError as exc:
        return Refusal(where, str(exc))
    own = record.get("id")
    key = f"{conversation}#{own}" if isinstance(own, (str, int)) and not isinstance(own, bool) else None
    return Message(conversation, content, where, record.get("role"), record.get("name"), when, key)


def _jsonl(stream: MessageStream) -> Read:
    with stream.open() as file:
        for number, raw in enumerate(file, start=1):
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                record = json.loads(line)
            except ValueError as exc:
                yield Refusal(where, f"not valid JSON ({exc.args[0] if exc.args else exc})")
                continue
            if isinstance(record, Mapping) and "messages" in record:
                yield from _conversation(record["messages"], where, str(record.get("conversation", number)))
                continue
            conversation = (
                record.get("conversation", record.get("session", "")) if isinstance(record, Mapping) else ""
            )
            yield _message(record, where, str(conversation))


def _conversation(messages: Any, where: str, conversation: str) -> Read:
    if not isinstance(messages, list):
        yield Refusal(where, "messages must be a list of message objects")
        return
    for index, record in enumerate(messages, start=1):
        yield _message(record, f"{where}, message {index}", conversation)


def _openai(stream: MessageStream) -> Read:
    with open(stream.path, "rb") as file:
        head = file.read(4096).lstrip()
    if head.startswith(b"{"):  # JSONL of {"messages": [...]}
        yield from _jsonl(stream)
        return
    for item in _items(stream, "element"):
        if isinstance(item, Refusal):
            yield item
            continue
        number, record = item
        if isinstance(record, list):  # a list of conversations
            yield from _conversation(record, f"conversation {number}", str(number))
        else:  # one conversation: a list of messages
            yield _message(record, f"message {number}", "")


def _chatgpt(stream: MessageStream) -> Read:
    """Each conversation's current branch (from `current_node` up to the root), in order, with
    each message's `create_time` (else the conversation's)."""
    for item in _items(stream, "conversation"):
        if isinstance(item, Refusal):
            yield item
            continue
        number, record = item
        where = f"conversation {number}"
        mapping = record.get("mapping") if isinstance(record, Mapping) else None
        if not isinstance(mapping, Mapping):
            yield Refusal(where, "no mapping: not a ChatGPT conversation")
            continue
        key = str(record.get("conversation_id") or record.get("id") or number)
        started = _epoch(record.get("create_time"))
        branch, node, seen = [], record.get("current_node"), set()
        while isinstance(node, str) and node in mapping and node not in seen:
            seen.add(node)
            branch.append(mapping[node])
            node = mapping[node].get("parent") if isinstance(mapping[node], Mapping) else None
        for index, entry in enumerate(reversed(branch), start=1):
            message = entry.get("message") if isinstance(entry, Mapping) else None
            if not isinstance(message, Mapping):
                continue  # the root and other nodes without a message
            content = message.get("content") or {}
            role = (message.get("author") or {}).get("role")
            if content.get("content_type") != "text" or role not in ("user", "assistant"):
                continue  # system prompts, tool calls, images: not conversation text
            text = _text(content.get("parts"))
            if not text or not text.strip():
                continue
            at = _epoch(message.get("create_time")) or started
            own = message.get("id")
            yield Message(
                key, text, f"{where}, message {index}", role, None, at, f"{key}#{own}" if own else None
            )


def _epoch(value: Any) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _locomo(stream: MessageStream) -> Read:
    """Each sample's sessions in order; a session's turns at its date-time, a second apart (so
    they keep their order, and a line said twice stays two turns)."""
    for item in _items(stream, "sample"):
        if isinstance(item, Refusal):
            yield item
            continue
        number, record = item
        raw = record.get("conversation") if isinstance(record, Mapping) else None
        if not isinstance(raw, Mapping):
            yield Refusal(f"sample {number}", "no conversation object: not a LoCoMo sample")
            continue
        sample = str(record.get("sample_id") or number)
        sessions = sorted(
            int(key.split("_")[1])
            for key, value in raw.items()
            if key.count("_") == 1
            and key.startswith("session_")
            and key.split("_")[1].isdigit()
            and isinstance(value, list)
        )
        for session in sessions:
            where = f"sample {sample}, session {session}"
            try:
                start = datetime.strptime(
                    str(raw.get(f"session_{session}_date_time", "")).strip(), LOCOMO_TIME
                )
            except ValueError:
                yield Refusal(where, f"no date-time in LoCoMo's form ({LOCOMO_TIME}) for the session")
                continue
            start = start.replace(tzinfo=timezone.utc)
            for index, turn in enumerate(raw[f"session_{session}"]):
                if not isinstance(turn, Mapping) or not isinstance(turn.get("text"), str):
                    yield Refusal(f"{where}, turn {index + 1}", "a turn has a speaker and a text")
                    continue
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shared a photo: {turn['blip_caption']}]"
                own = turn.get("dia_id")
                yield Message(
                    f"{sample}:session_{session}", text, f"{where}, turn {index + 1}", "user",
                    turn.get("speaker"), start + timedelta(seconds=index),
                    f"{sample}#{own}" if isinstance(own, str) else None,
                )  # fmt: skip
