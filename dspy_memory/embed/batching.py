"""Micro-batching: texts that threads ask for at nearly the same time go through the model as
one batch, and each caller gets its own vectors back.

Why: a model embeds a batch for much less than the sum of its texts one by one (MiniLM in
numpy on 2 cores: ~43 ms of CPU for one short text alone, ~2.4 ms a text in a batch of 50), and
a service embeds one query or one stored text per request, from many request threads at once.

How: no thread of its own. A caller that finds no batch running leads one: it takes what is
queued (its own texts first), runs the inner embedder once, hands every caller its rows, and
passes the lead to the oldest caller that queued meanwhile. While a batch runs, newcomers queue,
so under load batches form by themselves; a leader waits up to `wait_ms` for company only when
the previous batch had more than one caller, so a lone caller never waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from dspy_memory.embed.base import Embedder
from dspy_memory.errors import EmbeddingError


class _Request:
    """One caller's texts and, once its batch ran, its vectors, or the word to embed alone."""

    __slots__ = ("texts", "vectors", "error", "alone", "lead", "done")

    def __init__(self, texts: list[str], done: threading.Condition) -> None:
        self.texts = texts
        self.vectors: np.ndarray | None = None
        self.error: Exception | None = None  # its batch was itself alone, and failed
        self.alone = False  # its batch failed: embed its own texts, to get its own error
        self.lead = False  # it leads the next batch
        self.done = done


class MicroBatcher:
    """An Embedder that coalesces concurrent callers' texts into batches of `inner`.

    `wait_ms`: how long a leader may wait for more callers (only while batches have had more
    than one caller); `max_batch`: texts per batch at most (a caller with more goes alone, and
    the inner embedder splits them into its own batches). Vectors are the inner embedder's for
    the same texts (a batch pads short texts to its longest; the padding is masked out, so
    vectors differ from unbatched ones by float rounding only, ~1e-7).

    After `close()`, new calls raise EmbeddingError; callers already queued still get their
    vectors. Anything else (`clear_cache`, `backend`, ...) is the inner embedder's.
    """

    def __init__(self, inner: Embedder, *, wait_ms: float = 2.0, max_batch: int = 64) -> None:
        if wait_ms < 0:
            raise ValueError("wait_ms must be at least 0")
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.wait_seconds = wait_ms / 1000
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # a leader waiting for company
        self._queue: list[_Request] = []
        self._queued_texts = 0
        self._leading = False  # a caller is collecting or running a batch
        self._closed = False
        self._last_callers = 1
        self.batches = 0  # batches run (model calls, unless the inner embedder splits them)

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def waiting(self) -> int:
        """Callers queued for the next batch."""
        with self._lock:
            return len(self._queue)

    def __getattr__(self, attribute: str) -> Any:
        # Only called for what this class does not define: the inner embedder's extras.
        if attribute == "inner":
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            return self.inner.embed(texts)  # the inner embedder says why not
        texts = list(texts)
        cached = getattr(self.inner, "cached", None)
        vectors = cached(texts) if cached is not None else None
        if vectors is not None:
            return vectors  # nothing for the model to do: no reason to queue
        request = self._enqueue(texts)
        if request.lead:
            self._lead()
        if request.error is not None:
            raise request.error
        if request.alone:
            return self.inner.embed(request.texts)
        assert request.vectors is not None
        return request.vectors

    def embed_query(self, text: str) -> np.ndarray:
        query_text = getattr(self.inner, "query_text", None)
        if query_text is None or not isinstance(text, str):
            return self.inner.embed_query(text)  # how it embeds a query is its own business
        return self.embed([query_text(text)])[0]

    def close(self) -> None:
        """Refuse new callers; the queued ones are still served (by their own threads)."""
        with self._lock:
            self._closed = True

    # -- the queue -------------------------------------------------------------------------------

    def _enqueue(self, texts: list[str]) -> _Request:
        """Queue the texts; return when they were embedded, failed, or it is this caller's
        turn to lead a batch (request.lead)."""
        with self._lock:
            if self._closed:
                raise EmbeddingError(f"embedder {self.name!r} was closed; open the memory again")
            request = _Request(texts, threading.Condition(self._lock))
            self._queue.append(request)
            self._queued_texts += len(texts)
            if not self._leading:
                self._leading = request.lead = True
            else:
                self._arrived.notify()
                while not (request.lead or request.vectors is not None or request.error or request.alone):
                    request.done.wait()
            return request

    def _lead(self) -> None:
        """Collect a batch (this caller's request first), run it, deliver, pass the lead on."""
        with self._lock:
            if self._last_callers > 1 and self.wait_seconds:
                deadline = time.monotonic() + self.wait_seconds
                while self._queued_texts < self.max_batch:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._arrived.wait(remaining)
            batch: list[_Request] = []
            size = 0
            while self._queue and (not batch or size + len(self._queue[0].texts) <= self.max_batch):
                request = self._queue.pop(0)
                batch.append(request)
                size += len(request.texts)
            self._queued_texts -= size
        try:
            self._run(batch)
        finally:
            with self._lock:
                for request in batch:
                    if request.vectors is None and request.error is None:
                        request.alone = True  # the batch failed, or was interrupted
                    request.done.notify()
                self.batches += 1
                self._last_callers = len(batch)
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].done.notify()
                else:
                    self._leading = False

    def _run(self, batch: list[_Request]) -> None:
        """Embed the batch in one call and give each request its rows. If the call fails, each
        caller embeds alone (`alone`), so a bad text fails only its own caller; a caller that
        was alone in its batch gets the error as it is."""
        texts = [text for request in batch for text in request.texts]
        try:
            vectors = self.inner.embed(texts)
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
            return
        start = 0
        for request in batch:
            request.vectors = vectors[start : start + len(request.texts)]
            start += len(request.texts)
