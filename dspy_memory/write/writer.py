"""The write path: input -> episodes (persisted first) -> memories.

Episodes are written in their own transaction before anything that can fail (embedding, the
LM), so nothing a user gave us is lost. Raw mode stores every message as a searchable `turn`
memory (turns.py); with an LM, the write program decides what to remember (infer.py). Episodes
are claimed by the writer that processes them (claims.py), so concurrent writers and replays never
process an episode twice; unfinished ones are picked up by `resume_unfinished` and `reprocess`.
Corrections and erasure by the caller go through here too, so every change of memory content
has one way in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dspy_memory.config import WriteConfig
from dspy_memory.embed import Embedder, forget_cached_content
from dspy_memory.errors import InvalidInputError, MemoryNotFoundError, StorageError
from dspy_memory.governance.redact import NO_REDACTION, Redactor
from dspy_memory.read.retrieval import Retriever
from dspy_memory.store import Store
from dspy_memory.store.queries import not_found
from dspy_memory.types import (
    AddResult,
    DeleteResult,
    Episode,
    EpisodeStatus,
    FeedbackRecord,
    MemoryRecord,
    ProgramMode,
    Scope,
    WriteMode,
)
from dspy_memory.util.lm import short_error
from dspy_memory.util.progress import OnProgress, report
from dspy_memory.util.text import content_hash, valid_text
from dspy_memory.util.timeutil import TimeLike, now_db, to_db, utcnow
from dspy_memory.write.apply import PlanApplier
from dspy_memory.write.claims import Claimant
from dspy_memory.write.infer import LMWriter
from dspy_memory.write.inputs import MessagesInput, episodes_from_input
from dspy_memory.write.turns import TurnWriter

logger = logging.getLogger("dspy_memory")


class Writer:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        retriever: Retriever,
        config: WriteConfig,
        program: Any = None,
        redact: Redactor = NO_REDACTION,
    ) -> None:
        self.store = store
        self.redact = redact  # secrets out of everything written (docs/governance.md)
        self.embedder = embedder
        self.config = config
        self.claims = Claimant(store.episodes, lease_seconds=config.claim_lease_seconds)
        self.turns = TurnWriter(store, embedder, self.claims)
        self.lm_writer = LMWriter(
            store,
            retriever,
            config,
            program=program,
            applier=PlanApplier(store, embedder, confirm_strength=config.confirm_strength),
            claims=self.claims,
            turns=self.turns,
            redact=redact,
        )

    @property
    def program(self) -> Any:
        """The program of the configured mode ("auto": the one a cloud LM runs)."""
        return self.program_for(self.mode_for(None))

    def program_for(self, mode: ProgramMode) -> Any:
        """The write program of `mode` ("fused", "compact", "two_step") as loaded (compiled, if
        a compiled one was found)."""
        return self.lm_writer.programs.program_for(mode)

    def mode_for(self, lm: Any) -> ProgramMode:
        """The write program `lm` runs: write.mode, or for "auto" compact on a local Ollama model."""
        return self.lm_writer.mode_for(lm)

    # -- episodes ------------------------------------------------------------------------------

    def persist(
        self,
        messages: MessagesInput,
        scope: Scope,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        infer: bool = False,
        status: EpisodeStatus = "pending",
        expires_at: datetime | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Episode]:
        """Write the input as episodes, in their own transaction, before any processing
        (status "done" keeps them in the log only, with no memories to make); what is made
        from them expires with them (`expires_at`); `ids`: the episodes' own (bulk ingestion)."""
        episodes = episodes_from_input(
            messages,
            scope,
            metadata=metadata,
            at=at,
            infer=infer,
            status=status,
            redact=self.redact,
            expires_at=expires_at,
            ids=ids,
        )
        self.store.episodes.insert(episodes, claim=self.claims.claim() if status != "done" else None)
        return episodes

    def add(
        self,
        messages: MessagesInput,
        scope: Scope,
        *,
        lm: Any,
        metadata: Mapping[str, Any] | None,
        at: TimeLike | None,
        queue: Callable[[list[Episode], Any], None] | None,
        expires_at: datetime | None = None,
    ) -> AddResult:
        """Persist, then process now, or hand the episodes to `queue` (the background writer)."""
        episodes = self.persist(
            messages, scope, metadata=metadata, at=at, infer=lm is not None, expires_at=expires_at
        )
        if queue is None:
            return self.process(episodes, lm)
        queue(episodes, lm)
        return AddResult(episodes=episodes, mode=self.mode_for(lm) if lm is not None else "raw", queued=True)

    def unfinished(self, *, grace_seconds: float, limit: int = 1000) -> list[Episode]:
        """Claim the episodes left pending or failed, older than `grace_seconds`, that no other
        writer is working on; returns those claimed. Rows that cannot be read are reported and
        skipped."""
        self.claims.settle()  # claims a storage fault kept: this writer's episodes are free again
        cutoff = to_db(utcnow().timestamp() - grace_seconds) or now_db()
        found = self.store.episodes.unfinished(ingested_before=cutoff, limit=limit)
        for episode_id, why in found.unreadable:
            logger.warning("episode %s cannot be read and is skipped (fix or delete it): %s", episode_id, why)
        return self.claims.take(found)

    def process(
        self, episodes: Sequence[Episode], lm: Any, *, embedded: Mapping[str, Any] | None = None
    ) -> AddResult:
        """Raw mode without an LM, else the write program. Marking an episode done or failed
        ends its claim; when processing raises instead, the claims are given up, so any writer
        can take the episodes again. A storage fault says where the episodes are. `embedded`:
        raw turns' vectors computed ahead, by episode id."""
        try:
            if lm is None:
                memories = self.turns.store(episodes, embedded=embedded)
                return AddResult(
                    episodes=self.store.episodes.get_many([e.id for e in episodes]), memories=memories
                )
            return self.lm_writer.infer(episodes, lm=lm)
        except BaseException as exc:
            self.claims.release([episode.id for episode in episodes])
            if isinstance(exc, StorageError):
                raise exc.adding(
                    f"The {len(episodes)} episode(s) being processed are saved, not yet processed "
                    "(pending or failed): memory.reprocess() (or the next open of the file) "
                    "processes them once the file can be written"
                ) from exc.__cause__
            raise

    def failed(self, episodes: Sequence[Episode], lm: Any, exc: BaseException) -> AddResult:
        """What processing `episodes` that raised `exc` reports (a background batch, at flush):
        the episodes as the file has them now (pending or failed) and the error."""
        try:
            episodes = self.store.episodes.get_many([episode.id for episode in episodes])
        except Exception:  # the file cannot be read either: the episodes as they were queued
            pass
        mode: WriteMode = self.mode_for(lm) if lm is not None else "raw"
        return AddResult(episodes=list(episodes), mode=mode, error=short_error(exc, limit=1000))

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

    def reprocess(
        self, lm: Any, *, limit: int = 1000, on_progress: OnProgress | None = None
    ) -> list[AddResult]:
        """Process every failed and pending episode no other writer holds now, one scope and
        intent at a time (in batches of `max_batch`). `on_progress` gets the episodes done of
        those claimed after each batch, with how many LM batches failed so far."""
        claimed = self.unfinished(grace_seconds=0, limit=limit)
        by_scope: dict[Scope, list[Episode]] = {}
        for episode in claimed:
            by_scope.setdefault(episode.scope, []).append(episode)
        results: list[AddResult] = []
        done = failed = 0

        def step(episodes: Sequence[Episode], with_lm: Any) -> AddResult:
            nonlocal done, failed
            result = self.process(episodes, with_lm)
            done += len(episodes)
            failed += with_lm is not None and result.error is not None
            report(on_progress, done, len(claimed), "episodes", failed=failed)
            return result

        report(on_progress, 0, len(claimed), "episodes", failed=0)
        try:
            for batch in by_scope.values():
                raw = [episode for episode in batch if not episode.infer]
                inferred = [episode for episode in batch if episode.infer]
                if raw:
                    results.append(step(raw, None))
                if inferred and lm is None:
                    step(inferred, None)  # kept as raw turns until an LM is set: no result to report
                elif inferred:
                    # A batch per LM call, as infer() takes them, so the bar moves with the
                    # calls: one scope's backlog is many calls.
                    parts = [step(batch, lm) for batch in self.lm_writer.batches(inferred)]
                    results.append(
                        parts[0] if len(parts) == 1 else AddResult.merged(parts, self.mode_for(lm))
                    )
        finally:
            self.claims.release([episode.id for episode in claimed])
        return results

    def resume_unfinished(
        self, lm: Any, *, grace_seconds: float, submit: Callable[[list[Episode], Any], None]
    ) -> int:
        """Resume what an earlier process left unfinished; never raises (the episodes stay on
        disk and are tried again next time)."""
        try:
            resumed = self.resume(self.unfinished(grace_seconds=grace_seconds), lm, submit=submit)
        except Exception as exc:
            logger.warning("pending episodes in %s could not be processed yet: %s", self.store.path, exc)
            return 0
        if resumed:
            logger.info("resumed %d unfinished episodes from %s", resumed, self.store.path)
        return resumed

    # -- changes by the caller -----------------------------------------------------------------

    def revise(
        self, memory_id: str, content: str, *, scope: Scope | None, reason: str | None
    ) -> MemoryRecord:
        """A corrected text as a new version of the memory (the old one expires), with an UPDATE
        event by the user and, in the same transaction, a "correction" feedback record."""
        if not valid_text(content, "update() content").strip():
            raise InvalidInputError("update() needs the new content as a non-empty string")
        if reason is not None:
            valid_text(reason, "reason")
        content, reason = self.redact.text(content), self.redact.optional(reason)
        current = self.store.get_memory(memory_id, scope=scope)
        if current is None or current.status == "expired":
            raise MemoryNotFoundError(f"no current memory with id {memory_id!r}")
        if current.content == content:
            return current
        embedding = self.embedder.embed([content])[0]
        with self.store.transaction():
            old, new = self.store.supersede(
                memory_id,
                scope=scope,
                changes={"content": content, "content_hash": content_hash(content)},
                embedding=embedding,
                event="UPDATE",
                actor="user",
                reason=reason,
            )
            # A person's correction is a labelled example: the version they replaced was wrong.
            self.store.feedback.about(
                old, source="correction", verdict="wrong", note=reason, expected={"content": content}
            )
        return new

    def judge(self, memory_id: str, verdict: str, *, note: str | None, scope: Scope | None) -> FeedbackRecord:
        """A person's verdict on a memory's current version (or its last one, if it was expired),
        kept as feedback with the write run that made that version."""
        note = self.redact.optional(note)
        with self.store.transaction():
            record = self.store.get_memory(memory_id, scope=scope)
            if record is None:
                raise not_found(memory_id, scope)
            return self.store.feedback.about(
                record, source="verdict", verdict=verdict, note=note, expected={"verdict": verdict}
            )

    def erase_memory(self, memory_id: str, *, scope: Scope | None) -> DeleteResult:
        result = self.store.erase.memory(memory_id, scope=scope)
        forget_cached_content(self.embedder)
        return result

    def erase_scope(self, scope: Scope) -> DeleteResult:
        result = self.store.erase.scope(scope)
        forget_cached_content(self.embedder)
        return result
