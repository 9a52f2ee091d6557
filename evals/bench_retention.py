"""Retention benchmark: what erasing what expired costs `maintain()`, and what the expiry
filter costs a search, on SQLite and PostgreSQL.

    python -m evals.bench_retention                           # 10k memories, 10% expire, both backends
    python -m evals.bench_retention --size 2000 --backend sqlite

Each configuration fills a store with `--size` raw turns in `--users` users (hash vectors: the
embedder is not what is measured), a share of them (`--expiring`) added with `expires_in`. Then,
on the library's clock moved past the expiry (`set_clock`):
- search p50 of the keyword and hybrid recipes with every expiry passed and not erased yet
  (the reads filter them) against the same searches before the expiry;
- one `maintain()` that erases them all: its duration, which is one write transaction (writers
  wait for it), and the counts it reports;
- search p50 again, after the erasure.
Prints a table, writes JSON and a bar chart (evals/results/bench_retention.*).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from dspy_memory.embed import HashEmbedder
from dspy_memory.util.timeutil import set_clock
from evals.bench_backends import Places, postgres_server
from evals.report import RESULTS_DIR, bar_chart, machine, table, write_json

WORDS = "garden kettle ticket harbor violin pepper lantern saddle orbit copper meadow quartz".split()
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def fill(memory: Any, size: int, users: int, expiring: float, rng: random.Random) -> int:
    """`size` raw turns across `users`, a share of them expiring in an hour; returns how many."""
    expiring_count = 0
    for user in range(users):
        texts = [
            f"note {i} of user {user}: " + " ".join(rng.choices(WORDS, k=6)) for i in range(size // users)
        ]
        cut = int(len(texts) * expiring)
        memory.add(texts[cut:], user_id=f"u{user}", infer=False)
        if cut:
            memory.add(texts[:cut], user_id=f"u{user}", infer=False, expires_in="1h")
        expiring_count += cut
    return expiring_count


def search_p50(memory: Any, users: int, recipe: str, queries: int, rng: random.Random) -> float:
    times = []
    for _ in range(queries):
        query, user = " ".join(rng.choices(WORDS, k=2)), f"u{rng.randrange(users)}"
        start = time.perf_counter()
        memory.search(query, user_id=user, recipe=recipe, k=10)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(places: Places, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    now = [START]
    set_clock(lambda: now[0])
    location = places.location(backend, f"retention_{args.size}")
    rng = random.Random(args.seed)
    try:
        with places.open(location, HashEmbedder(64)) as memory:
            started = time.perf_counter()
            expiring = fill(memory, args.size, args.users, args.expiring, rng)
            load_s = time.perf_counter() - started
            places.settle(backend, location)
            result: dict[str, Any] = {
                "backend": backend,
                "size": args.size,
                "expiring": expiring,
                "load_s": load_s,
            }
            for recipe in ("keyword", "hybrid"):
                result[f"{recipe} p50 ms, before expiry"] = search_p50(
                    memory, args.users, recipe, args.queries, rng
                )
            now[0] += timedelta(hours=2)
            for recipe in ("keyword", "hybrid"):
                result[f"{recipe} p50 ms, expired, not erased"] = search_p50(
                    memory, args.users, recipe, args.queries, rng
                )
            started = time.perf_counter()
            report = memory.maintain(all_scopes=True)
            result["maintain s"] = time.perf_counter() - started
            result["erased"] = report.erased
            places.settle(backend, location)
            for recipe in ("keyword", "hybrid"):
                result[f"{recipe} p50 ms, erased"] = search_p50(memory, args.users, recipe, args.queries, rng)
            result["left"] = memory.stats()["tables"]["memories"]
        return result
    finally:
        set_clock(None)
        places.drop(backend, location)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres-url", default=None, help="default: start one with pgserver")
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--expiring", type=float, default=0.1, help="the share added with an expiry")
    parser.add_argument("--queries", type=int, default=200, help="searches per recipe and moment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_retention.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_retention.png"))
    args = parser.parse_args(argv)
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp,
        postgres_server(args.postgres_url, backends) as (url, server),
    ):
        places = Places(tmp, url)
        for backend in backends:
            results.append(measure(places, backend, args))
    moments = ("before expiry", "expired, not erased", "erased")
    print(f"\nRetention: {args.size} memories in {args.users} users, {args.expiring:.0%} expiring\n")
    print(
        table(
            [
                "backend",
                "expiring",
                "maintain s",
                "memory rows erased",
                "left",
                *(f"hybrid p50 ms, {m}" for m in moments),
            ],
            [
                [r["backend"], r["expiring"], r["maintain s"], r["erased"].get("memories", 0), r["left"]]
                + [r[f"hybrid p50 ms, {m}"] for m in moments]
                for r in results
            ],
        )
    )
    print()
    print(
        table(
            ["backend", *(f"keyword p50 ms, {m}" for m in moments)],
            [[r["backend"], *(r[f"keyword p50 ms, {m}"] for m in moments)] for r in results],
        )
    )
    out = write_json(
        args.out, {"args": vars(args), "machine": machine(), "postgres": server, "results": results}
    )
    plot = bar_chart(
        args.plot,
        [f"{r['backend']} {recipe}" for r in results for recipe in ("keyword", "hybrid")],
        {
            moment: [r[f"{recipe} p50 ms, {moment}"] for r in results for recipe in ("keyword", "hybrid")]
            for moment in moments
        },
        title=f"Search p50 around an expiry ({args.size} memories, {args.expiring:.0%} expiring)",
        ylabel="ms",
    )
    print(f"\nwrote {out} and {plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
