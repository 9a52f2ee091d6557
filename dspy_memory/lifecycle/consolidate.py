"""Consolidation: clusters of related memories, the LM's decisions about them (MERGE, SUMMARIZE,
KEEP from `ConsolidateMemories`) checked like write ops, and applied in one transaction each.

Nothing is lost: merged memories are expired (superseded by the merge, kept for `history()`
and `known_at`), summarized ones archived (reachable with include_archived). A decision is
refused, and its memories left as they were, when it names memories outside the cluster or one
twice, merges fewer than two, has no text, or drops a name or number its memories hold.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from dspy_memory.errors import InvalidInputError, WriteConflictError
from dspy_memory.ops import ClusterMemory, ConsolidationOp, Rejection
from dspy_memory.store import Store
from dspy_memory.store.writes import NewMemory
from dspy_memory.types import MemoryRecord
from dspy_memory.util.text import content_hash, valid_text
from dspy_memory.util.timeutil import format_db

# Words a merged sentence must keep: numbers (with their decimals) and capitalized names that
# do not start a sentence.
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]+")


@dataclass
class PlannedConsolidation:
    action: str  # MERGE or SUMMARIZE
    sources: list[MemoryRecord]
    content: str
    reason: str | None


def cluster_view(cluster: Sequence[MemoryRecord]) -> list[ClusterMemory]:
    """What the program sees of a cluster: aliases 1..n, never raw ids."""
    return [
        ClusterMemory(
            alias=alias,
            content=record.content,
            kind=record.kind,
            valid_at=f"{record.valid_at:%Y-%m-%d}" if record.valid_at else None,
            recalls=record.access_count,
        )
        for alias, record in enumerate(cluster, start=1)
    ]


def must_keep(texts: Sequence[str]) -> set[str]:
    """The numbers and names in `texts` (case-folded) that a merge of them has to keep."""
    found: set[str] = set()
    for text in texts:
        found |= {match.casefold() for match in _NUMBER.findall(text)}
        found |= {match.casefold() for match in _NAME.findall(text)}
    return found


def plan_consolidation(
    decisions: Any, cluster: Sequence[MemoryRecord], *, max_content_chars: int
) -> tuple[list[PlannedConsolidation], list[Rejection]]:
    """Check the program's decisions against the cluster it was shown (aliases 1..n)."""
    planned: list[PlannedConsolidation] = []
    rejected: list[Rejection] = []
    if not isinstance(decisions, list):
        return [], [Rejection(index=0, reason="the answer is not a list of decisions")]
    covered: set[int] = set()
    for index, raw in enumerate(decisions):
        try:
            op = raw if isinstance(raw, ConsolidationOp) else ConsolidationOp.model_validate(raw)
        except ValidationError:
            rejected.append(Rejection(index=index, reason="not a decision (action MERGE, SUMMARIZE or KEEP)"))
            continue

        def refuse(reason: str, op: ConsolidationOp = op, index: int = index) -> None:
            rejected.append(Rejection(index=index, action=op.action, reason=reason))

        aliases = list(dict.fromkeys(op.aliases))
        if any(not isinstance(alias, int) or not 1 <= alias <= len(cluster) for alias in aliases):
            refuse(f"names a memory that is not in the cluster (aliases are 1 to {len(cluster)})")
            continue
        if covered & set(aliases):
            refuse("names a memory an earlier decision already covers")
            continue
        if op.action == "KEEP":
            covered |= set(aliases)
            continue
        if len(aliases) < 2:
            refuse(f"{op.action} needs at least two memories")
            continue
        content = (op.content or "").strip()
        if not content:
            refuse(f"{op.action} without the new memory's text")
            continue
        if len(content) > max_content_chars:
            refuse(f"the new text is longer than {max_content_chars} characters")
            continue
        try:
            valid_text(content, "content")
        except InvalidInputError:
            refuse("the new text is not valid Unicode text")
            continue
        sources = [cluster[alias - 1] for alias in aliases]
        if op.action == "MERGE":
            lost = must_keep([record.content for record in sources]) - must_keep([content]) - _words(content)
            if lost:
                refuse(f"the merged text drops {len(lost)} name(s) or number(s) its memories hold")
                continue
        covered |= set(aliases)
        planned.append(PlannedConsolidation(op.action, sources, content, op.reason))
    return planned, rejected


def _words(text: str) -> set[str]:
    return {word.casefold() for word in re.findall(r"[\w'-]+", text)}


def consolidated_memory(plan: PlannedConsolidation, embedding: np.ndarray) -> NewMemory:
    """The new memory a decision makes: what its sources share (scope; kind, subject,
    predicate, object when all agree), the earliest validity, the highest importance and
    strength, their recalls together."""
    sources = plan.sources
    first = sources[0]

    def shared(name: str, default: Any = None) -> Any:
        values = {getattr(record, name) for record in sources}
        return values.pop() if len(values) == 1 else default

    valid = [record.valid_at for record in sources if record.valid_at is not None]
    recalled = [record.last_accessed_at for record in sources if record.last_accessed_at is not None]
    merged = plan.action == "MERGE"
    return NewMemory(
        id=str(uuid.uuid4()),
        content=plan.content,
        content_hash=content_hash(plan.content),
        embedding=embedding,
        kind=shared("kind", "fact") if merged else "note",
        user_id=first.user_id,
        agent_id=first.agent_id,
        run_id=first.run_id,
        confidence=min(record.confidence for record in sources),
        importance=max(record.importance for record in sources),
        strength=max(record.strength for record in sources),
        access_count=sum(record.access_count for record in sources) if merged else 0,
        last_accessed_at=format_db(max(recalled)) if recalled and merged else None,
        valid_at=format_db(min(valid)) if valid else None,
        metadata={"consolidated": plan.action.lower()},
    )


def apply_consolidation(
    store: Store,
    embedder: Any,
    planned: Sequence[PlannedConsolidation],
    *,
    actor: str,
    metadata: dict[str, Any],
) -> tuple[list[MemoryRecord], list[Rejection]]:
    """Apply each decision in its own transaction (compare-and-set on the versions shown to the
    LM); one that meets a changed memory is refused, the others stand."""
    created: list[MemoryRecord] = []
    refused: list[Rejection] = []
    if not planned:
        return created, refused
    embeddings = embedder.embed([plan.content for plan in planned])
    for index, (plan, embedding) in enumerate(zip(planned, embeddings)):
        new = consolidated_memory(plan, np.asarray(embedding, dtype=np.float32))
        relation = "merged_from" if plan.action == "MERGE" else "summarizes"
        try:
            record = store.consolidate(
                plan.sources, new, relation=relation, actor=actor, reason=plan.reason, metadata=metadata
            )
        except WriteConflictError:
            refused.append(Rejection(index=index, action=plan.action, reason="a memory changed meanwhile"))
            continue
        created.append(record)
    return created, refused
