"""Tables, JSON and charts shared by the eval and benchmark scripts."""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table (also valid Markdown)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [
        max(len(str(h)), *(len(row[i]) for row in cells)) if cells else len(str(h))
        for i, h in enumerate(headers)
    ]
    line = lambda values: "| " + " | ".join(str(v).ljust(w) for v, w in zip(values, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_json(path: str | Path, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1])


def bar_chart(
    path: str | Path,
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    log: bool = False,
) -> Path:
    """Grouped bars: one group per label in `groups`, one bar per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(groups) + 2), 4))
    width = 0.8 / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        positions = [g + index * width - 0.4 + width / 2 for g in range(len(groups))]
        bars = ax.bar(positions, values, width, label=name)
        ax.bar_label(bars, fmt="%.2f" if not log else "%.3g", fontsize=7)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        from matplotlib.ticker import ScalarFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def progress(items: Any, *, total: int | None = None, desc: str = "") -> Any:
    """A progress bar on stderr (tqdm, a DSPy dependency) around an iterable."""
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, leave=False, dynamic_ncols=True)


def stage(message: str) -> None:
    """One line on stderr saying what a long run is doing now (the tables go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_line(module: str, argv: Sequence[str] | None = None) -> str:
    """The command that reruns a runner: `python -m MODULE ARGS` (argv as given to its main,
    else this process's arguments)."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def markdown_report(
    results: Any, *, title: str, text: str, plot: str | Path, out: str | Path, command: str, lm: Any
) -> str:
    """The report as Markdown: the tables as printed, the chart, and what produced them."""
    about = results.get("machine") if isinstance(results, dict) else None
    about = about or machine()
    lines = [f"# {title}", ""]
    if text.strip():
        lines += [text.strip(), ""]
    lines += [
        f"![{title}]({Path(os.path.relpath(plot, Path(out).parent)).as_posix()})",
        "",
        f"- command: `{command}`",
        f"- LM: {lm or 'none'}",
        f"- machine: Python {about.get('python')} on {about.get('platform')}, {about.get('cpus')} CPUs",
        f"- run at: {about.get('when')}",
        f"- all numbers: {Path(out).name}",
        "",
    ]
    return "\n".join(lines)


def save(
    results: Any,
    *,
    out: str | Path,
    plot: str | Path,
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    title: str,
    ylabel: str,
    text: str = "",
    command: str | None = None,
    lm: Any = None,
) -> None:
    """What every runner ends with: the JSON, the chart, a Markdown report next to the JSON
    (`text`, the tables as printed; the command; the machine; the LM, else `results["lm"]`),
    and where they went."""
    write_json(out, results)
    bar_chart(plot, groups, series, title=title, ylabel=ylabel)
    if lm is None and isinstance(results, dict):
        lm = results.get("lm")
    report = Path(out).with_suffix(".md")
    report.write_text(
        markdown_report(
            results,
            title=title,
            text=text,
            plot=plot,
            out=out,
            command=command or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            lm=lm,
        ),
        encoding="utf-8",
    )
    print(f"\nwrote {out}, {report} and {plot}")
