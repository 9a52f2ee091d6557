"""How long work reports how far it is: a `Progress` after each step, to a callback the caller
gives (`on_progress=`). The library never prints; the command line draws it as a bar on stderr
(cli/progress.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

ProgressUnit = Literal["bytes", "records", "episodes", "scopes", "rows"]


@dataclass(frozen=True)
class Progress:
    """`done` of `total` (None: not known yet) in `unit`, with running counts of what the work
    did so far (e.g. {"stored": 120, "already": 40}), for a bar's rate, ETA and postfix."""

    done: int
    total: int | None
    unit: ProgressUnit
    counts: Mapping[str, int] = field(default_factory=dict)


OnProgress = Callable[[Progress], None]


def report(
    on_progress: OnProgress | None, done: int, total: int | None, unit: ProgressUnit, **counts: int
) -> None:
    """Tell `on_progress`, if there is one."""
    if on_progress is not None:
        on_progress(Progress(done, total, unit, counts))
