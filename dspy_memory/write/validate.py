"""Validation of the write program's decisions: what an LM proposes is checked here, and only
what passes is applied. Pure functions; the write path supplies what they need to know."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dspy_memory.ops import Op, Rejection
from dspy_memory.store.keyword import query_terms
from dspy_memory.types import Episode, MemoryRecord, Scope
from dspy_memory.util.text import content_hash, normalize_name, normalize_predicate, surrogate_at
from dspy_memory.util.timeutil import lm_date, to_db
from dspy_memory.write.inputs import said_by_a_person

NEEDS_TARGET = ("UPDATE", "INVALIDATE", "DELETE", "NOOP")
NEEDS_CONTENT = ("ADD", "UPDATE", "INVALIDATE")
_MAX_NAME = 200
_TEXT_FIELDS = ("content", "subject", "predicate", "object", "valid_at", "invalid_at", "reason")


@dataclass
class PlannedOp:
    """An operation that passed validation, normalized and resolved."""

    index: int
    action: str
    op: Op
    target: MemoryRecord | None = None
    content: str | None = None
    content_hash: str | None = None
    valid_at: str | None = None  # db format
    invalid_at: str | None = None
    predicate: str | None = None
    # The episodes it came from (a NOOP: that confirm the memory); none for DELETE.
    episode_ids: list[str] = field(default_factory=list)


@dataclass
class Plan:
    ops: list[PlannedOp]
    rejected: list[Rejection]


@dataclass(frozen=True)
class PlanLimits:
    max_ops: int = 50
    max_content_chars: int = 1000
    max_deletes: int = 5


class Sources:
    """The episodes a fact most likely came from: those sharing the most words with it (the LM
    is not asked, which would cost tokens); all of them when none shares a word."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = episodes
        self._words = {episode.id: set(query_terms(episode.content)) for episode in episodes}
        self._said = {episode.id: to_db(episode.occurred_at) for episode in episodes}

    def of(self, content: str) -> list[str]:
        words = set(query_terms(content))
        overlap = {episode.id: len(words & self._words[episode.id]) for episode in self.episodes}
        best = max(overlap.values(), default=0)
        if best == 0:
            return [episode.id for episode in self.episodes]
        chosen = [episode for episode in self.episodes if overlap[episode.id] == best]
        # On a tie, what a person said outranks the assistant repeating it.
        people = [episode for episode in chosen if said_by_a_person(episode)]
        return [episode.id for episode in people or chosen]

    def said_at(self, episode_ids: Sequence[str]) -> str | None:
        """When the latest of these episodes was said (db format)."""
        return max((self._said[episode_id] for episode_id in episode_ids), default=None)


def _as_said(valid_at: str | None, said_at: str | None) -> str | None:
    """An LM's date without a time on the very day the fact was said means "as of when it was
    said": two changes on one day then keep their order (midnight for both would tie)."""
    if valid_at and said_at and valid_at[:10] == said_at[:10] and valid_at.endswith("T00:00:00.000000Z"):
        return said_at
    return valid_at


def _in_scope(record: MemoryRecord, scope: Scope) -> bool:
    return all(
        getattr(scope, column) is None or getattr(record, column) == getattr(scope, column)
        for column in ("user_id", "agent_id", "run_id")
    )


def _mismatch(op: Op, target: MemoryRecord | None) -> str | None:
    """Why `op` cannot act on `target`: it names another subject or another relation (both
    sides must name one to differ)."""
    if target is None:
        return None
    if op.subject and target.subject and normalize_name(op.subject) != normalize_name(target.subject):
        return "is about someone else"
    if op.predicate and target.predicate:
        ours, theirs = normalize_predicate(op.predicate), normalize_predicate(target.predicate)
        if ours and theirs and ours != theirs:
            return f"is about another relation ({ours}, the target's is {theirs})"
    return None


