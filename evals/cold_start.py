"""What a cold `dspy-memory search` costs, and where: a fresh process per run, on an existing
file of N memories (built once, raw mode, with the local embedder).

    python -m evals.cold_start --db /tmp/cold10k.db --memories 10000 --runs 5

Each run is a new Python process, so every import and the model load are paid again (the OS
page cache stays warm: run it twice and read the second table for a warm-disk figure). The
stages are measured in separate fresh processes: `import` (the CLI's modules), `load` (the
embedder's model), `encode` (the first query vector), and the whole `search` command.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evals.report import command_line, save, table

TOPICS = (
    "hiking in the Rockies",
    "a new job at the bakery",
    "her sister's wedding",
    "learning the cello",
    "the broken dishwasher",
    "a trip to Lisbon",
    "adopting a rescue dog",
    "training for a marathon",
    "the book club",
    "moving to Denver",
    "a pottery class",
    "the garden tomatoes",
    "night shifts",
    "a camping weekend",
    "the vintage bike",
    "volunteering at the shelter",
    "a painting of a lake",
)
PEOPLE = ("Ada", "Ben", "Caro", "Dev", "Emi", "Finn", "Gus", "Hana", "Ivo", "Jules")

# Each stage runs in its own fresh interpreter; the last line it prints is its own timing.
STAGES = {
    "import": "import time; t=time.perf_counter(); import dspy_memory.cli; print(time.perf_counter()-t)",
    "load": (
        "import time; from dspy_memory.embed import make_embedder; e=make_embedder('local'); "
        "t=time.perf_counter(); e._load(); print(time.perf_counter()-t)"
    ),
    "encode": (
        "import time; from dspy_memory.embed import make_embedder; e=make_embedder('local'); e._load(); "
        "t=time.perf_counter(); e.embed_query('where does ada live now?'); print(time.perf_counter()-t)"
    ),
}


def synthetic_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(PEOPLE)} talked about {rng.choice(TOPICS)} with {rng.choice(PEOPLE)} "
        f"on day {rng.randint(1, 900)} (note {i})."
        for i in range(n)
    ]


def build(db: Path, memories: int, *, batch: int = 250) -> float:
    from dspy_memory import Memory

    started = time.perf_counter()
    texts = synthetic_texts(memories)
    with Memory(str(db), embedder="local") as memory:
        have = memory.stats()["current_memories"]
        for start in range(have, memories, batch):
            memory.add(
                texts[start : start + batch], user_id=PEOPLE[(start // batch) % len(PEOPLE)], infer=False
            )
            print(f"built {min(start + batch, memories):,}/{memories:,}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return time.perf_counter() - started


def _timed(argv: list[str], backend: str) -> tuple[float, str, str]:
    env = {**os.environ, "DSPY_MEMORY_LOCAL_BACKEND": backend}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed, done.stdout, done.stderr


def measure(db: Path, runs: int, backends: list[str]) -> dict[str, Any]:
    """Seconds per stage and backend; the backends take turns, run by run, so both see the
    same machine load."""
    search = [sys.executable, "-m", "dspy_memory.cli", "search", "where does Ada go hiking"]
    search += ["--db", str(db), "--user", "Ada", "-k", "5"]
    seconds: dict[str, dict[str, list[float]]] = {b: {s: [] for s in ["search", *STAGES]} for b in backends}
    stderr_lines = dict.fromkeys(backends, 0)
    for _ in range(runs):
        for backend in backends:
            elapsed, _out, err = _timed(search, backend)
            seconds[backend]["search"].append(elapsed)
            stderr_lines[backend] = max(stderr_lines[backend], len(err.splitlines()))
            for stage, code in STAGES.items():
                printed = _timed([sys.executable, "-c", code], backend)[1]
                seconds[backend][stage].append(float(printed.strip().splitlines()[-1]))
    return {
        "seconds": seconds,
        "median_s": {
            b: {s: statistics.median(v) for s, v in stages.items()} for b, stages in seconds.items()
        },
        "stderr_lines_of_search": stderr_lines,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.cold_start", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--db", type=Path, default=Path("cold_start.db"), help="the memory file (built if missing)"
    )
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the file (default 10,000)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per measurement (default 5)")
    parser.add_argument(
        "--backends",
        default="numpy,sentence-transformers",
        help="local embedder backends to compare, comma-separated (default numpy,sentence-transformers)",
    )
    parser.add_argument(
        "--out", default="results/cold_start.json", help="where the JSON goes (Markdown and PNG next to it)"
    )
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    built = None
    if not args.db.exists() or _current(args.db) < args.memories:
        built = build(args.db, args.memories)
    report = measure(args.db, args.runs, backends)
    report.update(
        db=str(args.db),
        memories=_current(args.db),
        build_s=built,
        python=sys.version.split()[0],
        cpus=os.cpu_count(),
    )
    stages = ["search", *STAGES]
    rows = [
        [stage, *(f"{report['median_s'][b][stage]:.2f}" for b in backends)]
        + (
            [f"x{report['median_s'][backends[1]][stage] / report['median_s'][backends[0]][stage]:.1f}"]
            if len(backends) == 2
            else []
        )
        for stage in stages
    ]
    rows.append(
        ["stderr lines of one search", *(str(report["stderr_lines_of_search"][b]) for b in backends)]
        + ([""] if len(backends) == 2 else [])
    )
    headers = ["stage (fresh process), median s", *backends] + (
        [f"{backends[1]} / {backends[0]}"] if len(backends) == 2 else []
    )
    text = table(headers, rows)
    print(text)
    save(
        report,
        out=args.out,
        plot=str(Path(args.out).with_suffix(".png")),
        groups=stages,
        series={b: [report["median_s"][b][stage] for stage in stages] for b in backends},
        title=f"Cold dspy-memory search on {report['memories']:,} memories",
        ylabel="seconds, median of fresh processes",
        text=text,
        command=command_line("evals.cold_start", argv),
    )


def _current(db: Path) -> int:
    from dspy_memory import Memory

    with Memory(str(db)) as memory:
        return int(memory.stats()["current_memories"])


if __name__ == "__main__":
    main()
