"""Bulk ingestion: a conversation file (write/formats.py) stored in batches through the write
path every `add` takes: episodes persisted first, then raw turns embedded a batch at a time, or
the write program run over each conversation's batches, `concurrency` of them at once, under
the same episode claims as the background writer (docs/ingest.md).

Running the same ingest again goes on where it stopped. Each message's episode id is derived
from its scope, its identity in the file (its own id, else its conversation and place) and its
text, so a second run finds what the first stored: what is done is counted as already there,
and what an interrupted run left pending is taken over through its claim and processed. Records
that cannot be read are reported with where and why, and never half-stored: a message is
checked whole before its batch is persisted.
"""

from __future__ import annotations

import contextvars
import json
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.reports import IngestReport
from dspy_memory.types import AddResult, Episode, Scope
from dspy_memory.util.progress import OnProgress, report
from dspy_memory.util.timeutil import utcnow
from dspy_memory.write.formats import Message, MessageStream, Refusal
from dspy_memory.write.inputs import Draft, drafts_from_input, turn_text
from dspy_memory.write.writer import Writer

# Episode ids of ingested messages: uuid5 in this namespace (fixed: ids must not change between
# versions, or a run after an upgrade would store the file again).
NAMESPACE = uuid.UUID("5f0e6a52-3b1c-4d2a-9c77-6a1e0b2d9f41")
MAX_REFUSALS = 1000  # kept in the report; all are counted
RAW_BATCH = 256  # messages per transaction; the embedder splits them into its own batches (64)
# Messages held in the LM path's per-conversation buffers before the fullest is written.
BUFFERED_BATCHES = 8


def episode_id(scope: Scope, identity: str, content: str) -> str:
    """The id of a message's episode: the same message in the same scope, the same id."""
    key = json.dumps([scope.user_id, scope.agent_id, scope.run_id, identity, content], ensure_ascii=False)
    return str(uuid.uuid5(NAMESPACE, key))


