"""Applying a validated plan: every operation, its events, entities and provenance, in ONE
transaction (see docs/write-path.md for what each action does to the file)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.embed import Embedder
from dspy_memory.plan import NEEDS_CONTENT, Plan, PlannedOp
from dspy_memory.store import NewMemory, Store
from dspy_memory.store.keyword import query_terms
from dspy_memory.text import normalize_name
from dspy_memory.types import AppliedOp, Episode, MemoryRecord, Scope

ACTOR = "lm"


@dataclass
class _Batch:
    scope: Scope
    observed: str
    episodes: Sequence[Episode]
    vectors: dict[int, Any]
    entities: dict[str, str] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    _words: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._words = {episode.id: set(query_terms(episode.content)) for episode in self.episodes}

    def entity(self, name: str | None) -> str | None:
        return self.entities.get(normalize_name(name)) if name else None

    def sources(self, content: str) -> list[str]:
        """The episodes a fact most likely came from: those sharing the most words with it (the
        LM is not asked, which would cost tokens); all of them when none shares a word."""
        words = set(query_terms(content))
        overlap = {episode.id: len(words & self._words[episode.id]) for episode in self.episodes}
        best = max(overlap.values(), default=0)
        if best == 0:
            return [episode.id for episode in self.episodes]
        chosen = [episode for episode in self.episodes if overlap[episode.id] == best]
        # On a tie, what a person said outranks the assistant repeating it.
        people = [episode for episode in chosen if episode.role not in ("assistant", "tool", "system")]
        return [episode.id for episode in people or chosen]

    def source(self, content: str) -> str:
        return self.sources(content)[0]


class PlanApplier:
    def __init__(self, store: Store, embedder: Embedder, *, confirm_strength: float) -> None:
        self.store = store
        self.embedder = embedder
        self.confirm_strength = confirm_strength

    def apply(
        self, plan: Plan, episodes: Sequence[Episode], scope: Scope, observed: str
    ) -> tuple[list[AppliedOp], list[MemoryRecord]]:
        """Apply the plan and mark the episodes done, in one transaction. Returns what was
        applied and the current records of the memories it created or changed."""
        writes = [planned for planned in plan.ops if planned.action in NEEDS_CONTENT]
        # Embedding happens before the transaction: the write lock is held for SQL only.
        vectors = self.embedder.embed([p.content for p in writes]) if writes else []
        spoken = [episode for episode in episodes if episode.content.strip()] or list(episodes)
        batch = _Batch(scope, observed, spoken, {id(p): vector for p, vector in zip(writes, vectors)})
        episode_ids = [episode.id for episode in episodes]
        store = self.store
        with store.transaction():
            batch.entities = store.graph.upsert(
                [name for p in writes for name in (p.op.subject, p.op.object) if name], scope
            )
            applied = [self._apply_one(p, batch) for p in plan.ops]
            # Raw turns kept while an earlier attempt failed are replaced by what was extracted.
            for turn_id in store.episodes.turn_memories(episode_ids):
                store.expire(
                    turn_id,
                    scope=None,
                    actor="system",
                    event="MERGE",
                    reason="replaced by memories extracted from its episode",
                )
            store.episodes.mark(episode_ids, "done")
        if any(op.action == "DELETE" for op in applied):
            store.erase.compact()
            clear = getattr(self.embedder, "clear_cache", None)
            if clear is not None:  # purged content must not stay in the embedding cache
                clear()
        records = [store.get_memory(memory_id, scope=scope) for memory_id in dict.fromkeys(batch.changed)]
        return applied, [record for record in records if record is not None]

    def _apply_one(self, p: PlannedOp, batch: _Batch) -> AppliedOp:
        reason = p.op.reason
        if p.action == "ADD":
            return AppliedOp(action="ADD", memory_id=self._add(p, batch), content=p.content, reason=reason)
        target = p.target
        assert target is not None, "validation guarantees a target for every other action"
        if p.action == "UPDATE":
            self._update(p, target, batch)
            return AppliedOp(action="UPDATE", memory_id=target.id, content=p.content, reason=reason)
        if p.action == "INVALIDATE":
            new_id = self._invalidate(p, target, batch)
            return AppliedOp(
                action="INVALIDATE",
                memory_id=new_id,
                content=p.content,
                replaced_id=target.id,
                correction=p.op.correction,
                reason=reason,
            )
        if p.action == "DELETE":
            self.store.erase.memory(target.id, scope=batch.scope, actor=ACTOR)
            return AppliedOp(action="DELETE", memory_id=target.id, reason=reason)
        self.store.confirm(
            target.id,
            scope=batch.scope,
            episode_ids=batch.sources(target.content),
            gain=self.confirm_strength,
        )
        return AppliedOp(action="NOOP", memory_id=target.id, reason=reason)

    def _add(self, p: PlannedOp, batch: _Batch) -> str:
        new_id = str(uuid.uuid4())
        scope = batch.scope
        item = NewMemory(
            id=new_id,
            content=p.content or "",
            content_hash=p.content_hash or "",
            embedding=batch.vectors[id(p)],
            kind=p.op.kind,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            run_id=scope.run_id,
            confidence=p.op.confidence,
            importance=p.op.importance,
            valid_at=p.valid_at or batch.observed,
            invalid_at=p.invalid_at,
            subject_id=batch.entity(p.op.subject),
            predicate=p.predicate,
            object_id=batch.entity(p.op.object),
            episode_ids=batch.sources(p.content or ""),
        )
        self.store.insert_memories([item], actor=ACTOR, reason=p.op.reason)
        batch.changed.append(new_id)
        return new_id

    def _update(self, p: PlannedOp, target: MemoryRecord, batch: _Batch) -> None:
        changes: dict[str, Any] = {
            "content": p.content,
            "content_hash": p.content_hash,
            "kind": p.op.kind,
            "confidence": p.op.confidence,
            "importance": p.op.importance,
        }
        # What the LM left out stays as it was (a refinement keeps when the fact became true).
        optional = {
            "subject_id": batch.entity(p.op.subject),
            "object_id": batch.entity(p.op.object),
            "predicate": p.predicate,
            "valid_at": p.valid_at,
        }
        changes.update({key: value for key, value in optional.items() if value})
        self.store.supersede(
            target.id,
            scope=batch.scope,
            changes=changes,
            embedding=batch.vectors[id(p)],
            event="UPDATE",
            actor=ACTOR,
            reason=p.op.reason,
            episode_id=batch.source(p.content or ""),
        )
        batch.changed.append(target.id)

    def _invalidate(self, p: PlannedOp, target: MemoryRecord, batch: _Batch) -> str:
        new_id = self._add(p, batch)
        if p.op.correction:
            self.store.expire(
                target.id,
                scope=batch.scope,
                actor=ACTOR,
                reason=p.op.reason,
                episode_id=batch.source(p.content or ""),
                superseded_by=new_id,
                metadata={"correction": True, "superseded_by": new_id, "new_content": p.content},
            )
        else:
            self.store.supersede(
                target.id,
                scope=batch.scope,
                changes={"invalid_at": p.valid_at, "superseded_by": new_id},
                embedding=None,
                event="INVALIDATE",
                actor=ACTOR,
                reason=p.op.reason,
                episode_id=batch.source(p.content or ""),
                add_source=False,
                event_content=p.content,
                event_metadata={"superseded_by": new_id},
            )
        return new_id
