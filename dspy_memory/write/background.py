"""The background writer: episodes are on disk when `add(background=True)` returns; a worker
thread processes them later, one scope at a time, a burst of messages in one batch."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.types import AddResult, Episode

logger = logging.getLogger("dspy_memory")

# A batch is one scope and one intent: raw episodes are never handed to the LM, and the
# reverse.
BatchKey = tuple[str | None, str | None, str | None, bool]
ProcessBatch = Callable[[list[Episode], Any], AddResult]
FailedBatch = Callable[[list[Episode], Any, BaseException], AddResult]


@dataclass
class _Batch:
    episodes: list[Episode]
    lm: Any
    first_at: float
    last_at: float = field(default=0.0)
    # The submitter's context variables (who acts, for the audit log): the latest wins, as for `lm`.
    context: contextvars.Context | None = None


class BackgroundWriter:
    """Debounced, batched processing of queued episodes.

    A scope's batch is processed when no message arrived for it within `debounce_seconds` (a
    burst is handled in one LM call), `max_wait_seconds` after its first message (a chat that
    never pauses is still processed), or once it holds `max_batch` episodes. `flush()` processes
    everything queued now and waits; `close()` flushes and stops the thread.
    """

    def __init__(
        self,
        process: ProcessBatch,
        *,
        debounce_seconds: float,
        max_wait_seconds: float,
        max_batch: int,
        keep_results: int = 1000,
        failed: FailedBatch | None = None,
    ) -> None:
        """`failed(episodes, lm, error)`: what a batch that raised reports at flush."""
        self._process = process
        self._failed = failed
        self.debounce_seconds = debounce_seconds
        self.max_wait_seconds = max_wait_seconds
        self.max_batch = max_batch
        self._batches: dict[BatchKey, _Batch] = {}
        self._results: deque[AddResult] = deque(maxlen=keep_results)
        self._cond = threading.Condition()
        self._busy = 0
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        # A periodic task (scheduled maintenance) run in this thread between batches.
        self._periodic: tuple[float, Callable[[], Any]] | None = None
        self._periodic_due = 0.0
        self.periodic_results: deque[Any] = deque(maxlen=100)

    def schedule(
        self, interval_seconds: float, task: Callable[[], Any], *, first_in: float | None = None
    ) -> None:
        """Run `task` every `interval_seconds` in the worker thread, between batches (a batch due
        meanwhile waits for it; callers' own writes never do). The first run is `first_in`
        seconds from now (default: one interval). Results are kept in `periodic_results`."""
        with self._cond:
            self._periodic = (interval_seconds, task)
            self._periodic_due = time.monotonic() + (interval_seconds if first_in is None else first_in)
            self._start()
            self._cond.notify_all()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dspy-memory-writer", daemon=True)
            self._thread.start()

    def submit(self, episodes: Sequence[Episode], lm: Any) -> None:
        if not episodes:
            return
        now = time.monotonic()
        with self._cond:
            if self._closed:
                raise RuntimeError("this Memory is closed")
            for episode in episodes:
                key = (episode.user_id, episode.agent_id, episode.run_id, lm is not None)
                batch = self._batches.get(key)
                if batch is None:
                    batch = self._batches[key] = _Batch(episodes=[], lm=lm, first_at=now)
                batch.episodes.append(episode)
                batch.last_at = now
                batch.lm = lm  # the latest configuration wins for the whole batch
                batch.context = contextvars.copy_context()
            self._start()
            self._cond.notify_all()

    def pending(self) -> int:
        """Episodes queued and not yet processed."""
        with self._cond:
            return sum(len(batch.episodes) for batch in self._batches.values())

    def _due_in(self, batch: _Batch, now: float) -> float:
        if self._flushing or self._closed or len(batch.episodes) >= self.max_batch:
            return 0.0
        return max(
            0.0, min(batch.last_at + self.debounce_seconds, batch.first_at + self.max_wait_seconds) - now
        )

    def _take_due(self) -> tuple[BatchKey, _Batch] | Callable[[], Any] | None:
        """Wait until a batch is due and remove it from the queue, or until the periodic task
        is due (returned to run); None: stop."""
        with self._cond:
            while True:
                now = time.monotonic()
                if (
                    self._periodic is not None
                    and not self._closed
                    and not self._flushing
                    and now >= self._periodic_due
                ):
                    interval, task = self._periodic
                    self._periodic_due = now + interval
                    return task
                waits = {key: self._due_in(batch, now) for key, batch in self._batches.items()}
                due = [key for key, wait in waits.items() if wait == 0.0]
                if due:
                    key = min(due, key=lambda k: self._batches[k].first_at)
                    batch = self._batches.pop(key)
                    if len(batch.episodes) > self.max_batch:  # the rest goes back, due at once
                        rest = _Batch(
                            batch.episodes[self.max_batch :],
                            batch.lm,
                            batch.first_at,
                            batch.last_at,
                            batch.context.copy() if batch.context is not None else None,
                        )
                        self._batches[key] = rest
                        batch.episodes = batch.episodes[: self.max_batch]
                    self._busy += 1
                    return key, batch
                if self._closed:
                    return None
                timeout = min(waits.values(), default=None)
                if self._periodic is not None and not self._flushing:
                    periodic = max(0.0, self._periodic_due - now)
                    timeout = periodic if timeout is None else min(timeout, periodic)
                self._cond.wait(timeout=timeout)

    def _run(self) -> None:
        while True:
            taken = self._take_due()
            if taken is None:
                return
            if callable(taken):
                try:
                    self.periodic_results.append(taken())
                except Exception:  # the next interval tries again
                    logger.exception("scheduled maintenance failed")
                continue
            _, batch = taken
            try:
                if batch.context is not None:
                    result = batch.context.run(self._process, batch.episodes, batch.lm)
                else:
                    result = self._process(batch.episodes, batch.lm)
                with self._cond:
                    self._results.append(result)
            except Exception as exc:  # the episodes stay on disk (pending or failed) for reprocess()
                logger.exception("background write of %d episode(s) failed", len(batch.episodes))
                self._report_failure(batch, exc)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _report_failure(self, batch: _Batch, exc: Exception) -> None:
        if self._failed is None:
            return
        try:
            result = self._failed(batch.episodes, batch.lm, exc)
        except Exception:  # the failure is logged above; no result to add
            logger.exception("the failed background write could not be reported")
            return
        with self._cond:
            self._results.append(result)

    def flush(self, timeout: float | None = None) -> list[AddResult]:
        """Process everything queued now, wait for it, and return the results gathered since
        the last flush. Raises TimeoutError if that takes longer than `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._batches or self._busy:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"{self.pending()} queued episode(s) still being processed")
                    self._cond.wait(timeout=remaining)
            finally:
                self._flushing -= 1
            results = list(self._results)
            self._results.clear()
        return results

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the worker thread."""
        if self._thread is not None:
            self.flush(timeout=timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