class Ingestion:
    """One ingest run: `run()` reads the stream to the end (or a Ctrl-C) and returns the report."""

    def __init__(
        self,
        writer: Writer,
        stream: MessageStream,
        scope: Scope,
        *,
        lm: Any,
        batch_size: int,
        concurrency: int,
        strict: bool,
        on_progress: OnProgress | None,
    ) -> None:
        self._writer = writer
        self._stream = stream
        self._scope = scope
        self._lm = lm
        self._batch_size = batch_size
        self._concurrency = concurrency
        self._strict = strict
        self._on_progress = on_progress
        self._started_at = utcnow()  # the time of messages the file gives none
        mode = writer.mode_for(lm) if lm is not None else "raw"
        self.report = IngestReport(source=str(stream.path), format=stream.format, mode=mode)
        self._conversations: set[str] = set()
        self._buffers: dict[str, list[tuple[Message, Draft]]] = {}
        self._buffered = 0  # messages in all the buffers
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight: dict[Future[AddResult], tuple[str, list[str]]] = {}
        self._busy: dict[str, Future[AddResult]] = {}
        self._held: list[str] = []  # episodes this run persisted or took and has not handed on
        # Raw mode: the next batch is embedded in this thread while the last one is stored.
        self._embedding: ThreadPoolExecutor | None = None
        self._ahead: tuple[list[Episode], Future[dict[str, Any]]] | None = None

    def run(self) -> IngestReport:
        started = time.monotonic()
        if self._lm is not None and self._concurrency > 1:
            self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="dspy-memory-ingest")
        if self._lm is None:
            self._embedding = ThreadPoolExecutor(1, thread_name_prefix="dspy-memory-ingest-embed")
        try:
            for item in self._stream:
                checked = self._checked(item)
                if isinstance(checked, Refusal):
                    self._refuse(checked)
                    continue
                message, draft = checked
                self.report.messages += 1
                self._conversations.add(message.conversation)
                # Raw turns are embedded in file order whatever their conversation; the write
                # program reads one conversation at a time.
                buffer = self._buffers.setdefault(message.conversation if self._lm is not None else "", [])
                buffer.append((message, draft))
                self._buffered += 1
                if len(buffer) >= self._batch_size:
                    self._flush(message.conversation if self._lm is not None else "")
                elif self._buffered >= BUFFERED_BATCHES * self._batch_size:
                    self._flush(max(self._buffers, key=lambda name: len(self._buffers[name])))
            for name in list(self._buffers):
                self._flush(name)
            self._store_ahead()
            while self._in_flight:
                self._collect_one()
        except BaseException:
            self.report.interrupted = True
            # Stopped between persisting a batch and processing it: the next run (in this
            # process too) can take the episodes at once, not when the claims' lease ends.
            self._writer.claims.release(self._held)
            raise
        finally:
            self._stop()
            self.report.conversations = len(self._conversations)
            self.report.seconds = round(time.monotonic() - started, 3)
            self._progress()
        return self.report

    def _checked(self, item: Message | Refusal) -> tuple[Message, Draft] | Refusal:
        """The message as `add` takes it, checked whole (a refusal names where and why)."""
        if isinstance(item, Refusal):
            return item
        draft = {
            "role": item.role,
            "name": item.name,
            "content": item.content,
            "at": item.at or self._started_at,
            "metadata": {
                "ingest": {
                    "file": self._stream.path.name,
                    "where": item.where,
                    "conversation": item.conversation,
                }
            },
        }
        try:
            [checked] = drafts_from_input([draft])
        except InvalidInputError as exc:
            return Refusal(item.where, str(exc).removeprefix("message 0: ").removeprefix("every message is "))
        return item, checked  # persisted as it is: not checked a second time

    def _refuse(self, refusal: Refusal) -> None:
        self.report.refused_count += 1
        if len(self.report.refused) < MAX_REFUSALS:
            self.report.refused.append({"where": refusal.where, "reason": refusal.reason})
        if self._strict:
            for name in list(self._buffers):  # what came before the refused record is stored
                self._flush(name)
            self._store_ahead()
            while self._in_flight:
                self._collect_one()
            raise InvalidInputError(
                f"{self._stream.path.name}, {refusal.where}: {refusal.reason} (strict: stopped at the first "
                f"record that cannot be read; the {self.report.messages} messages before it are stored, "
                "and running the same ingest again after fixing it goes on from there)"
            )

    def _flush(self, name: str) -> None:
        """Persist a buffer's new messages, take over the unfinished ones an earlier run left,
        and process both."""
        batch = self._buffers.pop(name, [])
        if not batch:
            return
        self._buffered -= len(batch)
        ids: dict[str, tuple[Message, Draft]] = {}
        for message, draft in batch:
            identity = message.key or f"{self._stream.path.name}:{message.conversation}:{message.where}"
            ids.setdefault(episode_id(self._scope, identity, message.content), (message, draft))
        self.report.already += len(batch) - len(ids)  # said twice in the file: one episode
        settled, unfinished = self._writer.store.episodes.present(list(ids))
        taken = self._writer.claims.take(unfinished)
        self.report.already += len(settled) + len(unfinished.episodes) - len(taken)
        self.report.resumed += len(taken)
        there = settled | {episode.id for episode in unfinished.episodes}
        new = {episode_id: draft for episode_id, (_, draft) in ids.items() if episode_id not in there}
        episodes = (
            self._writer.persist(list(new.values()), self._scope, infer=self._lm is not None, ids=list(new))
            if new
            else []
        )
        self.report.stored += len(episodes)
        work = [*taken, *episodes]
        ahead = self._ahead[0] if self._ahead is not None else []
        self._held = [episode.id for episode in [*ahead, *work]]
        raw = [episode for episode in work if not episode.infer or self._lm is None]
        if raw:
            self._store_raw(raw)
        inferred = [episode for episode in work if episode.infer and self._lm is not None]
        if inferred:
            self._infer(name, inferred)
        self._held = [episode.id for episode in self._ahead[0]] if self._ahead is not None else []
        self._progress()

    def _store_raw(self, episodes: list[Episode]) -> None:
        """Start embedding this batch, and store the one embedded before it meanwhile (the
        model and the file work side by side: raw ingestion runs at the embedder's rate)."""
        if self._embedding is None:  # raw episodes an earlier run left, in an LM run
            self._count(self._writer.process(episodes, None), episodes)
            return
        embed = self._writer.embedder.embed

        def vectors() -> dict[str, Any]:
            todo = [episode for episode in episodes if episode.content.strip()]
            found: Any = embed([turn_text(episode) for episode in todo]) if todo else []
            return dict(zip([episode.id for episode in todo], found))

        previous, self._ahead = self._ahead, (episodes, self._embedding.submit(vectors))
        if previous is not None:
            self._store_embedded(*previous)

    def _store_ahead(self) -> None:
        """Store the batch still being embedded (the last one, or the last before a stop)."""
        if self._ahead is not None:
            previous, self._ahead = self._ahead, None
            self._store_embedded(*previous)

    def _store_embedded(self, episodes: list[Episode], future: Future[dict[str, Any]]) -> None:
        # An embedding that failed is tried again by the store, which marks the episodes
        # failed (kept for reprocess()) if it fails again.
        embedded = future.result() if future.exception() is None else None
        self._count(self._writer.process(episodes, None, embedded=embedded), episodes)

    def _infer(self, name: str, episodes: list[Episode]) -> None:
        """The write program over one conversation's batch: now, or in the pool once a place
        is free and the conversation's previous batch is applied (a conversation is read in
        order; different conversations side by side)."""
        if self._pool is None:
            self._count(self._writer.process(episodes, self._lm), episodes)
            return
        previous = self._busy.get(name)
        if previous is not None:
            self._collect(previous)
        while len(self._in_flight) >= self._concurrency:
            self._collect_one()
        run = contextvars.copy_context().run  # who acts, for the audit log, as background batches
        future = self._pool.submit(run, self._writer.process, episodes, self._lm)
        self._in_flight[future] = (name, [episode.id for episode in episodes])
        self._busy[name] = future

    def _collect_one(self) -> None:
        done, _ = wait(list(self._in_flight), return_when=FIRST_COMPLETED)
        for future in done:
            self._collect(future)

    def _collect(self, future: Future[AddResult]) -> None:
        if future not in self._in_flight:
            return
        result = future.result()  # a storage error stops the ingest (the episodes are saved)
        name, ids = self._in_flight.pop(future)
        if self._busy.get(name) is future:
            del self._busy[name]
        self._count(result, ids)
        self._progress()

    def _count(self, result: AddResult, episodes: list[Any]) -> None:
        self.report.memories += len(result.ops) if result.mode != "raw" else len(result.memories)
        if result.error:
            self.report.failed += len(episodes)
            if result.error not in self.report.errors and len(self.report.errors) < 10:
                self.report.errors.append(result.error)

    def _stop(self) -> None:
        """Batches not started are given back (their episodes stay pending for the next run);
        the ones the LM is writing now are waited for."""
        if self._embedding is not None:
            self._embedding.shutdown(wait=True, cancel_futures=True)
        if self._pool is None:
            return
        for future, (_, ids) in list(self._in_flight.items()):
            if future.cancel():
                self._writer.claims.release(ids)
                del self._in_flight[future]
        self._pool.shutdown(wait=True)
        for future in list(self._in_flight):
            if not future.cancelled() and future.exception() is None:
                self._collect(future)

    def _progress(self) -> None:
        r = self.report
        report(
            self._on_progress, self._stream.position, self._stream.size, "bytes",
            messages=r.messages, stored=r.stored, already=r.already, resumed=r.resumed, refused=r.refused_count,
        )  # fmt: skip
