"""Raw mode: each message stored as a searchable `turn` memory, once per scope, text and time,
whichever writer (or replay) gets to it first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dspy_memory.embed import Embedder
from dspy_memory.store import NewMemory, Store, TimeView
from dspy_memory.types import Episode, MemoryRecord, Scope
from dspy_memory.util.lm import short_error
from dspy_memory.write.apply import raw_turn
from dspy_memory.write.claims import Claimant
from dspy_memory.write.inputs import turn_text

NO_LM = "no LM configured; reprocess() with one"


class TurnWriter:
    def __init__(self, store: Store, embedder: Embedder, claims: Claimant) -> None:
        self._store = store
        self._embedder = embedder
        self._claims = claims

    def store(
        self,
        episodes: Sequence[Episode],
        *,
        actor: str = "user",
        error: str | None = None,
        embedded: Mapping[str, np.ndarray] | None = None,
    ) -> list[MemoryRecord]:
        """Store the episodes this writer holds as `turn` memories. Safe to repeat: an episode
        that already has memories gets none again. Episodes added raw are then done; episodes
        meant for an LM are kept raw until one can run: marked failed with `error` (default: no
        LM), so reprocess() extracts them later. `embedded`: {episode id: the vector of its
        `turn_text`}, computed ahead (bulk ingestion embeds the next batch meanwhile)."""
        if not episodes:
            return []
        ids = [episode.id for episode in episodes]
        already = self._store.episodes.with_memories(ids)
        todo = [episode for episode in episodes if episode.content.strip() and episode.id not in already]
        try:
            texts = [turn_text(episode) for episode in todo]
            vectors: np.ndarray | list[np.ndarray] = []
            if embedded is not None and all(episode.id in embedded for episode in todo):
                vectors = [embedded[episode.id] for episode in todo]
            elif texts:
                vectors = self._embedder.embed(texts)
        except Exception as exc:
            reason = f"{error}; " if error else ""
            self._store.episodes.mark(ids, "failed", error=reason + short_error(exc))
            raise
        with self._store.transaction():
            # Checked again under the write lock: only what this writer still holds, and not what
            # another writer stored while we embedded.
            held = self._claims.held(ids)
            stored = self._store.episodes.with_memories([episode.id for episode in todo]) if todo else set()
            items = [
                raw_turn(episode, vector)
                for episode, vector in zip(todo, vectors)
                if episode.id not in stored and episode.id in held
            ]
            items, repeats = self._repeats(items)
            inserted = dict(zip([item.id for item in items], self._store.insert_memories(items, actor=actor)))
            for memory_id, (row_id, episode_ids) in repeats.items():
                self._store.turns.restated(row_id or inserted[memory_id], memory_id, episode_ids)
            row_ids = [*inserted.values(), *(row_id for row_id, _ in repeats.values() if row_id)]
            self._store.episodes.mark([e.id for e in episodes if e.id in held and not e.infer], "done")
            waiting = [e.id for e in episodes if e.id in held and e.infer]
            self._store.episodes.mark(waiting, "failed", error=error or NO_LM)
            found = self._store.records_with_provenance(row_ids, TimeView.at())
        return [found[row_id][0] for row_id in row_ids]

    def _repeats(
        self, items: list[NewMemory]
    ) -> tuple[list[NewMemory], dict[str, tuple[int | None, list[str]]]]:
        """Raw turns to insert, and the ones that repeat a turn already stored (or earlier in the
        batch) with the same scope, text, time and expiry (a turn given again to be kept longer
        or shorter is another memory: a memory's sources are erased with it): {memory id: (its row id, or None while it is
        still to be inserted; the episodes that said it again)}. Runs inside the write
        transaction, so concurrent writers of one text make one memory."""
        keys = [
            (
                Scope(user_id=i.user_id, agent_id=i.agent_id, run_id=i.run_id),
                i.content_hash,
                i.valid_at,
                i.expires_at,
            )
            for i in items
        ]
        existing = self._store.turns.current(keys)
        fresh: list[NewMemory] = []
        first: dict[tuple[Any, ...], NewMemory] = {}
        repeats: dict[str, tuple[int | None, list[str]]] = {}
        for item, key, found in zip(items, keys, existing):
            if found is not None:
                target: tuple[int | None, str] = found
            elif key in first:
                target = (None, first[key].id)
            else:
                first[key] = item
                fresh.append(item)
                continue
            row_id, memory_id = target
            repeats.setdefault(memory_id, (row_id, []))[1].extend(item.episode_ids)
        return fresh, repeats
