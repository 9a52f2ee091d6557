"""What evals/bench_store.py needs besides the measurements: the vector cache, and the two store
backends it runs side by side (a SQLite file per configuration; a PostgreSQL schema per
configuration on one server, started with pgserver unless --postgres-url names one)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from dspy_memory.embed.base import BatchedEmbedder

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
BACKENDS = ("sqlite", "postgres")


def embed_all(texts: list[str], model: BatchedEmbedder) -> np.ndarray:
    """`texts` embedded by `model`, through a cache per model in evals/.cache/ keyed by text: a
    run embeds only texts no earlier run did (the synthetic corpus is prefix-stable, so the
    100k run's vectors serve every smaller --sizes)."""
    stem = CACHE_DIR / f"texts-{hashlib.sha256(model.name.encode()).hexdigest()[:16]}"
    known: list[str] = (
        json.loads(stem.with_suffix(".json").read_text()) if stem.with_suffix(".json").exists() else []
    )
    stored = np.load(stem.with_suffix(".npy")) if known else np.zeros((0, model.dim), np.float32)
    index = {text: i for i, text in enumerate(known)}
    missing = list(dict.fromkeys(text for text in texts if text not in index))
    if missing:
        print(f"embedding {len(missing)} texts with {model.name} (cached for later runs) ...", flush=True)
        start, chunks = time.perf_counter(), []
        for offset in range(0, len(missing), 5000):
            chunks.append(model.embed(missing[offset : offset + 5000]).astype(np.float32))
            done = offset + len(chunks[-1])
            print(f"  {done}/{len(missing)} ({done / (time.perf_counter() - start):.0f}/s)", flush=True)
        stored = np.concatenate([stored, *chunks])
        known += missing
        index.update((text, len(known) - len(missing) + i) for i, text in enumerate(missing))
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        np.save(stem.with_suffix(".npy"), stored)
        stem.with_suffix(".json").write_text(json.dumps(known), encoding="utf-8")
    return stored[[index[text] for text in texts]]


def with_search_path(url: str, schema: str) -> str:
    """`url` with its tables in `schema` (pgvector's type stays reachable through public)."""
    option = quote(f"-csearch_path={schema},public")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


class Places:
    """Where each configuration's store lives: `location(backend, name)` is a SQLite file in
    `tmp` or a URL of a fresh PostgreSQL schema; `size_mb` what it takes on disk."""

    def __init__(self, tmp: str, postgres_url: str | None, postgres: dict[str, Any] | None = None) -> None:
        self.tmp = Path(tmp)
        self.url = postgres_url
        self.postgres = postgres or {}  # PostgresConfig settings, e.g. {"partitions": 16}
        self.schema_of: dict[str, str] = {}

    def open(self, location: str, embedder: Any) -> Any:
        """A Memory at `location` (with the PostgreSQL settings when it is a schema URL)."""
        from dspy_memory import Memory

        extra = {"postgres": self.postgres} if location in self.schema_of and self.postgres else {}
        return Memory(location, embedder=embedder, **extra)

    def location(self, backend: str, name: str) -> str:
        if backend == "sqlite":
            return str(self.tmp / f"{name}.db")
        import psycopg

        schema = "bench_" + re.sub(r"\W", "_", name)
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
        url = with_search_path(self.url, schema)
        self.schema_of[url] = schema
        return url

    def size_mb(self, backend: str, location: str) -> float:
        if backend == "sqlite":
            return sum(p.stat().st_size for p in Path(location).parent.glob(Path(location).name + "*")) / 1e6
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            total = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (self.schema_of[location],),
            ).fetchone()[0]
        return float(total) / 1e6

    def settle(self, backend: str, location: str) -> None:
        """After a bulk load, bring PostgreSQL to the state autovacuum would reach soon (VACUUM
        ANALYZE: planner statistics, the GIN pending list merged, visibility map set) and
        checkpoint, so neither runs in the middle of the timed searches. SQLite needs nothing."""
        if backend != "postgres":
            return
        import psycopg

        schema = self.schema_of[location]
        with psycopg.connect(self.url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
                (schema,),
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'VACUUM ANALYZE "{schema}"."{table}"')
            conn.execute("CHECKPOINT")

    def drop(self, backend: str, location: str) -> None:
        """Free the disk of a configuration measured already."""
        if backend == "sqlite":
            for path in Path(location).parent.glob(Path(location).name + "*"):
                path.unlink()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema_of.pop(location)} CASCADE")