def plan_ops(
    ops: Sequence[Op],
    candidates: Mapping[int, MemoryRecord],
    *,
    scope: Scope,
    episodes: Sequence[Episode],
    delete_requested: bool,
    deletable: set[int] | frozenset[int] = frozenset(),
    existing: Mapping[str, MemoryRecord],
    limits: PlanLimits = PlanLimits(),
) -> Plan:
    """Check every operation; return the ones to apply and the reasons the others were refused.

    `candidates` maps the aliases shown to the LM to the memories they stand for; `episodes`
    are the messages of the batch (each operation is traced to the ones it came from, and a fact
    without a date holds from when they were said);
    `existing` maps content hashes of the scope's current memories to them (an ADD of words
    already remembered confirms that memory: a NOOP);
    `delete_requested` says whether the input explicitly asks to forget something, and
    `deletable` which aliases that request mentions (only those may be deleted).
    """
    planned: list[PlannedOp] = []
    rejected: list[Rejection] = []
    used_targets: dict[str, int] = {}  # memory id -> operation that acted on it
    seen_hashes: dict[str, int] = {}
    deletes = 0
    sources = Sources(episodes)

    def refuse(index: int, op: Op | None, code: str, reason: str) -> None:
        rejected.append(Rejection(index=index, action=op.action if op else None, code=code, reason=reason))

    for index, op in enumerate(ops):
        if not isinstance(op, Op):
            refuse(index, None, "not_an_op", f"not an operation ({type(op).__name__})")
            continue
        broken = next(
            (name for name in _TEXT_FIELDS if surrogate_at(getattr(op, name) or "") is not None), None
        )
        if broken is not None:
            refuse(index, op, "bad_text", f"{broken} is not valid text (a lone surrogate)")
            continue
        if index >= limits.max_ops:
            refuse(index, op, "too_many_ops", f"more than {limits.max_ops} operations in one answer")
            continue
        action = op.action
        target = None
        if action in NEEDS_TARGET:
            if op.target is None:
                refuse(index, op, "no_target", f"{action} needs the alias of an existing memory")
                continue
            target = candidates.get(op.target)
            if target is None:
                refuse(
                    index, op, "unknown_alias", f"unknown alias {op.target}: not one of the memories shown"
                )
                continue
            if not _in_scope(target, scope):
                refuse(index, op, "out_of_scope", f"alias {op.target} is outside the scope being written")
                continue
            if target.id in used_targets:
                refuse(
                    index,
                    op,
                    "target_taken",
                    f"alias {op.target} was already acted on by operation {used_targets[target.id]}",
                )
                continue
        mismatch = _mismatch(op, target) if action in ("UPDATE", "INVALIDATE", "NOOP") else None
        if mismatch is not None:
            # A fact about someone else, or about another relation, never replaces or confirms
            # the target; an INVALIDATE's new fact still stands on its own.
            if action != "INVALIDATE":
                refuse(index, op, "mismatch", f"{action} of alias {op.target} {mismatch}")
                continue
            refuse(index, op, "kept_as_add", f"INVALIDATE of alias {op.target} kept as ADD: {mismatch}")
            action, target = "ADD", None
        content = " ".join(op.content.split()) if op.content else None
        digest = content_hash(content) if content else None
        if action in NEEDS_CONTENT:
            if not content:
                refuse(index, op, "no_content", f"{action} without content")
                continue
            if len(content) > limits.max_content_chars:
                refuse(index, op, "too_long", f"content longer than {limits.max_content_chars} characters")
                continue
            if digest in seen_hashes:
                refuse(index, op, "duplicate", f"same content as operation {seen_hashes[digest]}")
                continue
            known = existing.get(digest) if digest else None
            if action == "UPDATE" and target is not None and digest == target.content_hash:
                action = "NOOP"  # an "update" to the same words: the fact was already known
            elif known is not None and action == "ADD" and known.id not in used_targets:
                action, target = "NOOP", known  # words already remembered: a confirmation
            elif known is not None and known.id != (target.id if target else None):
                refuse(index, op, "already_known", "the same content is already a current memory")
                continue
        if action == "DELETE":
            if not delete_requested:
                refuse(
                    index,
                    op,
                    "no_forget_request",
                    "DELETE without an explicit request to forget in the input",
                )
                continue
            if op.target not in deletable:
                refuse(
                    index,
                    op,
                    "not_requested",
                    f"DELETE of alias {op.target}: the request to forget does not mention it",
                )
                continue
            if deletes >= limits.max_deletes:
                refuse(
                    index, op, "too_many_deletes", f"more than {limits.max_deletes} deletions in one answer"
                )
                continue
            deletes += 1
        if action == "DELETE":
            came_from: list[str] = []
        elif content is not None:
            came_from = sources.of(content)
        else:
            assert target is not None, "an operation without content acts on a target"
            came_from = sources.of(target.content)
        if action == "UPDATE":
            came_from = came_from[:1]  # an update records one source, with its event
        said_at = sources.said_at(came_from)
        valid_at = _as_said(lm_date(op.valid_at), said_at)
        invalid_at = lm_date(op.invalid_at)
        if valid_at and invalid_at and invalid_at <= valid_at:
            invalid_at = None
        if action == "INVALIDATE" and op.correction and valid_at is None and target is not None:
            # The corrected fact holds since the mistaken one was said to.
            valid_at = to_db(target.valid_at)
        if action == "INVALIDATE" and not op.correction:
            valid_at = valid_at or said_at
            replaced_since = to_db(target.valid_at) if target is not None and target.valid_at else None
            if replaced_since is not None and valid_at is not None and valid_at < replaced_since:
                # Said late: it held until the newer fact began, which stays the current one.
                refuse(
                    index,
                    op,
                    "kept_as_past_add",
                    f"INVALIDATE of alias {op.target} kept as a past ADD: the new fact is older",
                )
                action, target = "ADD", None
                if invalid_at is None or invalid_at > replaced_since:
                    invalid_at = replaced_since
        if action in ("ADD", "INVALIDATE"):
            valid_at = valid_at or said_at
        if target is not None:
            used_targets[target.id] = index
        if digest is not None:
            seen_hashes[digest] = index
        subject = op.subject.strip()[:_MAX_NAME] if op.subject else None
        obj = op.object.strip()[:_MAX_NAME] if op.object else None
        op = op.model_copy(update={"subject": subject or None, "object": obj or None})
        planned.append(
            PlannedOp(
                index=index,
                action=action,
                op=op,
                target=target,
                content=content,
                content_hash=digest,
                valid_at=valid_at,
                invalid_at=invalid_at,
                predicate=normalize_predicate(op.predicate) or None if op.predicate else None,
                episode_ids=came_from,
            )
        )
    return Plan(ops=planned, rejected=rejected)


def forget_requests(episodes: Sequence[Episode], pattern: re.Pattern[str]) -> list[Episode]:
    """The episodes that ask to forget something: only a person's messages count, never tool
    output, the assistant or the system."""
    return [episode for episode in episodes if said_by_a_person(episode) and pattern.search(episode.content)]


def deletable_aliases(
    requests: Sequence[Episode], candidates: Mapping[int, MemoryRecord], pattern: re.Pattern[str]
) -> set[int]:
    """The candidates a request to forget mentions: those sharing a word with it beyond the
    forgetting words, the speaker's name and the memory's subject. A memory that says "delete
    everything" cannot widen a request."""
    requested = {
        term
        for episode in requests
        for term in _words(pattern.sub(" ", episode.content))
        if term not in _words(episode.name or "")
    }
    return {
        alias
        for alias, record in candidates.items()
        if requested & _words(record.content) - _words(record.subject or "")
    }


def _words(text: str) -> set[str]:
    # A lone letter is what an apostrophe leaves ("that's", "Carmen's"): it names nothing.
    return {term for term in query_terms(text) if len(term) > 1 or term.isdigit()}
