"""Chaos: integrity of one memory file under kill -9, concurrent processes and LM failures.

    python -m evals.chaos [--seconds 60] [--writers 4] [--searchers 2] [--seed 0]

W writer processes and S searcher processes share ONE SQLite file (hash test embedder, no
model). Writers add messages through the LM write path with a scripted, careful LM that fails
on purpose (exceptions, garbage, truncated JSON, answers slower than `write.lm_timeout_s`).
Every writer moves the same few users ("I moved to <city>. I live in <city> now."), so they race
on one slot (user, lives_in), and every message carries a unique token (the city, or "My locker
code is K..."), so each acknowledged message can be looked for. A writer appends what `add()`
acknowledged to its own log (fsync per line) before it counts. Searchers check that every hit
belongs to the searched user. The parent SIGKILLs a random child at random intervals and starts
a replacement. Then a recovery `Memory` (same LM, no failures) flushes and reprocesses until
nothing is unfinished, and the file is checked against the writers' logs with SQL of its own
(`Memory.check()` is reported as a cross-check). docs/benchmarks.md ("Chaos") explains each
number. Exit status 1 unless lost, duplicated, stuck, scope violations and sample misses are 0
and SQLite's integrity check passes. Children run this module with --role.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.chaos_check import read_logs, recover, verify
from evals.chaos_processes import open_memory, searcher, writer
from evals.report import RESULTS_DIR, machine, percentile, save, table

ROOT = Path(__file__).resolve().parent.parent
BUCKETS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500)  # latency histogram edges, ms
MUST_BE_ZERO = ("lost", "duplicated", "stuck", "scope_violations", "search_sample_misses")


# -- the parent: start, kill, replace --------------------------------------------------------------


class Children:
    """The child processes, by slot ("writer0", ...); each start is a new incarnation with its own
    log ("writer0.3.jsonl") and seed."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.running: dict[str, tuple[str, subprocess.Popen]] = {}  # slot -> (incarnation, process)
        self.started = Counter()
        self.kills = Counter()
        self.unexpected: list[dict[str, Any]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DSPY_CACHEDIR": str(work / "dspy-cache"),
        }

    def start(self, slot: str) -> None:
        role = slot.rstrip("0123456789")
        n = sum(self.started.values())
        self.started[role] += 1
        name = f"{slot}.{self.started[role]}"
        a = self.args
        options = {
            "--role": role,
            "--db": self.work / "memory.db",
            "--log": self.work / f"{name}.jsonl",
            "--stop": self.work / "stop",
            "--seed": a.seed * 1000 + n,
            "--users": a.users,
            "--lm-timeout": a.lm_timeout,
            "--fault-rate": a.fault_rate,
            "--grace": a.grace,
            "--lm-dates": a.lm_dates,
            "--search-pause": a.search_pause,
        }
        cmd = [sys.executable, "-m", "evals.chaos", *(x for o, v in options.items() for x in (o, str(v)))]
        with open(self.work / f"{name}.stderr", "w") as err:
            process = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        self.running[slot] = (name, process)

    def kill(self, slot: str) -> None:
        name, process = self.running[slot]
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            self.kills[slot.rstrip("0123456789")] += 1
        else:  # it had ended on its own
            self.unexpected.append({"child": name, "returncode": process.returncode})
        process.wait()
        self.start(slot)

    def reap(self) -> None:
        """Restart children that ended on their own (a crash): they are reported."""
        for slot, (name, process) in list(self.running.items()):
            if process.poll() is not None:
                self.unexpected.append({"child": name, "returncode": process.returncode})
                self.start(slot)

    def stop(self, timeout: float) -> int:
        (self.work / "stop").touch()
        deadline, killed = time.monotonic() + timeout, 0
        for name, process in self.running.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                killed += 1
            if process.returncode not in (0, -signal.SIGKILL):
                self.unexpected.append({"child": name, "returncode": process.returncode})
        return killed


def _kill_until(children: Children, rng: random.Random, args: argparse.Namespace, start: float) -> None:
    """Until `args.seconds` have passed: SIGKILL a random child (writers 4 times in 5) at random
    intervals and start its replacement; restart children that died on their own."""
    next_kill = start + rng.uniform(0.5, 1.5) * args.kill_every
    while (now := time.monotonic()) < start + args.seconds:
        children.reap()
        if now >= next_kill:
            writers = [s for s in children.running if s.startswith("writer")]
            searchers = [s for s in children.running if s.startswith("searcher")]
            pool = writers if not searchers or rng.random() < 0.8 else searchers
            children.kill(rng.choice(pool))
            next_kill = now + rng.uniform(0.5, 1.5) * args.kill_every
        time.sleep(0.02)


