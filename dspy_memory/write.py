"""Write path: input -> episodes (persisted first) -> memories, in one transaction.

This is raw mode: every message becomes a searchable `turn` memory. Episodes are written in
their own transaction before anything that can fail (embedding, later an LM call), so nothing a
user gave us is lost; episodes left unfinished are replayed by `process_pending`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.embed import Embedder
from dspy_memory.store import NewMemory, Store, TimeView
from dspy_memory.timeutil import TimeLike, now_db, to_datetime, to_db, utcnow
from dspy_memory.types import Episode, MemoryRecord, Scope

MessagesInput = str | Mapping[str, Any] | Sequence[Any]

_MESSAGE_KEYS = {"role", "content", "name", "metadata", "at"}


def content_hash(content: str) -> str:
    """Hash of a memory's text, insensitive to case and whitespace (for de-duplication)."""
    normalized = " ".join(content.split()).casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


@dataclass
class _Draft:
    source: str
    content: str
    role: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    at: TimeLike | None = None


def _message(item: Mapping[str, Any], position: int) -> _Draft:
    content = item.get("content")
    if not isinstance(content, str):
        raise TypeError(f"message {position}: 'content' must be a string, got {type(content).__name__}")
    for key in ("role", "name"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise TypeError(f"message {position}: {key!r} must be a string")
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"message {position}: 'metadata' must be a dict")
    unknown = set(item) - _MESSAGE_KEYS
    extra = {key: item[key] for key in unknown}
    return _Draft(
        source="message",
        content=content,
        role=item.get("role"),
        name=item.get("name"),
        metadata={**extra, **metadata},
        at=item.get("at"),
    )


def drafts_from_input(messages: MessagesInput) -> list[_Draft]:
    """Accept a string (text), a message dict, a list of message dicts or strings, or any other
    JSON-serializable dict (stored as a json episode)."""
    if isinstance(messages, str):
        return [_Draft(source="text", content=messages)]
    if isinstance(messages, Mapping):
        if "content" in messages:
            return [_message(messages, 0)]
        try:
            return [_Draft(source="json", content=json.dumps(messages, ensure_ascii=False, sort_keys=True))]
        except TypeError as exc:
            raise TypeError(f"a dict without 'content' is stored as JSON, but {exc}") from None
    if isinstance(messages, Sequence) and not isinstance(messages, (bytes, bytearray)):
        drafts = []
        for position, item in enumerate(messages):
            if isinstance(item, str):
                drafts.append(_Draft(source="text", content=item))
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


class Writer:
    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    def persist(
        self,
        messages: MessagesInput,
        scope: Scope,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
    ) -> list[Episode]:
        """Write the input as episodes, in their own transaction, before any processing."""
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError("metadata must be a dict")
        drafts = drafts_from_input(messages)
        default_time = to_datetime(at, name="at") if at is not None else utcnow()
        ingested = utcnow()
        episodes = [
            Episode(
                id=str(uuid.uuid4()),
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                run_id=scope.run_id,
                source=draft.source,
                role=draft.role,
                name=draft.name,
                content=draft.content,
                metadata={**(metadata or {}), **draft.metadata},
                occurred_at=to_datetime(draft.at, name="at") if draft.at is not None else default_time,
                ingested_at=ingested,
            )
            for draft in drafts
        ]
        try:
            json.dumps([episode.metadata for episode in episodes])
        except TypeError as exc:
            raise TypeError(f"metadata must be JSON-serializable: {exc}") from None
        self.store.episodes.insert(episodes)
        return episodes

    def process(self, episodes: Sequence[Episode], *, actor: str = "user") -> list[MemoryRecord]:
        """Turn episodes into `turn` memories. Safe to repeat: an episode that already has
        memories is only marked done."""
        if not episodes:
            return []
        ids = [episode.id for episode in episodes]
        with_text = [episode for episode in episodes if episode.content.strip()]
        try:
            vectors = self.embedder.embed([turn_text(episode) for episode in with_text])
        except Exception as exc:
            self.store.episodes.mark(ids, "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        with self.store.transaction():
            already = self.store.episodes.with_memories(ids)
            items = [
                NewMemory(
                    id=str(uuid.uuid4()),
                    content=turn_text(episode),
                    content_hash=content_hash(turn_text(episode)),
                    embedding=vector,
                    kind="turn",
                    user_id=episode.user_id,
                    agent_id=episode.agent_id,
                    run_id=episode.run_id,
                    metadata=episode.metadata,
                    valid_at=to_db(episode.occurred_at),
                    episode_ids=[episode.id],
                )
                for episode, vector in zip(with_text, vectors)
                if episode.id not in already
            ]
            row_ids = self.store.insert_memories(items, actor=actor)
            self.store.episodes.mark(ids, "done")
            found = self.store.records_with_provenance(row_ids, TimeView.at())
        return [found[row_id][0] for row_id in row_ids]

    def process_pending(self, *, grace_seconds: float = 60.0, limit: int = 1000) -> int:
        """Replay episodes left pending or failed (older than `grace_seconds`, so episodes that
        another writer is processing right now are left alone). Returns how many were done."""
        cutoff = to_db(utcnow().timestamp() - grace_seconds) or now_db()
        pending = self.store.episodes.unfinished(ingested_before=cutoff, limit=limit)
        # Episodes whose memories were written before a crash only need marking, not embedding.
        finished = self.store.episodes.with_memories([episode.id for episode in pending])
        if finished:
            self.store.episodes.mark(list(finished), "done")
        todo = [episode for episode in pending if episode.id not in finished]
        if todo:
            self.process(todo, actor="system")
        return len(pending)
