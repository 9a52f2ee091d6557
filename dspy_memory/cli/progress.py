"""A progress bar on stderr (tqdm) for the commands that run long: counts, rate and ETA, while
stdout keeps only the result (so `--json` stays parseable). `--quiet` turns it off."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dspy_memory.util.progress import OnProgress, Progress


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar on stderr (errors are still printed)"
    )


@contextmanager
def progress_bar(args: argparse.Namespace, description: str) -> Iterator[OnProgress | None]:
    """An `on_progress` callback that draws a bar on stderr, or None under --quiet. The bar is
    closed (its last state left on stderr) when the block ends, also on Ctrl-C."""
    if getattr(args, "quiet", False):
        yield None
        return
    from tqdm import tqdm

    bar: Any = None

    def on_progress(progress: Progress) -> None:
        nonlocal bar
        if bar is None:
            in_bytes = progress.unit == "bytes"
            bar = tqdm(
                total=progress.total,
                desc=description,
                unit="B" if in_bytes else f" {progress.unit}",
                unit_scale=in_bytes,
                unit_divisor=1024 if in_bytes else 1000,
                file=sys.stderr,
                mininterval=0.5,
                dynamic_ncols=True,
            )
        if progress.total is not None and bar.total != progress.total:
            bar.total = progress.total
        bar.update(progress.done - bar.n)
        if progress.counts:
            bar.set_postfix(progress.counts, refresh=False)

    try:
        yield on_progress
    finally:
        if bar is not None:
            bar.close()