@contextmanager
def postgres_server(
    url: str | None, backends: tuple[str, ...]
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """(`url`, facts about the server) when PostgreSQL is measured: `url` as given, else a
    server started with pgserver in a temporary folder and stopped afterwards."""
    if "postgres" not in backends:
        yield None, {}
        return
    folder, server = None, None
    if url is None:
        try:
            import pgserver
        except ImportError:
            raise SystemExit(
                "no --postgres-url and no pgserver to start one: pip install pgserver, or name a server"
            ) from None
        folder = tempfile.mkdtemp(prefix="bench-pg-")
        server = pgserver.get_server(folder, cleanup_mode="stop")
        url = server.get_uri()
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            about = {
                "server": conn.execute("SHOW server_version").fetchone()[0],
                "pgvector": conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()[0],
                "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
                "started_by_bench": server is not None,
            }
        yield url, about
    finally:
        if server is not None:
            server.cleanup()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def chart(path: str | Path, results: dict[str, Any], recipes: tuple[str, ...]) -> Path:
    """Search p50 excluding the embedding per configuration: a bar per backend and recipe (the
    legend beside the plot, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    shapes = list(dict.fromkeys((c["size"], c["layout"]) for c in results["configs"]))
    found = {(c["size"], c["layout"], c["backend"]): c["search_ms"] for c in results["configs"]}
    series = [(backend, recipe) for backend in results["backends"] for recipe in recipes]
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(shapes) + 3), 4.2))
    width = 0.8 / len(series)
    for index, (backend, recipe) in enumerate(series):
        values = [found[(*shape, backend)][f"{recipe} excl. embedding"]["p50"] for shape in shapes]
        positions = [g + index * width - 0.4 + width / 2 for g in range(len(shapes))]
        bars = ax.bar(
            positions,
            values,
            width,
            label=f"{backend} {recipe}",
            hatch="//" if index >= len(recipes) else None,
        )
        ax.bar_label(bars, fmt="%.3g", fontsize=6)
    labels = [f"{size // 1000}k {layout}" if size >= 1000 else f"{size} {layout}" for size, layout in shapes]
    ax.set_xticks(range(len(shapes)), labels)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_ylabel("ms (log scale)")
    ax.set_title("Search p50, warm, k=10, excluding the query embedding")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- adds and erasure, both backends side by side: python -m evals.bench_backends -------------


def timed_load(memory: Any, texts: list[str], users: list[str], *, batch: int) -> dict[str, float]:
    """Add `texts` (round-robin over `users`, `batch` messages per add); memories per second
    over the whole load and over its last tenth (the rate at the size reached), as the adds
    returned, and "settled": until the index builds the adds started in the background
    (PostgreSQL's HNSW blocks) had finished too."""
    by_user = {user: texts[i :: len(users)] for i, user in enumerate(users)}
    step = max(1, batch // 10) if len(users) > 1 else batch  # as evals/bench_store.py loads
    chunks = [
        (user, part[offset : offset + step])
        for offset in range(0, max(len(p) for p in by_user.values()), step)
        for user, part in by_user.items()
        if part[offset : offset + step]
    ]
    start, tail_start, done = time.perf_counter(), None, 0
    tenths = [start]  # when each tenth of the load was done
    for user, chunk in chunks:
        if tail_start is None and done >= 0.9 * len(texts):
            tail_start, tail_done = time.perf_counter(), done
        memory.add(chunk, user_id=user, infer=False)
        done += len(chunk)
        if done >= len(tenths) * len(texts) / 10:
            tenths.append(time.perf_counter())
    end = time.perf_counter()
    wait_for_builds = getattr(memory.store.vectors, "wait_for_builds", None)
    if wait_for_builds is not None:
        wait_for_builds()
    settled = time.perf_counter()
    return {
        "add_per_s": len(texts) / (end - start),
        "add_per_s_last_tenth": (len(texts) - tail_done) / (end - tail_start) if tail_start else 0.0,
        "add_per_s_settled": len(texts) / (settled - start),
        "settle_s": settled - end,
        "add_per_s_by_tenth": [len(texts) / 10 / (b - a) for a, b in zip(tenths, tenths[1:])],
    }


def timed_search(
    memory: Any, queries: np.ndarray, stored: np.ndarray, user: str, *, k: int = 10
) -> dict[str, float]:
    """Dense search in `user`'s scope through the store (the coarse count k=10 gets in retrieval,
    128): p50 ms over `queries`, and recall@k against the exact cosine top-k of `stored` (the
    scope's vectors), counted by similarity so that duplicate texts do not matter."""
    from dspy_memory.store.queries import TimeView
    from dspy_memory.types import Scope

    store, scope, view = memory.store, Scope(user_id=user), TimeView.at()
    predicate = store.memory_predicate(scope, view)
    unit = stored / np.linalg.norm(stored, axis=1, keepdims=True)
    times, found = [], 0
    for query in queries:
        start = time.perf_counter()
        hits = store.dense_search(query, scope, predicate, k, coarse=128, reference=view.as_of)
        times.append(time.perf_counter() - start)
        kth = np.sort(unit @ (query / np.linalg.norm(query)))[-k]
        found += sum(bool(hit.score >= kth - 1e-5) for hit in hits)
    return {"search_p50_ms": float(np.median(times) * 1000), "recall_at_10": found / (k * len(queries))}


def merge_blocks(memory: Any, location: str, user: str) -> None:
    """Replace the user's HNSW blocks by one block over all its rows (what merging blocks in
    maintenance would leave), to time a search through one index against one through many."""
    import psycopg

    from dspy_memory.store.postgres.hnsw_blocks import Block, Blocks

    blocks = memory.store.vectors.blocks
    with psycopg.connect(location, autocommit=True) as raw:
        key_hash, known = blocks.load(raw, user)
        last = raw.execute("SELECT max(row_id) FROM memory_vectors WHERE partition_key = %s", (user,))
        Blocks.create(raw, "memory_vectors", key_hash, Block(0, last.fetchone()[0]))
        for block in known:
            raw.execute(f"DROP INDEX {block.name(key_hash)}")
        blocks.load(raw, user)


def erase_timing(
    places: Places,
    backend: str,
    texts: list[str],
    embedder: Any,
    postgres: dict[str, Any],
    *,
    rows: int,
    one_user: bool = False,
) -> float:
    """Seconds for delete_scope of `rows` rows in a store of 3 x `rows` (issue 30's case: 1,000
    of 3,000): one user's of three, or (`one_user`) one run's of one user's three runs, so the
    user's vector partition keeps 2 x `rows` rows (and its HNSW index, if it has one)."""
    location = places.location(backend, f"erase-{len(places.schema_of)}")
    extra = {"postgres": postgres} if backend == "postgres" else {}
    from dspy_memory import Memory

    with Memory(location, embedder=embedder, **extra) as memory:
        for index, name in enumerate(("erased", "kept-1", "kept-2")):
            scope = {"user_id": "ada", "run_id": name} if one_user else {"user_id": name}
            part = texts[index * rows : (index + 1) * rows]
            for offset in range(0, len(part), 250):
                memory.add(part[offset : offset + 250], infer=False, **scope)
        start = time.perf_counter()
        memory.delete_scope(**({"user_id": "ada", "run_id": "erased"} if one_user else {"user_id": "erased"}))
        seconds = time.perf_counter() - start
    places.drop(backend, location)
    return seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Adds at a size (one scope, and 100 scopes) and an erasure, SQLite and PostgreSQL in one
    run, with precomputed vectors (no model in the timed loop)."""
    import argparse

    from dspy_memory.embed import HashEmbedder, LocalEmbedder
    from evals.bench_store import PrecomputedEmbedder
    from evals.report import RESULTS_DIR, machine, table, write_json
    from evals.synthetic import generate

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per add()")
    parser.add_argument("--vectors", choices=("minilm", "test"), default="minilm")
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--exact-max-rows", type=int, default=20_000, help="postgres.exact_max_rows")
    parser.add_argument("--erase-rows", type=int, default=1000, help="rows of the erased user (of 3x)")
    parser.add_argument("--layouts", default="one,spread", help="one (one scope), spread (100 scopes)")
    parser.add_argument(
        "--queries", type=int, default=100, help="dense searches timed in the one-scope store"
    )
    parser.add_argument(
        "--one-block",
        action="store_true",
        help="then search the one-scope PostgreSQL store again with its blocks merged into one index",
    )
    parser.add_argument("--tmp", default=None)
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_backends.json"))
    args = parser.parse_args(argv)
    texts = [item.text for item in generate(max(args.size, 3 * args.erase_rows), seed=0)]
    model: Any = LocalEmbedder(cache_size=0) if args.vectors == "minilm" else HashEmbedder(384, cache_size=0)
    matrix = embed_all(texts, model) if args.vectors == "minilm" else model.embed(texts)
    embedder = PrecomputedEmbedder(dict(zip(texts, matrix)), name=model.name, dim=model.dim)
    postgres = {"exact_max_rows": args.exact_max_rows}
    results: dict[str, Any] = {"machine": machine(), "vectors": model.name, "size": args.size, "runs": []}
    results["load_average_at_start"] = os.getloadavg()  # a shared machine: how quiet it was
    with (
        tempfile.TemporaryDirectory(dir=args.tmp) as tmp,
        postgres_server(args.postgres_url, BACKENDS) as (url, server),
    ):
        results["postgres"] = server
        places = Places(tmp, url, postgres)
        layouts = {
            "one": ("one scope", ["user-0"]),
            "spread": ("100 scopes", [f"user-{i}" for i in range(100)]),
        }
        for layout, users in (layouts[name] for name in args.layouts.split(",")):
            for backend in BACKENDS:
                location = places.location(backend, f"adds-{layout.replace(' ', '-')}")
                with places.open(location, embedder) as memory:
                    rates = timed_load(memory, texts[: args.size], users, batch=args.batch)
                    if len(users) == 1 and args.queries:
                        places.settle(backend, location)
                        queries = model.embed([f"what about {text}?" for text in texts[: args.queries]])
                        rates |= timed_search(memory, queries, matrix[: args.size], users[0])
                        if backend == "postgres" and args.one_block:
                            merge_blocks(memory, location, users[0])
                            places.settle(backend, location)
                            one = timed_search(memory, queries, matrix[: args.size], users[0])
                            rates |= {f"{key}_one_block": value for key, value in one.items()}
                places.drop(backend, location)
                results["runs"].append({"backend": backend, "layout": layout, **rates})
                print(f"{layout}, {backend}: {rates}", flush=True)
        results["delete_scope_s"] = {
            label: {
                backend: erase_timing(
                    places,
                    backend,
                    texts,
                    embedder,
                    {**postgres, **options},
                    rows=args.erase_rows,
                    one_user=one,
                )
                for backend in BACKENDS
            }
            for label, options, one in (
                ("a user of three, default", {}, False),
                ("a user of three, every partition indexed", {"exact_max_rows": args.erase_rows // 2}, False),
                ("a run of one user, default", {}, True),
                ("a run of one user, the partition indexed", {"exact_max_rows": args.erase_rows // 2}, True),
            )
        }
    by = {(run["layout"], run["backend"]): run for run in results["runs"]}
    rows = [
        [
            layout,
            *(
                round(by[(layout, b)][key])
                for key in ("add_per_s", "add_per_s_last_tenth", "add_per_s_settled")
                for b in BACKENDS
            ),
            *(
                f"{by[(layout, 'postgres')][key] / by[(layout, 'sqlite')][key]:.2f}"
                for key in ("add_per_s", "add_per_s_settled")
            ),
        ]
        for layout in dict.fromkeys(run["layout"] for run in results["runs"])
    ]
    searched = [run for run in results["runs"] if "search_p50_ms" in run]
    report = [
        f"Adds of {args.size} memories, precomputed vectors ({model.name}), batches of {args.batch} "
        "(settled: until the HNSW block builds the adds started in the background had finished)",
        "",
        table(
            [
                "layout",
                "sqlite add/s",
                "postgres add/s",
                "sqlite add/s last tenth",
                "postgres add/s last tenth",
                "sqlite add/s settled",
                "postgres add/s settled",
                "postgres / sqlite",
                "postgres / sqlite settled",
            ],
            rows,
        ),  # fmt: skip
        "",
        "dense search in the one-scope store, k=10: "
        + "; ".join(
            f"{run['backend']} p50 {run['search_p50_ms']:.1f} ms, recall@10 {run['recall_at_10']:.3f}"
            + (
                f" (its blocks merged into one index: p50 {run['search_p50_ms_one_block']:.1f} ms, "
                f"recall@10 {run['recall_at_10_one_block']:.3f})"
                if "search_p50_ms_one_block" in run
                else ""
            )
            for run in searched
        ),
        "",
        f"delete_scope of {args.erase_rows} rows in a {3 * args.erase_rows}-row store, seconds",
        "",
        table(
            ["erased, postgres vector partitions", *BACKENDS],
            [[label, *(round(s[b], 3) for b in BACKENDS)] for label, s in results["delete_scope_s"].items()],
        ),
    ]
    results["load_average_at_end"] = os.getloadavg()
    results["report"] = "\n".join(report)
    print("\n" + results["report"])
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
