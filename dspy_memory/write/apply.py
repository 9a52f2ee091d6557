"""Applying a validated plan: every operation, its events, entities and provenance, in ONE
transaction (see docs/write-path.md for what each action does to the file).

Inside that transaction, before anything is written: the writer must still hold every episode
of the batch (claims), and nothing the LM decided on may have changed since it read it
(compare-and-set, `Store.check_unchanged`); otherwise nothing is applied and the write path
plans again. Every episode ends with a memory: one the plan made or confirmed from it, or its
raw `turn` (kept, or made now) when the plan holds nothing from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dspy_memory.embed import Embedder, forget_cached_content
from dspy_memory.errors import DSPyMemoryError
from dspy_memory.ops import AppliedOp
from dspy_memory.store import NewMemory, Store
from dspy_memory.types import Episode, MemoryRecord, Scope
from dspy_memory.util.text import SINGLE_VALUED_PREDICATES, content_hash, normalize_name
from dspy_memory.util.timeutil import to_db
from dspy_memory.write.inputs import turn_text
from dspy_memory.write.validate import NEEDS_CONTENT, Plan, PlannedOp

ACTOR = "lm"
# What each applied operation made or changed, by its index in the program's answer:
# (memory id, version).
Made = dict[int, tuple[str, int]]


class ClaimLostError(DSPyMemoryError):
    """Another writer took over episodes of this batch (this writer's claim had expired)."""


def raw_turn(episode: Episode, embedding: Any) -> NewMemory:
    """The raw `turn` memory of an episode: its text, searchable without an LM."""
    text = turn_text(episode)
    return NewMemory(
        id=str(uuid.uuid4()),
        content=text,
        content_hash=content_hash(text),
        embedding=embedding,
        kind="turn",
        user_id=episode.user_id,
        agent_id=episode.agent_id,
        run_id=episode.run_id,
        metadata=episode.metadata,
        valid_at=to_db(episode.occurred_at),
        episode_ids=[episode.id],
        expires_at=to_db(episode.expires_at),
    )


@dataclass(frozen=True)
class Seen:
    """What the LM was shown: the candidates by alias, read when the newest memory row was
    `after_row_id`."""

    after_row_id: int
    candidates: Mapping[int, MemoryRecord]


@dataclass
class _Batch:
    scope: Scope
    vectors: dict[int, np.ndarray]  # id(PlannedOp) -> embedding of its content
    entities: dict[str, str] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)

    def entity(self, name: str | None) -> str | None:
        return self.entities.get(normalize_name(name)) if name else None