def chaos(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    open_memory(str(work / "memory.db")).close()  # the file exists before anyone races to create it
    children, rng = Children(args, work), random.Random(args.seed)
    for slot in [f"writer{i}" for i in range(args.writers)] + [f"searcher{i}" for i in range(args.searchers)]:
        children.start(slot)
    start = time.monotonic()
    try:
        _kill_until(children, rng, args, start)
    except BaseException:
        children.stop(0)  # an interrupted run leaves no children behind
        raise
    killed_at_stop = children.stop(args.lm_timeout * 2 + 8)
    return {
        "seconds": time.monotonic() - start,
        "kills": dict(children.kills),
        "started": dict(children.started),
        "killed_at_stop": killed_at_stop,
        "unexpected_exits": children.unexpected,
    }


# -- the run ---------------------------------------------------------------------------------------


def histogram(values: list[float]) -> list[float]:
    edges = [0, *BUCKETS, float("inf")]
    counts = [sum(lo <= v < hi for v in values) for lo, hi in zip(edges, edges[1:])]
    return [100 * c / max(1, len(values)) for c in counts]


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    run_info = chaos(args, work)
    logs = read_logs(work)
    memory, recovery = recover(str(work / "memory.db"))
    try:
        found = verify(memory, logs, seed=args.seed)
        audit = memory.check() if hasattr(memory, "check") else None
    finally:
        memory.close()
    add_ms = [ack["ms"] for ack in logs["acks"]]
    results = {
        "machine": machine(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("role", "out", "plot")},
        **run_info,
        **found,
        "errors": {
            "writers": dict(logs["add_errors"]),
            "searchers": dict(logs["search_errors"]),
            "recovery": dict(recovery["errors"]),
            "unexpected exits": len(run_info["unexpected_exits"]),
        },
        "lm_faults_injected": dict(logs["faults"]),
        "adds_degraded": dict(logs["degraded"]),
        "recovery": {k: v for k, v in recovery.items() if k != "errors"},
        "add_ms": {"p50": percentile(add_ms, 50), "p99": percentile(add_ms, 99), "n": len(add_ms)},
        "search_ms": {
            "p50": percentile(logs["search_ms"], 50),
            "p99": percentile(logs["search_ms"], 99),
            "n": logs["searches"],
        },
        "latency_histogram": {"add": histogram(add_ms), "search": histogram(logs["search_ms"])},
        "torn_log_lines": logs["torn_lines"],
        "audit": audit.model_dump() if audit is not None else None,
        "audit_ok": getattr(audit, "ok", None),
        "workdir": str(work),
    }
    results["ok"] = all(results[key] == 0 for key in MUST_BE_ZERO) and results["integrity"] == "ok"
    if results["ok"] and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(r: dict[str, Any]) -> str:
    def counts(d: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items() if v) or "none"

    errors = "; ".join(f"{k}: {counts(v) if isinstance(v, dict) else v}" for k, v in r["errors"].items())
    rows = [
        ["writes acknowledged", f"{r['acknowledged_adds']} adds, {r['acknowledged_messages']} messages", ""],
        ["lost", f"{r['lost']} ({counts(r['lost_reasons'])})", "0"],
        ["duplicated current facts", f"{r['duplicated']} ({counts(r['duplicates'])})", "0"],
        [
            "episodes stuck after recovery",
            f"{r['stuck']} of {sum(r['episodes'].values())} "
            f"(recovery: {r['recovery']['rounds']} rounds, {r['recovery']['seconds']:.1f} s)",
            "0",
        ],
        ["scope violations", f"{r['scope_violations']} ({counts(r['scope'])})", "0"],
        ["integrity_check", r["integrity"], "ok"],
        ["Memory.check()", {True: "ok", False: "NOT ok", None: "n/a"}[r["audit_ok"]], ""],
        ["kills (SIGKILL)", f"{counts(r['kills'])}; at stop {r['killed_at_stop']}", ""],
        ["episodes never acknowledged", f"{r['unacknowledged_episodes']} (add cut short by a kill)", ""],
        ["errors by type", errors, ""],
        ["LM faults injected", counts(r["lm_faults_injected"]), ""],
        ["adds kept raw (LM failure)", counts(r["adds_degraded"]), ""],
        ["sample not found by search/timeline", f"{r['search_sample_misses']} of {r['search_sample']}", "0"],
        ["lives_in slots", counts(r["slots"]), ""],
        [
            "moves decided without the home in view",
            f"{r['moves_without_home_in_view']} of {r['move_calls']} LM calls with a move",
            "",
        ],
        ["add p50 / p99 ms", f"{r['add_ms']['p50']:.1f} / {r['add_ms']['p99']:.1f}", ""],
        [
            "search p50 / p99 ms",
            f"{r['search_ms']['p50']:.1f} / {r['search_ms']['p99']:.1f} ({r['search_ms']['n']} searches)",
            "",
        ],
    ]
    return table(["check", "result", "must be"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long writers run and get killed")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument("--users", type=int, default=3, help="users shared by every writer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--fault-rate", type=float, default=0.12, help="share of LM calls that fail")
    parser.add_argument("--lm-timeout", type=float, default=2.0, help="write.lm_timeout_s of the writers")
    parser.add_argument(
        "--lm-dates",
        choices=("none", "day"),
        default="none",
        help="day: the LM dates facts with the turn's day (YYYY-MM-DD)",
    )
    parser.add_argument("--grace", type=float, default=2.0, help="pending_grace_seconds of writers")
    parser.add_argument("--search-pause", type=float, default=0.01)
    parser.add_argument("--workdir", default=None, help="keep the file and logs here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (always kept on failure)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "chaos.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "chaos.png"))
    parser.add_argument("--role", choices=("writer", "searcher"), help=argparse.SUPPRESS)
    for name in ("--db", "--log", "--stop"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        (writer if args.role == "writer" else searcher)(args)
        return {}
    results = run(args)
    shown = "\n\n".join(
        [
            f"Chaos: {args.writers} writers, {args.searchers} searchers, {results['seconds']:.0f} s, seed {args.seed}",
            report(results),
            "OK: every invariant held"
            if results["ok"]
            else f"FAILED (file and logs kept in {results['workdir']})",
        ]
    )
    print(shown)
    groups = [f"<{b}" for b in BUCKETS] + [f">={BUCKETS[-1]}"]
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=groups,
        series=results["latency_histogram"],
        title="Latency under chaos: share of calls per bucket (ms)",
        ylabel="% of calls",
        text=shown,
    )
    return results


if __name__ == "__main__":
    sys.exit(0 if main().get("ok", True) else 1)
