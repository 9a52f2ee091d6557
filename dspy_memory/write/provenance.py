"""What one run of the write program saw and did, as the run log keeps it (store/runs.py: ids,
never content), and the feedback its operations carry (docs/feedback.md): an operation
validation refused, or applied as another action, is a labelled example of a mistake ("refused");
a DELETE carried out on a request to forget is one of a right decision ("forget", with no
content at all: the memory and the request are erased). A run that erased something keeps no
refusal reasons (a reason may name what the LM read in the request) and names no erased memory."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.ops import Op, Rejection
from dspy_memory.store import Store
from dspy_memory.store.audit_log import scope_of
from dspy_memory.store.feedback import NewFeedback
from dspy_memory.store.runs import WITHHELD, RunCandidate, RunOp
from dspy_memory.types import LMUsage, MemoryRecord, ProgramMode, Scope
from dspy_memory.util.lm import lm_name
from dspy_memory.write.apply import Made
from dspy_memory.write.validate import Plan


@dataclass
class RunDraft:
    """A run of the write program over one batch, filled in as it goes: the candidates and the
    answer of its last attempt (a conflict plans again), and the plan validation made of it."""

    scope: Scope
    mode: ProgramMode
    episode_ids: list[str]
    lm: Any
    started_at: str
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    usage: LMUsage = field(default_factory=LMUsage)
    candidates: Mapping[int, MemoryRecord] = field(default_factory=dict)
    proposed: Sequence[Any] = ()
    plan: Plan | None = None

    @property
    def rejected(self) -> list[Rejection]:
        return self.plan.rejected if self.plan is not None else []

    @property
    def planned(self) -> dict[int, str]:
        """The action validation planned for each operation, by its index in the answer."""
        return {p.index: p.action for p in self.plan.ops} if self.plan is not None else {}

    def ops(self, made: Made) -> list[RunOp]:
        """Every operation proposed, in order: as proposed, what it became, or why not."""
        planned = self.planned
        refusals = self._refusals()
        found = []
        for index, op in enumerate(self.proposed):
            memory_id, version = made.get(index, (None, None))
            codes = refusals.get(index, [])
            found.append(
                RunOp(
                    op_index=index,
                    action=op.action if isinstance(op, Op) else None,
                    target=op.target if isinstance(op, Op) else None,
                    applied=planned.get(index) if index in made else None,
                    memory_id=memory_id,
                    version=version,
                    refused=codes[-1].code if codes else None,
                )
            )
        return found

    def deleted(self, made: Made) -> set[str]:
        """The memories this run erased."""
        planned = self.planned
        return {made[index][0] for index, action in planned.items() if action == "DELETE" and index in made}

    def feedback(self, made: Made) -> list[NewFeedback]:
        """The feedback this run's operations carry (see the module docstring)."""
        planned = self.planned
        deleted = self.deleted(made)
        drafts = []
        for index, rejections in self._refusals().items():
            op = self.proposed[index] if index < len(self.proposed) else None
            target = self.candidates.get(op.target) if isinstance(op, Op) and op.target is not None else None
            if target is not None and target.id in deleted:
                target = None
            expected: dict[str, Any] = {"applied": False}
            if index in made:
                expected["applied_as"] = planned[index]
            drafts.append(
                NewFeedback(
                    scope=scope_of(target) if target is not None else self.scope,
                    source="refused",
                    expected=expected,
                    actor="validator",
                    memory_id=target.id if target is not None else None,
                    memory_version=target.version if target is not None else None,
                    write_run_id=self.uid,
                    op_index=index,
                    note=None if deleted else "; ".join(rejection.reason for rejection in rejections),
                )
            )
        for index, action in planned.items():
            if action == "DELETE" and index in made:
                drafts.append(
                    NewFeedback(
                        scope=self.scope,
                        source="forget",
                        expected={"action": "DELETE"},
                        actor="user",
                        write_run_id=self.uid,
                        op_index=index,
                    )
                )
        return drafts

    def _refusals(self) -> dict[int, list[Rejection]]:
        found: dict[int, list[Rejection]] = {}
        for rejection in self.rejected:
            found.setdefault(rejection.index, []).append(rejection)
        return found


def log_run(
    store: Store, run: RunDraft, *, applied: int, error: str | None, made: Made | None = None
) -> None:
    """Log the run with what it saw and proposed, and the feedback its operations carry, in one
    transaction (the applying one, when called from `PlanApplier.apply`'s `log_run`)."""
    made = made or {}
    rejected = run.rejected
    if run.deleted(made):
        rejected = [rejection.model_copy(update={"reason": WITHHELD}) for rejection in rejected]
    with store.transaction():
        store.runs.log(
            run.scope,
            mode=run.mode,
            episode_ids=run.episode_ids,
            lm=lm_name(run.lm),
            usage=run.usage,
            ops_applied=applied,
            rejected=rejected,
            error=error,
            started_at=run.started_at,
            uid=run.uid,
            candidates=[
                RunCandidate(alias, record.id, record.version) for alias, record in run.candidates.items()
            ],
            ops=run.ops(made),
        )
        drafts = run.feedback(made)
        if drafts:
            store.feedback.add(drafts)
