"""The LM path of writing: the write program reads a batch of episodes next to the existing
memories most related to them, `validate.py` checks the operations it proposes, and `apply.py`
applies them in ONE transaction. A batch whose memories changed while the LM read them is planned
again; when the program fails, the episodes are kept searchable as raw turns, marked failed."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dspy_memory.config import WriteConfig
from dspy_memory.errors import WriteConflictError, WriteProgramError
from dspy_memory.governance.redact import LM_TEXT_FIELDS, NO_REDACTION, Redactor
from dspy_memory.ops import FACT_KINDS
from dspy_memory.read.retrieval import Retriever
from dspy_memory.store import Store, TimeView
from dspy_memory.types import AddResult, Episode, LMUsage, MemoryRecord, ProgramMode, Scope
from dspy_memory.util.lm import (
    history_mark,
    lm_call_ids,
    lm_name,
    program_hash,
    prompt_tokens,
    run_program,
    short_error,
)
from dspy_memory.util.text import content_hash
from dspy_memory.util.timeutil import now_db
from dspy_memory.util.tokens import count_tokens
from dspy_memory.write.apply import ClaimLostError, PlanApplier, Seen
from dspy_memory.write.claims import Claimant
from dspy_memory.write.inputs import turn_text
from dspy_memory.write.provenance import RunDraft, log_run
from dspy_memory.write.turns import TurnWriter
from dspy_memory.write.validate import Plan, PlanLimits, deletable_aliases, forget_requests, plan_ops

logger = logging.getLogger("dspy_memory")


class LMWriter:
    def __init__(
        self,
        store: Store,
        retriever: Retriever,
        config: WriteConfig,
        *,
        program: Any,
        applier: PlanApplier,
        claims: Claimant,
        turns: TurnWriter,
        redact: Redactor = NO_REDACTION,
    ) -> None:
        self.store = store
        self.redact = redact
        self.retriever = retriever
        self.config = config
        self._programs = program  # a module for every LM, or WritePrograms; see `programs`
        self._applier = applier
        self._forget = re.compile(config.forget_pattern, re.IGNORECASE)
        self.claims = claims
        self._turns = turns

    @property
    def programs(self) -> Any:
        """The write program of each mode (WritePrograms; built on first use: importing DSPy costs ~1 s)."""
        from dspy_memory.util.compiled import WritePrograms

        if not isinstance(self._programs, WritePrograms):
            self._programs = WritePrograms.of(self.config.mode, self._programs)
        return self._programs

    def mode_for(self, lm: Any) -> ProgramMode:
        """The write program `lm` runs: write.mode, or for "auto" compact on a local Ollama model."""
        return self.programs.mode_for(lm_name(lm))

    def infer(self, episodes: Sequence[Episode], *, lm: Any) -> AddResult:
        """Run the write program over episodes of ONE scope, in batches of `max_batch` in time
        order, and apply what it decides.

        LM and parse failures do not raise: the batch's episodes are marked failed with the
        error and kept searchable as raw `turn` memories (see AddResult.error)."""
        results = [self._infer_batch(batch, lm) for batch in self.batches(episodes)]
        return results[0] if len(results) == 1 else AddResult.merged(results, self.mode_for(lm))

    def batches(self, episodes: Sequence[Episode]) -> list[list[Episode]]:
        """The batches `infer` runs, one LM call each: `max_batch` episodes, in time order."""
        ordered = sorted(episodes, key=lambda e: (e.occurred_at, e.ingested_at))
        size = self.config.max_batch
        return [ordered[start : start + size] for start in range(0, len(ordered), size)]

    def _infer_batch(self, episodes: Sequence[Episode], lm: Any) -> AddResult:
        from dspy_memory.programs.write import write_inputs

        mode = self.mode_for(lm)
        program = self.programs.program_for(mode)
        ids = [episode.id for episode in episodes]
        run = RunDraft(episodes[0].scope, mode, ids, lm, started_at=now_db())
        scope = run.scope
        spoken = [e for e in episodes if e.content.strip()]
        if not spoken:
            self.store.episodes.mark(ids, "done")
            return AddResult(episodes=self.store.episodes.get_many(ids), mode=mode)
        observed = max(episode.occurred_at for episode in spoken)
        conflict: WriteConflictError | None = None
        unseen: list[str] = []  # facts a conflict showed the LM had to see: shown next time
        for _ in range(self.config.max_conflict_retries + 1):
            after_row_id = self.store.last_row_id()  # before the candidates: nothing newer is seen
            try:
                run.candidates = candidates = self._candidates(spoken, scope, include=unseen)
            except Exception as exc:  # the embedder is down: nothing to do until it is back
                self.store.episodes.mark(ids, "failed", error=short_error(exc))
                raise
            inputs = write_inputs(
                spoken,
                candidates,
                scope=scope,
                observed_at=observed,
                max_turn_chars=self.config.max_turn_chars,
            )
            if len(episodes) > 1 and conflict is None and self._over_budget(program, inputs, lm):
                half = len(episodes) // 2
                return AddResult.merged(
                    [self._infer_batch(episodes[:half], lm), self._infer_batch(episodes[half:], lm)], mode
                )
            self.claims.renew(ids)
            mark = history_mark(program)
            try:
                prediction, spent = run_program(
                    program,
                    lm,
                    inputs,
                    max_attempts=self.config.max_attempts,
                    timeout_s=self.config.lm_timeout_s,
                )
            except WriteProgramError as exc:
                run.usage = run.usage + (exc.usage if isinstance(exc.usage, LMUsage) else LMUsage())
                return self._fail(episodes, run, str(exc))
            run.usage = run.usage + spent
            run.proposed, plan, requests = self._plan(list(prediction.ops or []), candidates, spoken, scope)
            run.plan = plan
            try:
                applied, memories = self._applier.apply(
                    plan,
                    episodes,
                    scope,
                    seen=Seen(after_row_id, candidates),
                    held_by=self.claims.token,
                    forget_requests=requests,
                    audit_details={
                        "mode": mode,
                        "program": program_hash(program),
                        "lm": lm_name(lm),
                        "lm_calls": lm_call_ids(program, mark),
                    },
                    log_run=lambda ops, made: log_run(
                        self.store, run, applied=len(ops), error=None, made=made
                    ),
                )
            except WriteConflictError as exc:
                conflict = exc
                unseen = list(dict.fromkeys([*unseen, *exc.unseen]))
                logger.info("write program: %s; planning again with fresh memories", exc)
                continue
            except ClaimLostError as exc:
                log_run(self.store, run, applied=0, error=str(exc))
                return AddResult(
                    episodes=self.store.episodes.get_many(ids), mode=mode, usage=run.usage, error=str(exc)
                )
            except Exception as exc:
                self.store.episodes.mark(ids, "failed", error=short_error(exc))
                log_run(self.store, run, applied=0, error=short_error(exc))
                raise
            if plan.rejected:
                logger.info("write program: %d operation(s) refused: %s", len(plan.rejected), plan.rejected)
            return AddResult(
                episodes=self.store.episodes.get_many(ids),
                memories=memories,
                mode=mode,
                ops=applied,
                rejected=plan.rejected,
                usage=run.usage,
            )
        error = f"the memories the LM read did not hold still ({self.config.max_conflict_retries + 1} tries): {conflict}"
        return self._fail(episodes, run, error)

    def _over_budget(self, program: Any, inputs: dict[str, Any], lm: Any) -> bool:
        """Whether the first LM call to `lm` for `inputs` would exceed `max_prompt_tokens` (memories
        shown only to a later call, as in two-step's reconcile, are counted too)."""
        tokens = prompt_tokens(program, inputs, lm)
        if "existing_memories" not in program.named_predictors()[0][1].signature.input_fields:
            tokens += count_tokens(
                json.dumps([memory.model_dump() for memory in inputs["existing_memories"]])
            )
        return tokens > self.config.max_prompt_tokens

    def _candidates(
        self, spoken: Sequence[Episode], scope: Scope, *, include: Sequence[str] = ()
    ) -> dict[int, MemoryRecord]:
        """Existing memories most related to the new messages, by alias 1, 2, ...; the current
        memories `include` names first, whatever the search finds."""
        config = self.config
        found: dict[str, MemoryRecord] = {}
        for memory_id in include:
            record = self.store.get_memory(memory_id, scope=scope)
            # An archived memory is still true: restating it restores it (Store.confirm).
            if record is not None and record.status in ("current", "archived"):
                found[record.id] = record
        if config.candidates_per_message == 0 or config.max_candidates == 0:
            return dict(enumerate(found.values(), start=1))
        view = TimeView.at()
        for episode in spoken[-config.max_candidate_queries :]:
            hits = self.retriever.search(
                turn_text(episode)[: config.max_turn_chars],
                scope,
                k=config.candidates_per_message,
                view=view,
                kinds=FACT_KINDS,
                count_access=False,
                include_archived=True,
            )
            for hit in hits:
                found.setdefault(hit.memory.id, hit.memory)
        chosen = list(found.values())[: max(config.max_candidates, len(include))]
        return {alias: record for alias, record in enumerate(chosen, start=1)}

    def _plan(
        self,
        ops: Sequence[Any],
        candidates: Mapping[int, MemoryRecord],
        spoken: Sequence[Episode],
        scope: Scope,
    ) -> tuple[list[Any], Plan, list[str]]:
        """The operations as proposed (redacted), the validated plan, and the episodes that ask
        to forget something."""
        # What the LM wrote is redacted too: it may rebuild a secret it saw elsewhere.
        ops = [self.redact.fields(op, LM_TEXT_FIELDS) for op in ops]
        hashes = [content_hash(op.content) for op in ops if getattr(op, "content", None)]
        requests = forget_requests(spoken, self._forget)
        deletable = deletable_aliases(requests, candidates, self._forget)
        config = self.config
        plan = plan_ops(
            ops,
            candidates,
            scope=scope,
            episodes=spoken,
            delete_requested=bool(requests),
            deletable=deletable,
            existing=self.store.current_by_hash(hashes, scope) if hashes else {},
            limits=PlanLimits(
                max_ops=config.max_ops,
                max_content_chars=config.max_content_chars,
                max_deletes=config.max_deletes,
            ),
        )
        return ops, plan, [episode.id for episode in requests]

    def _fail(self, episodes: Sequence[Episode], run: RunDraft, error: str) -> AddResult:
        """The program failed: keep the episodes searchable as raw turns, marked failed."""
        logger.warning("write program failed; episodes kept as raw turns for reprocess(): %s", error)
        ids = [episode.id for episode in episodes]
        memories: list[MemoryRecord] = []
        try:
            memories = self._turns.store(episodes, actor="system", error=error)
        except Exception as exc:  # the episodes are on disk and marked failed by process_raw
            error = f"{error}; raw turns not stored either: {short_error(exc)}"
        run.proposed, run.plan = [], None  # nothing of a failed answer is kept
        log_run(self.store, run, applied=0, error=error)
        return AddResult(
            episodes=self.store.episodes.get_many(ids),
            memories=memories,
            mode=run.mode,
            usage=run.usage,
            error=error,
        )
