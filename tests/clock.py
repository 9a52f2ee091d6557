"""The library's clock (`dspy_memory.util.timeutil.set_clock`), moved by a test: `clock` is a
fixture to import into a test module (`from .clock import START, clock_fixture`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory.util.timeutil import set_clock

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class Clock:
    """Now is `START` until the test moves it with `advance(hours=..., days=...)`."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture(name="clock")
def clock_fixture():
    moved = Clock()
    set_clock(moved)
    yield moved
    set_clock(None)
