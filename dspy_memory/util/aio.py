"""The async API's engine (docs/async.md): every `await memory.a<method>(...)` is the sync method
run by `Workers`, so there is one implementation of each behaviour and no twin class.

A call runs in a bounded pool of worker threads, so store work (SQLite, PostgreSQL, the
embedder) never blocks the event loop. The LM calls it makes (all of them go through
`util.lm.run_program`) are sent back to the loop and awaited there through DSPy's async path
(`program.acall`): LiteLLM's async client, async engines, `aforward` overrides. The worker waits
for that answer; the loop stays free for every other task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from dspy_memory.errors import LMUnavailableError, MemoryClosedError

# An LM request that cannot finish on the caller's loop fails like an unreachable LM: the write
# path keeps its episodes for a retry (on the sync path once the loop is gone) or reprocess().
_CANCELLED = "the LM request was cancelled: the awaitable call's event loop cancelled it or closed"
_LOOP_CHECK_S = 1.0  # how often a worker waiting for its LM answer checks that the loop is alive
P = ParamSpec("P")
R = TypeVar("R")

# Set inside a worker running an awaitable call: the loop that awaits it, where LM calls go.
_CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "dspy_memory_caller_loop", default=None
)


class Workers:
    """A bounded pool of threads for the awaitable API of one Memory. `size` bounds how many
    calls run at once (each holds a thread while it waits for its LM answer on the loop);
    further calls wait their turn without blocking the loop."""

    def __init__(self, size: int, name: str = "dspy-memory") -> None:
        self.size = size
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise MemoryClosedError("this Memory is closed; open a new one to go on")
            if self._pool is None:  # threads only for programs that use the async API
                self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix=self._name)
            return self._pool

    async def run(self, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`function(*args, **kwargs)` in a worker, with the caller's context (DSPy settings,
        usage tracking, `acting_as`), its LM calls awaited on the caller's loop."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(_CALLER_LOOP.set, loop)
        call = functools.partial(context.run, function, *args, **kwargs)
        return await loop.run_in_executor(self._executor(), call)

    def close(self) -> None:
        """Wait for running calls, then refuse new ones. Closing twice is harmless."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class HasWorkers(Protocol):
    @property
    def workers(self) -> Workers: ...


S = TypeVar("S", bound=HasWorkers)


def awaitable(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The awaitable form of a sync method: `aadd = awaitable(add)` in a class body. Same
    parameters and docstring; run by the owner's `workers`."""

    @functools.wraps(method)
    async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.workers.run(method, self, *args, **kwargs)

    call.__name__ = "a" + method.__name__
    owner, _, _ = method.__qualname__.rpartition(".")
    call.__qualname__ = f"{owner}.{call.__name__}" if owner else call.__name__
    call.__doc__ = (
        f"Awaitable `{method.__name__}()`: the same call, run off the event loop.\n\n{method.__doc__ or ''}"
    )
    return call


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop an awaitable call came from, when this thread runs one for it (and the
    loop is another thread's: a coroutine on the loop itself must not wait on the loop)."""
    loop = _CALLER_LOOP.get()
    if loop is None or loop.is_closed():
        return None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    return None if running is loop else loop


def wait_on_loop(
    loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[R]], timeout_s: float | None = None
) -> R:
    """Run `make()` on `loop` in this thread's context (DSPy's settings live in context
    variables) and wait here for its result; `timeout_s` cancels it and raises TimeoutError."""
    context = contextvars.copy_context()
    done: Future[R] = Future()

    async def awaited() -> R:
        if timeout_s is None:
            return await make()
        return await asyncio.wait_for(make(), timeout_s)

    def start() -> None:
        # Made inside `context.run`, the task runs in a copy of this thread's context.
        task = context.run(loop.create_task, awaited())

        def settle(finished: asyncio.Task[R]) -> None:
            if finished.cancelled():
                done.set_exception(LMUnavailableError(_CANCELLED))
            elif finished.exception() is not None:
                done.set_exception(finished.exception())
            else:
                done.set_result(finished.result())

        task.add_done_callback(settle)

    try:
        loop.call_soon_threadsafe(start)
    except RuntimeError as exc:  # the loop closed while this call ran
        raise LMUnavailableError(_CANCELLED) from exc
    while True:
        try:
            return done.result(timeout=_LOOP_CHECK_S)
        except concurrent.futures.TimeoutError:
            # A loop closed after taking the request never runs it: give up rather than hold
            # this worker (and `Memory.close()`) for ever.
            if loop.is_closed():
                raise LMUnavailableError(_CANCELLED) from None


def on_caller_loop(lm: Any) -> Any:
    """`lm`, or inside an awaitable call, a copy of it whose requests are sent with DSPy's async
    path (`lm.acall`) on the caller's loop while the program around them (its adapter's
    formatting and parsing, retries) runs on in the worker. An LM with no async path (a
    `dspy.BaseLM` without `aforward`) is called as it is, in the worker."""
    import dspy

    if caller_loop() is None or not isinstance(lm, dspy.BaseLM):
        return lm
    if type(lm).aforward is dspy.BaseLM.aforward:
        return lm
    bridged = copy.copy(lm)
    bridged.__class__ = _awaited_on_loop(type(lm))
    return bridged


_ON_LOOP_CLASSES: dict[type[Any], type[Any]] = {}


def _awaited_on_loop(lm_class: type[Any]) -> type[Any]:
    """A subclass of `lm_class` whose calls are its `acall`, awaited on the caller's loop. Made
    once per class: the copy keeps every attribute, type check and setting of the original."""
    if lm_class in _ON_LOOP_CLASSES:
        return _ON_LOOP_CLASSES[lm_class]

    def __call__(self: Any, prompt: Any = None, **kwargs: Any) -> Any:
        loop = caller_loop()
        if loop is None:  # e.g. the program handed the LM to a thread of its own
            return lm_class.__call__(self, prompt, **kwargs)
        return wait_on_loop(loop, lambda: lm_class.acall(self, prompt, **kwargs))

    made = type(lm_class.__name__, (lm_class,), {"__call__": __call__, "__module__": lm_class.__module__})
    return _ON_LOOP_CLASSES.setdefault(lm_class, made)  # two threads may race: one class wins
