"""Compile the write program on a memory's own feedback, and install it only if it does not
regress (`dspy-memory optimize write --from-feedback`, `Memory.learn_from_feedback`).

1. The scope's feedback becomes examples (learn/feedback.py): one per write run people said
   something about, labelled with what they said was right.
2. Split by time: the newest `held_out` share is held out, the older examples train (MIPROv2 and
   GEPA select on the newest fifth of those).
3. The program is compiled once per seed (the seed shuffles the train order and seeds the
   optimizer) and every compile is scored on the held-out examples next to the program in use,
   with the mean [min, max] and a paired 95% interval (learn/seeded.py).
4. The gate: the first seed's program is installed (saved where `Memory(programs=...)` loads it)
   only when its held-out score is not below the program in use; `force` installs it anyway.
5. A receipt goes to the audit log: the numbers, whether it was installed and why; no content.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dspy_memory.errors import InsufficientFeedbackError, InvalidInputError, ScopeError
from dspy_memory.learn.feedback import feedback_examples, split_by_time
from dspy_memory.learn.metric import ops_feedback, ops_metric
from dspy_memory.learn.optimizers import OPTIMIZERS
from dspy_memory.learn.seeded import compile_seeds
from dspy_memory.reports import FeedbackOptimization
from dspy_memory.store import Store
from dspy_memory.types import FeedbackRecord, ProgramMode, Scope
from dspy_memory.util.text import check_flag

# The write programs feedback can compile: (write mode, the file Memory(programs=...) loads).
WRITE_PROGRAMS: dict[str, tuple[ProgramMode, str]] = {
    "write": ("fused", "write.json"),
    "write_compact": ("compact", "write_compact.json"),
}
MIN_EXAMPLES = 2


def _program(name: str) -> Any:
    from dspy_memory.programs import CompactWriter, FusedWriter

    return FusedWriter() if name == "write" else CompactWriter()


def _fit(example: Any, fields: Sequence[str]) -> Any:
    """`example` with only the inputs the program takes (the compact program has no context)."""
    import dspy

    return dspy.Example(
        **{key: example[key] for key in [*fields, "ops", "note"] if key in example}
    ).with_inputs(*fields)


def optimize_from_feedback(
    store: Store,
    records: Sequence[FeedbackRecord],
    *,
    scope: Scope | None,
    program: str = "write",
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    optimizer: str = "bootstrap",
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    held_out: float = 0.25,
    out: str | os.PathLike[str] = "programs",
    in_use: Any = None,
    force: bool = False,
    share_across_users: bool = False,
    max_turn_chars: int = 4000,
    corrected: bool = True,
) -> FeedbackOptimization:
    """Compile `program` on `records` (a scope's feedback), gate it, install it into `out`
    (corrected=False: labels ignore what people said, the ablation; learn/feedback.py)."""
    _check_options(program, optimizer, seeds, held_out, force, share_across_users)
    users = set(store.user_ids(limit=2)) | {record.user_id for record in records}
    if len(users) > 1 and not share_across_users:
        raise ScopeError(
            "this file holds more than one user's input, and a program compiled from feedback quotes "
            "the conversations it learned from (as demonstrations) in every write of every user. "
            "Pass share_across_users=True (--share-across-users) to accept that, or keep a memory "
            "file per user"
        )
    found = feedback_examples(store, records, max_turn_chars=max_turn_chars, corrected=corrected)
    if len(found.examples) < MIN_EXAMPLES:
        skipped = "; ".join(f"{count} {why}" for why, count in found.skipped.most_common()) or "none"
        raise InsufficientFeedbackError(
            f"{len(found.examples)} example(s) from {len(records)} feedback record(s); at least "
            f"{MIN_EXAMPLES} are needed (one to train on, one to check). Records without an example: "
            f"{skipped}. Verdicts (memory.feedback) and corrections (memory.update(..., reason=)) on "
            "memories the write program made are what it learns from."
        )
    fields = list(_program(program).named_predictors()[0][1].signature.input_fields)
    train, held = split_by_time(found.examples, held_out=held_out)
    train, held = [_fit(example, fields) for example in train], [_fit(example, fields) for example in held]
    dev: list[Any] = []
    if optimizer in ("mipro", "gepa"):
        if len(train) < 2:
            raise InsufficientFeedbackError(
                f"{optimizer} selects on examples apart from those it trains on: {len(train)} older "
                "example(s) are too few; use --optimizer bootstrap or gather more feedback"
            )
        cut = max(1, len(train) // 5)
        train, dev = train[:-cut], train[-cut:]
    current = in_use if in_use is not None else _program(program)
    measured = compile_seeds(
        lambda: _program(program),
        optimizer,
        train,
        dev,
        held,
        metric=ops_metric,
        feedback=ops_feedback,
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        seeds=list(seeds),
        baseline=current,
    )
    summary = measured.summary
    first = list(seeds)[0]
    passes = summary["runs"][0] >= summary["baseline"]  # runs are in seed order: the first is installed
    installed = passes or force
    path = Path(out) / WRITE_PROGRAMS[program][1]
    if installed:
        path.parent.mkdir(parents=True, exist_ok=True)
        measured.programs[first].save(str(path))
    report = FeedbackOptimization(
        program=program,
        mode=WRITE_PROGRAMS[program][0],
        optimizer=optimizer,
        seeds=list(seeds),
        examples={"train": len(train), "dev": len(dev), "held_out": len(held)},
        records=len(records),
        skipped=dict(found.skipped),
        summary=summary,
        installed=installed,
        forced=force and not passes,
        path=str(path) if installed else None,
        reason=(
            "not below the program in use on the held-out feedback"
            if passes
            else "below the program in use on the held-out feedback"
            + ("; installed anyway (force)" if force else ": not installed")
        ),
    )
    if installed:
        path.with_name(path.stem + ".optimize.json").write_text(
            json.dumps(report.model_dump(), indent=2, default=str) + "\n", encoding="utf-8"
        )
    store.audit_log.record(
        "optimize",
        scope=scope,
        role="user",
        counts={"feedback": len(records), "examples": len(train) + len(dev) + len(held)},
        details={
            "program": program,
            "optimizer": optimizer,
            "seeds": list(seeds),
            "in_use": round(report.in_use_score, 3),
            "compiled": round(report.compiled_score, 3),
            "interval": [round(value, 3) for value in summary["interval"]],
            "installed": installed,
            "forced": report.forced,
            "file": path.name,
        },
    )
    return report


def _check_options(
    program: Any, optimizer: Any, seeds: Any, held_out: Any, force: Any, share_across_users: Any
) -> None:
    if program not in WRITE_PROGRAMS:
        raise InvalidInputError(
            f"unknown write program {program!r}; choose one of {', '.join(WRITE_PROGRAMS)}"
        )
    if optimizer not in OPTIMIZERS:
        raise InvalidInputError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    if not seeds or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds):
        raise InvalidInputError("seeds must be one or more whole numbers")
    if isinstance(held_out, bool) or not isinstance(held_out, (int, float)) or not 0 < held_out < 1:
        raise InvalidInputError(
            f"held_out is the share of the newest feedback held out, between 0 and 1, not {held_out!r}"
        )
    check_flag(force, "force")
    check_flag(share_across_users, "share_across_users")
