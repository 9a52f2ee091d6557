"""Write path: input -> episodes (persisted first) -> memories.

Raw mode stores every message as a searchable `turn` memory. With an LM, the write program
reads the episodes next to the existing memories most related to them, proposes operations,
`plan.py` validates them, and they are applied in ONE transaction with their events. Episodes
are written in their own transaction before anything that can fail (embedding, the LM), so
nothing a user gave us is lost; unfinished episodes are replayed by `unfinished`/`infer`.

Batches sent to the LM hold at most `write.max_batch` episodes and fit `write.max_prompt_tokens`.
Episodes are claimed by the writer that processes them (claims.py), and a batch whose memories
changed while the LM read them is planned again (apply.py), so concurrent writers and replays
never process an episode twice or leave two current values of one fact.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dspy_memory.config import WriteConfig
from dspy_memory.embed import Embedder
from dspy_memory.errors import WriteConflictError, WriteProgramError
from dspy_memory.read.retrieval import Retriever
from dspy_memory.store import NewMemory, Store, TimeView
from dspy_memory.types import AddResult, Episode, LMUsage, MemoryRecord, Rejection, Scope
from dspy_memory.util.lm import lm_name, prompt_tokens, run_program, short_error
from dspy_memory.util.text import content_hash
from dspy_memory.util.timeutil import TimeLike, now_db, to_db, utcnow
from dspy_memory.util.tokens import count_tokens
from dspy_memory.write.apply import ClaimLostError, PlanApplier, Seen, raw_turn
from dspy_memory.write.claims import Claimant
from dspy_memory.write.inputs import MessagesInput, episodes_from_input, turn_text
from dspy_memory.write.validate import Plan, PlanLimits, deletable_aliases, forget_requests, plan_ops

logger = logging.getLogger("dspy_memory")

FACT_KINDS = ("fact", "preference", "event", "procedure", "profile", "note")
NO_LM = "no LM configured; reprocess() with one"


def scope_of(episode: Episode) -> Scope:
    return Scope.of(episode.user_id, episode.agent_id, episode.run_id)


def merge_results(results: Sequence[AddResult], mode: str) -> AddResult:
    """One result for several batches of one input."""
    usage = LMUsage()
    for result in results:
        usage = usage + result.usage
    errors = [result.error for result in results if result.error]
    return AddResult(
        episodes=[episode for result in results for episode in result.episodes],
        memories=[memory for result in results for memory in result.memories],
        mode=mode,  # type: ignore[arg-type]
        ops=[op for result in results for op in result.ops],
        rejected=[rejection for result in results for rejection in result.rejected],
        usage=usage,
        error="; ".join(dict.fromkeys(errors)) or None,
    )


class Writer:
    def __init__(
        self, store: Store, embedder: Embedder, retriever: Retriever, config: WriteConfig, program: Any = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.retriever = retriever
        self.config = config
        self._programs = program  # a module for every LM, or WritePrograms; see `programs`
        self._applier = PlanApplier(store, embedder, confirm_strength=config.confirm_strength)
        self._forget = re.compile(config.forget_pattern, re.IGNORECASE)
        self.claims = Claimant(store.episodes, lease_seconds=config.claim_lease_seconds)

    @property
    def programs(self) -> Any:
        """The write program of each mode (WritePrograms; built on first use: importing DSPy costs ~1 s)."""
        from dspy_memory.util.compiled import WritePrograms

        if not isinstance(self._programs, WritePrograms):
            self._programs = WritePrograms.of(self.config.mode, self._programs)
        return self._programs

    @property
    def program(self) -> Any:
        """The program of the configured mode ("auto": the one a cloud LM runs)."""
        return self.programs.program_for(self.mode_for(None))

    def mode_for(self, lm: Any) -> str:
        """The write program `lm` runs: write.mode, or for "auto" compact on a local Ollama model."""
        return self.programs.mode_for(lm_name(lm))

    # -- episodes ------------------------------------------------------------------------------

    def persist(
        self,
        messages: MessagesInput,
        scope: Scope,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        infer: bool = False,
        status: str = "pending",
    ) -> list[Episode]:
        """Write the input as episodes, in their own transaction, before any processing
        (status "done" keeps them in the log only, with no memories to make)."""
        episodes = episodes_from_input(messages, scope, metadata=metadata, at=at, infer=infer, status=status)
        self.store.episodes.insert(episodes, claim=self.claims.claim() if status != "done" else None)
        return episodes

    def unfinished(self, *, grace_seconds: float, limit: int = 1000) -> list[Episode]:
        """Claim the episodes left pending or failed, older than `grace_seconds`, that no other
        writer is working on; returns those claimed. Rows that cannot be read are reported and
        skipped."""
        cutoff = to_db(utcnow().timestamp() - grace_seconds) or now_db()
        found = self.store.episodes.unfinished(ingested_before=cutoff, limit=limit)
        for episode_id, why in found.unreadable:
            logger.warning("episode %s cannot be read and is skipped (fix or delete it): %s", episode_id, why)
        return self.claims.take(found)

    def process(self, episodes: Sequence[Episode], lm: Any) -> AddResult:
        """Raw mode without an LM, else the write program. Marking an episode done or failed
        ends its claim; when processing raises instead, the claims are given up, so any writer
        can take the episodes again."""
        try:
            if lm is None:
                memories = self.process_raw(episodes)
                return AddResult(
                    episodes=self.store.episodes.get_many([e.id for e in episodes]), memories=memories
                )
            return self.infer(episodes, lm=lm)
        except BaseException:
            self.claims.release([episode.id for episode in episodes])
            raise

    def resume(
        self, episodes: Sequence[Episode], lm: Any, *, submit: Callable[[list[Episode], Any], None]
    ) -> int:
        """Process claimed unfinished episodes the way they were added: raw ones now, inferred
        ones through `submit` (the background writer), or kept as raw turns until an LM is set."""
        now = [episode for episode in episodes if not episode.infer or lm is None]
        if now:
            self.process(now, None)
        later = [episode for episode in episodes if episode.infer and lm is not None]
        if later:
            submit(later, lm)
        return len(episodes)

    def reprocess(self, lm: Any, *, limit: int = 1000) -> list[AddResult]:
        """Process every failed and pending episode no other writer holds now, one scope and
        intent at a time (in batches of `max_batch`)."""
        by_scope: dict[Scope, list[Episode]] = {}
        for episode in self.unfinished(grace_seconds=0, limit=limit):
            by_scope.setdefault(scope_of(episode), []).append(episode)
        results = []
        try:
            for batch in by_scope.values():
                raw = [episode for episode in batch if not episode.infer]
                inferred = [episode for episode in batch if episode.infer]
                if raw:
                    results.append(self.process(raw, None))
                if inferred:
                    result = self.process(inferred, lm)
                    if lm is not None:
                        results.append(result)
        finally:
            self.claims.release([episode.id for batch in by_scope.values() for episode in batch])
        return results

    # -- raw mode ------------------------------------------------------------------------------

    def process_raw(
        self, episodes: Sequence[Episode], *, actor: str = "user", error: str | None = None
    ) -> list[MemoryRecord]:
        """Store the episodes this writer holds as `turn` memories. Safe to repeat: an episode
        that already has memories gets none again. Episodes added raw are then done; episodes
        meant for an LM are kept raw until one can run: marked failed with `error` (default: no
        LM), so reprocess() extracts them later."""
        if not episodes:
            return []
        ids = [episode.id for episode in episodes]
        already = self.store.episodes.with_memories(ids)
        todo = [episode for episode in episodes if episode.content.strip() and episode.id not in already]
        try:
            vectors = self.embedder.embed([turn_text(episode) for episode in todo]) if todo else []
        except Exception as exc:
            reason = f"{error}; " if error else ""
            self.store.episodes.mark(ids, "failed", error=reason + short_error(exc))
            raise
        with self.store.transaction():
            # Checked again under the write lock: only what this writer still holds, and not what
            # another writer stored while we embedded.
            held = self.claims.held(ids)
            stored = self.store.episodes.with_memories([episode.id for episode in todo]) if todo else set()
            items = [
                raw_turn(episode, vector)
                for episode, vector in zip(todo, vectors)
                if episode.id not in stored and episode.id in held
            ]
            items, repeats = self._repeats(items)
            inserted = dict(zip([item.id for item in items], self.store.insert_memories(items, actor=actor)))
            for memory_id, (row_id, episode_ids) in repeats.items():
                self.store.turns.restated(row_id or inserted[memory_id], memory_id, episode_ids)
            row_ids = [*inserted.values(), *(row_id for row_id, _ in repeats.values() if row_id)]
            self.store.episodes.mark([e.id for e in episodes if e.id in held and not e.infer], "done")
            waiting = [e.id for e in episodes if e.id in held and e.infer]
            self.store.episodes.mark(waiting, "failed", error=error or NO_LM)
            found = self.store.records_with_provenance(row_ids, TimeView.at())
        return [found[row_id][0] for row_id in row_ids]

    def _repeats(
        self, items: list[NewMemory]
    ) -> tuple[list[NewMemory], dict[str, tuple[int | None, list[str]]]]:
        """Raw turns to insert, and the ones that repeat a turn already stored (or earlier in the
        batch) with the same scope, text and time: {memory id: (its row id, or None while it is
        still to be inserted; the episodes that said it again)}. Runs inside the write
        transaction, so concurrent writers of one text make one memory."""
        keys = [
            (Scope(user_id=i.user_id, agent_id=i.agent_id, run_id=i.run_id), i.content_hash, i.valid_at)
            for i in items
        ]
        existing = self.store.turns.current(keys)
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

    # -- inference -----------------------------------------------------------------------------

    def infer(self, episodes: Sequence[Episode], *, lm: Any) -> AddResult:
        """Run the write program over episodes of ONE scope, in batches of `max_batch` in time
        order, and apply what it decides.

        LM and parse failures do not raise: the batch's episodes are marked failed with the
        error and kept searchable as raw `turn` memories (see AddResult.error)."""
        ordered = sorted(episodes, key=lambda e: (e.occurred_at, e.ingested_at))
        size = self.config.max_batch
        results = [
            self._infer_batch(ordered[start : start + size], lm) for start in range(0, len(ordered), size)
        ]
        return results[0] if len(results) == 1 else merge_results(results, self.mode_for(lm))

    def _infer_batch(self, episodes: Sequence[Episode], lm: Any) -> AddResult:
        from dspy_memory.programs.write import write_inputs

        mode = self.mode_for(lm)
        program = self.programs.program_for(mode)
        started = now_db()
        scope = scope_of(episodes[0])
        ids = [episode.id for episode in episodes]
        spoken = [e for e in episodes if e.content.strip()]
        if not spoken:
            self.store.episodes.mark(ids, "done")
            return AddResult(episodes=self.store.episodes.get_many(ids), mode=mode)
        observed = max(episode.occurred_at for episode in spoken)
        usage = LMUsage()
        conflict: WriteConflictError | None = None
        unseen: list[str] = []  # facts a conflict showed the LM had to see: shown next time
        for _ in range(self.config.max_conflict_retries + 1):
            after_row_id = self.store.last_row_id()  # before the candidates: nothing newer is seen
            try:
                candidates = self._candidates(spoken, scope, include=unseen)
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
                return merge_results(
                    [self._infer_batch(episodes[:half], lm), self._infer_batch(episodes[half:], lm)], mode
                )
            self.claims.renew(ids)
            try:
                prediction, spent = run_program(
                    program,
                    lm,
                    inputs,
                    max_attempts=self.config.max_attempts,
                    timeout_s=self.config.lm_timeout_s,
                )
            except WriteProgramError as exc:
                usage = usage + (exc.usage or LMUsage())
                return self._fail(episodes, scope, mode, lm, usage, str(exc), started)
            usage = usage + spent
            plan, requests = self._plan(list(prediction.ops or []), candidates, spoken, scope)
            try:
                applied, memories = self._applier.apply(
                    plan,
                    episodes,
                    scope,
                    seen=Seen(after_row_id, candidates),
                    held_by=self.claims.token,
                    forget_requests=requests,
                )
            except WriteConflictError as exc:
                conflict = exc
                unseen = list(dict.fromkeys([*unseen, *exc.unseen]))
                logger.info("write program: %s; planning again with fresh memories", exc)
                continue
            except ClaimLostError as exc:
                self._log_run(scope, mode, ids, lm, usage, 0, plan.rejected, str(exc), started)
                return AddResult(
                    episodes=self.store.episodes.get_many(ids), mode=mode, usage=usage, error=str(exc)
                )
            except Exception as exc:
                self.store.episodes.mark(ids, "failed", error=short_error(exc))
                self._log_run(scope, mode, ids, lm, usage, 0, plan.rejected, short_error(exc), started)
                raise
            self._log_run(scope, mode, ids, lm, usage, len(applied), plan.rejected, None, started)
            if plan.rejected:
                logger.info("write program: %d operation(s) refused: %s", len(plan.rejected), plan.rejected)
            return AddResult(
                episodes=self.store.episodes.get_many(ids),
                memories=memories,
                mode=mode,
                ops=applied,
                rejected=plan.rejected,
                usage=usage,
            )
        error = f"the memories the LM read did not hold still ({self.config.max_conflict_retries + 1} tries): {conflict}"
        return self._fail(episodes, scope, mode, lm, usage, error, started)

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
            if record is not None and record.status == "current":
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
    ) -> tuple[Plan, list[str]]:
        """The validated plan, and the episodes that ask to forget something."""
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
        return plan, [episode.id for episode in requests]

    def _fail(
        self,
        episodes: Sequence[Episode],
        scope: Scope,
        mode: str,
        lm: Any,
        usage: LMUsage,
        error: str,
        started: str,
    ) -> AddResult:
        """The program failed: keep the episodes searchable as raw turns, marked failed."""
        logger.warning("write program failed; episodes kept as raw turns for reprocess(): %s", error)
        ids = [episode.id for episode in episodes]
        memories: list[MemoryRecord] = []
        try:
            memories = self.process_raw(episodes, actor="system", error=error)
        except Exception as exc:  # the episodes are on disk and marked failed by process_raw
            error = f"{error}; raw turns not stored either: {short_error(exc)}"
        self._log_run(scope, mode, ids, lm, usage, 0, [], error, started)
        return AddResult(
            episodes=self.store.episodes.get_many(ids), memories=memories, mode=mode, usage=usage, error=error
        )

    def _log_run(
        self,
        scope: Scope,
        mode: str,
        episode_ids: list[str],
        lm: Any,
        usage: LMUsage,
        applied: int,
        rejected: Sequence[Rejection],
        error: str | None,
        started: str,
    ) -> None:
        self.store.runs.log(
            scope,
            mode=mode,
            episode_ids=episode_ids,
            lm=lm_name(lm),
            usage=usage,
            ops_applied=applied,
            rejected=rejected,
            error=error,
            started_at=started,
        )
