"""HNSW block builds off the writer's call path: one worker thread per store, with its own pooled
connection, builds the blocks that writes filled (store/postgres/hnsw_blocks.py, `Blocks.build`).

A write that fills a block asks for its partition's build once it has committed and returns;
the build (~7 s for a block of 20,000 384-dimension vectors here, 35 s of the 95 s it took to
add 100k memories in one scope) runs meanwhile. Until it is done the block's index is missing or
not valid, so searches scan its rows exactly, as they scan the tail: slower, never wrong. The
build keeps its discipline: the partition's session advisory lock (two processes never both
build), CREATE INDEX CONCURRENTLY (writers and readers never wait for it), and an index a failed
or cancelled build left invalid is dropped and built again by the next build of the partition
(the next write to it, or the next opening of the store).

Closing waits for the builds asked for up to `close_wait_s`, then cancels the one running and
drops the rest: what is left unbuilt is built by the next write to the partition or the next
opening. `wait` waits for every build asked for so far (the bench, tests).

The same worker refreshes the planner's statistics of the write path's tables as the store grows
(`wrote`, STATISTICS_TABLES below): like a build, work a write asks for and need not wait for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from dspy_memory.store.postgres.hnsw_blocks import Blocks

logger = logging.getLogger("dspy_memory")

# How long closing a store waits for its block builds before it cancels them: about one block of
# 20,000 rows here, short enough for a service's shutdown.
CLOSE_WAIT_S = 10.0
_CANCEL_WAIT_S = 10.0  # for a cancelled build to stop
# The planner's statistics of the tables the write path reads, refreshed each time the store's
# vectors grow by half (from 1,000): psycopg prepares a statement after 5 runs, and the plan
# PostgreSQL then keeps was chosen for the table's size at that time. In a store filling from
# empty, the plans chosen at a few hundred rows scanned whole tables later on (adds fell from
# ~2,000 to ~400 per s over the first 20,000 memories), until autovacuum, a minute or more
# later, analyzed the tables (ANALYZE invalidates the plans that use them).
STATISTICS_MIN_ROWS = 1000
STATISTICS_TABLES = (
    "memories", "episodes", "memory_sources", "turn_context", "memory_vectors", "memory_terms",
    "memory_events", "vector_partitions",
)  # fmt: skip


class BackgroundBuilds:
    """The block builds asked for, run one at a time by a worker thread, in the order asked."""

    def __init__(self, blocks: Blocks, *, close_wait_s: float = CLOSE_WAIT_S) -> None:
        self._blocks = blocks
        self.close_wait_s = close_wait_s
        self._connect: Callable[[], AbstractContextManager[Any]] | None = None
        self._pending: dict[str | None, None] = {}  # partitions to build (None: statistics), in order
        self._written = 0  # vectors written since the statistics were last refreshed
        self._rows_then: int | None = None  # vectors the store held then (None: not read yet)
        self._building = False
        self._running: Any = None  # the raw connection of the build in progress
        self._closed = False
        self._changed = threading.Condition()
        self._worker: threading.Thread | None = None

    def start(self, connect: Callable[[], AbstractContextManager[Any]]) -> None:
        """`connect()`: a context giving a pooled connection (`.raw`: psycopg, autocommit)."""
        self._connect = connect

    def request(self, partition: str | None) -> None:
        """Build the blocks `partition`'s rows filled (None: refresh the tables' statistics), soon
        (after the write asking has committed)."""
        if self._connect is None:
            raise RuntimeError("BackgroundBuilds.start was not called")
        with self._changed:
            if self._closed:
                return
            self._pending[partition] = None
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="dspy-memory-hnsw-builds", daemon=True
                )
                self._worker.start()
            self._changed.notify_all()

    def wrote(self, raw: Any, rows: int) -> bool:
        """Count `rows` vectors written (inside the write); True when the store has grown by half
        since its statistics were last refreshed here, and the write should ask for them
        (`request(None)` once it has committed)."""
        with self._changed:
            if self._rows_then is None:
                self._rows_then = _vector_count(raw)
            self._written += rows
            if self._written < max(STATISTICS_MIN_ROWS, self._rows_then // 2):
                return False
            self._rows_then += self._written
            self._written = 0
            return True

    def _work(self) -> None:
        assert self._connect is not None
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                partition = next(iter(self._pending))
                del self._pending[partition]
                self._building = True
            try:
                with self._connect() as conn:
                    with self._changed:
                        self._running = conn.raw
                    if partition is None:
                        self._blocks.safely("analyzed", _analyze, conn.raw)
                    else:
                        self._blocks.safely("built", self._blocks.build, conn.raw, partition)
            except Exception as exc:  # the store closed, or the server went away: a later write retries
                logger.warning(
                    "an HNSW block build was not run (%s); the next write to the partition asks again", exc
                )
            finally:
                with self._changed:
                    self._running = None
                    self._building = False
                    self._changed.notify_all()

    def pending(self) -> bool:
        """Whether a build was asked for and has not finished."""
        with self._changed:
            return bool(self._pending) or self._building

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every build asked for has finished (built, or failed and logged); False if
        `timeout` seconds passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._building, timeout)

    def close(self) -> None:
        """Wait up to `close_wait_s` for the builds asked for, then cancel the one running (its
        index is left invalid, rebuilt later) and drop the rest."""
        finished = self.wait(self.close_wait_s)
        with self._changed:
            self._closed = True
            dropped = list(self._pending)
            self._pending.clear()
            running = self._running
            self._changed.notify_all()
        if not finished:
            logger.warning(
                "closing with HNSW block builds unfinished (partitions waiting: %d); the next write to "
                "each partition or the next opening of the store builds them",
                len(dropped) + (running is not None),
            )
        if running is not None:
            try:
                running.cancel_safe(timeout=5.0)
            except Exception:  # pragma: no cover - the connection is gone already
                pass
        if self._worker is not None:
            self._worker.join(timeout=_CANCEL_WAIT_S)


def _vector_count(raw: Any) -> int:
    return int(raw.execute("SELECT coalesce(sum(row_count), 0) FROM vector_partitions").fetchone()[0])


def _analyze(raw: Any) -> None:
    raw.execute(f"ANALYZE {', '.join(STATISTICS_TABLES)}")