class PlanApplier:
    def __init__(self, store: Store, embedder: Embedder, *, confirm_strength: float) -> None:
        self.store = store
        self.embedder = embedder
        self.confirm_strength = confirm_strength

    def apply(
        self,
        plan: Plan,
        episodes: Sequence[Episode],
        scope: Scope,
        *,
        seen: Seen,
        held_by: str,
        forget_requests: Sequence[str] = (),
        audit_details: Mapping[str, Any] | None = None,
        log_run: Callable[[list[AppliedOp], Made], None] | None = None,
    ) -> tuple[list[AppliedOp], list[MemoryRecord]]:
        """Apply the plan and mark the episodes done, in one transaction. Returns what was
        applied and the current records of the memories it created or changed. Raises
        WriteConflictError (nothing applied) when what the LM read changed meanwhile, and
        ClaimLostError when `held_by` no longer holds every episode. The audit log gets one
        entry for the whole plan (counts per operation; `audit_details`: which program and LM
        calls decided it). `log_run(applied, made)` runs inside the transaction, after that
        entry: the run's log and feedback commit with what the run did, or not at all."""
        store = self.store
        deletes = any(p.action == "DELETE" for p in plan.ops)
        covered = {episode_id for p in plan.ops for episode_id in p.episode_ids}
        # A request to forget that was carried out is not kept as a turn: it quotes what it erased.
        skipped = covered | (set(forget_requests) if deletes else set())
        episode_ids = [episode.id for episode in episodes]
        turns = store.episodes.current_turns(episode_ids)
        need_turns = [e for e in episodes if e.content.strip() and e.id not in skipped and e.id not in turns]
        writes = [p for p in plan.ops if p.action in NEEDS_CONTENT]
        # Embedding happens before the transaction: the write lock is held for SQL only.
        texts = [p.content or "" for p in writes] + [turn_text(e) for e in need_turns]
        vectors: np.ndarray | list[np.ndarray] = self.embedder.embed(texts) if texts else []
        batch = _Batch(scope, {id(p): vector for p, vector in zip(writes, vectors)})
        group = store.audit_log.group("memory_ops", scope=scope, role=ACTOR, details=audit_details)
        with store.transaction():
            with group:
                if store.episodes.held(episode_ids, held_by) != set(episode_ids):
                    raise ClaimLostError("another writer took over these episodes")
                store.check_unchanged(
                    scope,
                    versions={p.target.id: p.target.version for p in plan.ops if p.target is not None},
                    after_row_id=seen.after_row_id,
                    seen=[record.id for record in seen.candidates.values()],
                    hashes=[p.content_hash for p in writes if p.content_hash],
                    slots=[
                        (normalize_name(p.op.subject), p.predicate)
                        for p in writes
                        if p.op.subject and p.predicate in SINGLE_VALUED_PREDICATES
                    ],
                )
                batch.entities = store.graph.upsert(
                    [name for p in writes for name in (p.op.subject, p.op.object) if name], scope
                )
                outcomes = [self._apply_one(p, batch) for p in plan.ops]
                turns = store.episodes.current_turns(episode_ids)  # as this transaction sees them
                for episode_id in covered & set(turns):
                    # Raw turns kept while an earlier attempt failed give way to what was extracted.
                    for turn_id in turns[episode_id]:
                        store.expire(
                            turn_id,
                            scope=None,
                            actor="system",
                            event="MERGE",
                            reason="replaced by memories extracted from its episode",
                        )
                items = [
                    raw_turn(episode, vector)
                    for episode, vector in zip(need_turns, vectors[len(writes) :])
                    if episode.id not in turns
                ]
                store.insert_memories(items, actor="system", reason="no memory was made from it")
                store.episodes.mark(episode_ids, "done")
                if deletes and forget_requests:
                    # The request quotes what it had erased: it goes too (the DELETE event remains).
                    store.erase.episodes(list(forget_requests), scope=scope, actor=ACTOR)
            applied = [op for op, _ in outcomes]
            if log_run is not None:
                log_run(applied, {p.index: made for p, (_, made) in zip(plan.ops, outcomes)})
        if deletes:
            store.erase.compact()
            forget_cached_content(self.embedder)
        records = [store.get_memory(memory_id, scope=scope) for memory_id in dict.fromkeys(batch.changed)]
        return applied, [record for record in records if record is not None]

    def _apply_one(self, p: PlannedOp, batch: _Batch) -> tuple[AppliedOp, tuple[str, int]]:
        """What was applied, and the (memory id, version) the operation made or changed."""
        reason = p.op.reason
        if p.action == "ADD":
            new_id = self._add(p, batch)
            return AppliedOp(action="ADD", memory_id=new_id, content=p.content, reason=reason), (new_id, 1)
        target = p.target
        assert target is not None, "validation guarantees a target for every other action"
        if p.action == "UPDATE":
            version = self._update(p, target, batch)
            updated = AppliedOp(action="UPDATE", memory_id=target.id, content=p.content, reason=reason)
            return updated, (target.id, version)
        if p.action == "INVALIDATE":
            new_id = self._invalidate(p, target, batch)
            invalidated = AppliedOp(
                action="INVALIDATE",
                memory_id=new_id,
                content=p.content,
                replaced_id=target.id,
                correction=p.op.correction,
                reason=reason,
            )
            return invalidated, (new_id, 1)
        if p.action == "DELETE":
            self.store.erase.memory(target.id, scope=batch.scope, actor=ACTOR)
            return AppliedOp(action="DELETE", memory_id=target.id, reason=reason), (target.id, target.version)
        self.store.confirm(
            target.id, scope=batch.scope, episode_ids=p.episode_ids, gain=self.confirm_strength
        )
        confirmed = AppliedOp(action="NOOP", memory_id=target.id, content=target.content, reason=reason)
        return confirmed, (target.id, target.version)

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
            valid_at=p.valid_at,
            invalid_at=p.invalid_at,
            subject_id=batch.entity(p.op.subject),
            predicate=p.predicate,
            object_id=batch.entity(p.op.object),
            episode_ids=p.episode_ids,
        )
        self.store.insert_memories([item], actor=ACTOR, reason=p.op.reason)
        batch.changed.append(new_id)
        return new_id

    def _update(self, p: PlannedOp, target: MemoryRecord, batch: _Batch) -> int:
        changes: dict[str, Any] = {"content": p.content, "content_hash": p.content_hash}
        # What the LM left out stays as it was (a refinement keeps when the fact became true,
        # how sure we are of it and how much it matters).
        given = p.op.model_fields_set
        changes.update(
            {key: getattr(p.op, key) for key in ("kind", "confidence", "importance") if key in given}
        )
        optional = {
            "subject_id": batch.entity(p.op.subject),
            "object_id": batch.entity(p.op.object),
            "predicate": p.predicate,
            "valid_at": p.valid_at,
        }
        changes.update({key: value for key, value in optional.items() if value})
        _, new = self.store.supersede(
            target.id,
            scope=batch.scope,
            changes=changes,
            embedding=batch.vectors[id(p)],
            event="UPDATE",
            actor=ACTOR,
            reason=p.op.reason,
            episode_id=p.episode_ids[0],
        )
        batch.changed.append(target.id)
        return new.version

    def _invalidate(self, p: PlannedOp, target: MemoryRecord, batch: _Batch) -> str:
        new_id = self._add(p, batch)
        episode_id = p.episode_ids[0]
        if p.op.correction:
            self.store.expire(
                target.id,
                scope=batch.scope,
                actor=ACTOR,
                reason=p.op.reason,
                episode_id=episode_id,
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
                episode_id=episode_id,
                add_source=False,
                event_content=p.content,
                event_metadata={"superseded_by": new_id},
            )
        return new_id
