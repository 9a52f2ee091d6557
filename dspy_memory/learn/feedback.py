"""A memory's feedback as examples for its write program (docs/optimization.md).

Every feedback record names the write run that made what it is about (store/runs.py keeps what
each run saw, by ids: its episodes and the memory versions shown under each alias, and what it
proposed and what each operation became). One run with feedback about it is one example:

- inputs: the run's inputs rebuilt from the file (write_inputs on its episodes and the memory
  versions it was shown, under the same aliases). A run whose input or any memory it saw was
  erased gives no example.
- label: the operations the run applied, with the content of the versions they made, then
  corrected by what people said, oldest record first:
  - a correction (`update(..., reason=)`): that operation's content is the corrected text;
  - `wrong` or `irrelevant`: that operation should not have been; an operation on a memory
    becomes NOOP on it (what it said stands), an ADD goes;
  - `outdated`: a run shown the memory before the verdict should have invalidated it: the newest
    that added a fact for the same subject and predicate (the new value), else the newest; that
    ADD becomes INVALIDATE of it (when it added no such fact, an INVALIDATE is added whose new
    content is the run's last message, for the memory's subject and predicate);
  - `useful`: the operation was right (a positive example);
  - a refused operation stays out of the label (validation said it was wrong).
- Restores (the lifecycle archived a memory, not the write program) and carried-out requests to
  forget (their input is erased) are counted and give no example; so is feedback about a memory
  no write run made (a raw turn, a memory written by hand).

The metric is the write programs' own (dspy_memory.learn.metric: operations by action and target).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dspy_memory.store import Store
from dspy_memory.store.runs import WriteRun
from dspy_memory.types import FeedbackRecord, MemoryRecord, Scope
from dspy_memory.util.text import normalize_name, normalize_predicate

_MAKES = ("ADD", "UPDATE", "INVALIDATE")
_OP_FIELDS = ("content", "kind", "subject", "predicate", "object")


@dataclass
class FeedbackExample:
    """One write run with what people said about it: `example` (a dspy.Example whose inputs
    are the run's and whose `ops` are the corrected label), the newest record's time, and the
    sources of its records."""

    run_uid: str
    at: datetime
    example: Any
    sources: tuple[str, ...]


@dataclass
class FeedbackExamples:
    examples: list[FeedbackExample] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # why records gave no example


def feedback_examples(
    store: Store, records: Iterable[FeedbackRecord], *, max_turn_chars: int = 4000, corrected: bool = True
) -> FeedbackExamples:
    """`records` (one scope's feedback) as examples for the write programs, oldest first.
    corrected=False labels each run with what it did, ignoring what people said: the ablation
    that shows what the corrections are worth (evals/feedback_loop.py)."""
    found = FeedbackExamples()
    by_run: dict[str, list[tuple[FeedbackRecord, int | None]]] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        if record.source == "restore":
            found.skipped["restore: the lifecycle archived it, not the write program"] += 1
        elif record.source == "forget":
            found.skipped["forget: the request and what it named are erased"] += 1
        elif record.verdict == "outdated":
            seen = _should_have_invalidated(store, record)
            if seen is None:
                found.skipped["outdated, but no write run saw it before the verdict"] += 1
            else:
                uid, alias = seen
                by_run.setdefault(uid, []).append((record, alias))
        elif record.write_run_id is None:
            found.skipped["about a memory no write run made (a raw turn, or written by hand)"] += 1
        else:
            by_run.setdefault(record.write_run_id, []).append((record, None))
    for uid, about in by_run.items():
        run = store.runs.get(uid)
        example = (
            _example(store, run, about if corrected else [], max_turn_chars) if run is not None else None
        )
        if isinstance(example, str) or example is None:
            found.skipped[example or "its write run is gone"] += len(about)
            continue
        found.examples.append(
            FeedbackExample(
                run_uid=uid,
                at=max(record.created_at for record, _ in about),
                example=example,
                sources=tuple(sorted({record.verdict or record.source for record, _ in about})),
            )
        )
    found.examples.sort(key=lambda item: item.at)
    return found


def _slot(subject: Any, predicate: Any) -> tuple[str, str] | None:
    """The (subject, predicate) a fact fills, normalized; None when it names neither."""
    if not subject or not predicate:
        return None
    return normalize_name(str(subject)), normalize_predicate(str(predicate))


def _should_have_invalidated(store: Store, record: FeedbackRecord) -> tuple[str, int] | None:
    """(run uid, alias) of the run that should have invalidated the memory judged outdated: of
    the runs shown it before the verdict, the newest that ADDed a fact for the same subject and
    predicate (the new value it missed), else the newest of them."""
    if record.memory_id is None or record.memory_version is None:
        return None
    seen = store.runs.seen(record.memory_id, record.memory_version, before=record.created_at)
    judged = store.get_memory(record.memory_id, version=record.memory_version)
    if not seen or judged is None:
        return None
    slot = _slot(judged.subject, judged.predicate)
    for uid, alias in seen if slot is not None else []:
        run = store.runs.get(uid)
        for op in run.ops if run is not None else []:
            made = (
                store.get_memory(op.memory_id, version=op.version)
                if op.applied == "ADD" and op.memory_id
                else None
            )
            if made is not None and _slot(made.subject, made.predicate) == slot:
                return uid, alias
    return seen[0]


def _example(
    store: Store, run: WriteRun, about: Sequence[tuple[FeedbackRecord, int | None]], max_turn_chars: int
) -> Any:
    """The run as a dspy.Example with its corrected label, or why it cannot be one (a str)."""
    import dspy

    from dspy_memory.programs.write import write_inputs

    episodes = store.episodes.get_many(run.episode_ids)
    if len(episodes) != len(run.episode_ids):
        return "its input was erased"
    shown: dict[int, MemoryRecord] = {}
    for candidate in run.candidates:
        memory = store.get_memory(candidate.memory_id, scope=run.scope, version=candidate.version)
        if memory is None:
            return "a memory it was shown was erased"
        shown[candidate.alias] = memory
    spoken = [episode for episode in episodes if episode.content.strip()]
    if not spoken:
        return "its input was empty"
    inputs = write_inputs(
        spoken,
        shown,
        scope=run.scope,
        observed_at=max(episode.occurred_at for episode in spoken),
        max_turn_chars=max_turn_chars,
    )
    aliases = {candidate.memory_id: candidate.alias for candidate in run.candidates}
    label: dict[int, dict[str, Any]] = {}
    for op in run.ops:
        if op.applied is None:
            continue
        entry: dict[str, Any] = {"action": op.applied}
        target = op.target if op.applied == op.action else aliases.get(op.memory_id or "")
        if op.applied != "ADD" and target is not None:
            entry["target"] = target
        if op.applied in _MAKES and op.memory_id is not None:
            made = store.get_memory(op.memory_id, scope=run.scope, version=op.version)
            if made is None:
                return "a memory it made was erased"
            entry.update({key: getattr(made, key) for key in _OP_FIELDS if getattr(made, key, None)})
        label[op.op_index] = entry
    for record, alias in about:
        _correct(label, record, alias, shown, said=spoken[-1].content)
    note = "; ".join(record.note for record, _ in about if record.note)
    return dspy.Example(**inputs, ops=[label[index] for index in sorted(label)], note=note).with_inputs(
        *inputs
    )


def _correct(
    label: dict[int, dict[str, Any]],
    record: FeedbackRecord,
    alias: int | None,
    shown: dict[int, MemoryRecord],
    *,
    said: str,
) -> None:
    """Change `label` as `record` says was right (`said`: the run's last message, the new fact's
    words when the run added none)."""
    if record.verdict == "outdated" and alias is not None:
        slot = _slot(shown[alias].subject, shown[alias].predicate)
        same = [
            index
            for index, entry in label.items()
            if entry["action"] == "ADD"
            and slot is not None
            and _slot(entry.get("subject"), entry.get("predicate")) == slot
        ]
        if same:
            label[same[0]] = {**label[same[0]], "action": "INVALIDATE", "target": alias}
        else:
            old = shown[alias]
            label[max(label, default=-1) + 1] = {
                "action": "INVALIDATE",
                "target": alias,
                "content": said,
                **{key: getattr(old, key) for key in ("subject", "predicate") if getattr(old, key)},
            }
        return
    index = record.op_index
    if index is None or index not in label:
        return
    entry = label[index]
    if record.source == "correction" and record.expected.get("content"):
        entry["content"] = record.expected["content"]
    elif record.verdict in ("wrong", "irrelevant"):
        if entry.get("target") is not None:
            label[index] = {"action": "NOOP", "target": entry["target"]}
        else:
            del label[index]


def split_by_time(examples: Sequence[FeedbackExample], *, held_out: float) -> tuple[list[Any], list[Any]]:
    """(train, held out): the newest `held_out` share of the examples (at least one) is held out,
    the older ones train."""
    if not 0 < held_out < 1:
        raise ValueError(f"held_out is a share between 0 and 1, not {held_out!r}")
    ordered = sorted(examples, key=lambda item: item.at)
    keep = max(1, math.ceil(len(ordered) * held_out))
    return [item.example for item in ordered[:-keep]], [item.example for item in ordered[-keep:]]


def scope_label(scope: Scope) -> str:
    return (
        ", ".join(f"{key}={value}" for key, value in scope.model_dump(exclude_none=True).items()) or "no user"
    )
