"""Store benchmark: add throughput and warm search latency at 1k / 10k / 100k memories, on
SQLite, PostgreSQL + pgvector, or both side by side.

    python -m evals.bench_store                                   # SQLite (first run embeds ~102k texts)
    python -m evals.bench_store --backend both --sizes 10000,100000
    python -m evals.bench_store --backend postgres --postgres-url postgresql://me@db/bench
    python -m evals.bench_store --backend both --sizes 1000000    # the long run (hours, ~15 GB of disk)

For each size, memories go either all into one scope or spread over 100 scopes; each backend
gets the same memories, vectors and queries (a SQLite file, or a PostgreSQL schema, per
configuration; without --postgres-url a server is started with pgserver in a temporary folder).
A PostgreSQL schema is vacuumed and analyzed after loading (what autovacuum would do soon), so
neither runs during the timed searches. Searches alternate between the backends query by query,
so both see the same machine. Measured:
- add throughput with precomputed vectors (the write path without the model);
- search p50/p95/p99 per recipe, warm, excluding the query embedding (precomputed query
  vectors) and including it (MiniLM embeds every query; its cache is off);
- dense recall@10 against exact brute-force cosine over the searched scope;
- with MiniLM in the loop: single-message add latency and batched add throughput.
Vectors are real MiniLM embeddings, computed once and cached in evals/.cache/.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from typing import Any

import numpy as np

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder, LocalEmbedder
from dspy_memory.embed.base import BatchedEmbedder
from evals.bench_backends import BACKENDS, Places, chart, embed_all, postgres_server
from evals.disk_usage import usage
from evals.report import RESULTS_DIR, machine, percentile, table, write_json
from evals.synthetic import generate

RECIPES = ("dense", "keyword", "hybrid")
SCOPES_SPREAD = 100


class PrecomputedEmbedder(BatchedEmbedder):
    """Looks vectors up by text, so no model runs inside the timed loop. It carries the name of
    the model that computed the vectors, so the same file can be reopened with that model."""

    def __init__(self, vectors: dict[str, np.ndarray], *, name: str, dim: int) -> None:
        super().__init__(batch_size=10_000, cache_size=0)
        self.vectors = vectors
        self.name = name
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])


def latency(values: list[float]) -> dict[str, float]:
    return {f"p{q}": percentile(values, q) for q in (50, 95, 99)}


def load(memory: Memory, texts: list[str], *, spread: bool, batch: int) -> float:
    """Add `texts` as memories; returns memories per second."""
    start = time.perf_counter()
    if spread:
        per_scope: dict[int, list[str]] = {}
        for index, text in enumerate(texts):
            per_scope.setdefault(index % SCOPES_SPREAD, []).append(text)
        # Round-robin over scopes, so users' rows interleave in the file as they would live.
        step = max(1, batch // 10)
        offsets = dict.fromkeys(per_scope, 0)
        while offsets:
            for scope in list(offsets):
                chunk = per_scope[scope][offsets[scope] : offsets[scope] + step]
                memory.add(chunk, user_id=f"user-{scope}")
                offsets[scope] += step
                if offsets[scope] >= len(per_scope[scope]):
                    del offsets[scope]
    else:
        for offset in range(0, len(texts), batch):
            memory.add(texts[offset : offset + batch], user_id="user-0")
    return len(texts) / (time.perf_counter() - start)


def search_latency(
    memories: dict[str, Memory], queries: list[tuple[str, str]], recipe: str
) -> dict[str, list[float]]:
    """Milliseconds per search on each backend, the backends alternating query by query."""
    for memory in memories.values():  # warm-up pass: page cache, code cache, statements
        for question, user in queries:
            memory.search(question, user_id=user, k=10, recipe=recipe)
    out: dict[str, list[float]] = {name: [] for name in memories}
    for question, user in queries:
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.search(question, user_id=user, k=10, recipe=recipe)
            out[name].append((time.perf_counter() - start) * 1000)
    return out


def dense_recall(
    memory: Memory,
    queries: list[tuple[str, str]],
    vectors: dict[str, np.ndarray],
    scope_texts: dict[str, list[str]],
) -> float:
    """Recall@10 of the dense recipe against exact cosine over the whole scope."""
    recalls, matrices = [], {}
    for question, user in queries:
        texts = scope_texts[user]
        if user not in matrices:
            matrices[user] = np.stack([vectors[text] for text in texts])
        exact = {texts[i] for i in np.argsort(-(matrices[user] @ vectors[question]))[:10]}
        found = {hit.content for hit in memory.search(question, user_id=user, k=10, recipe="dense")}
        recalls.append(len(found & exact) / len(exact))  # a scope may hold fewer than 10
    return float(np.mean(recalls))


def measure(
    args: argparse.Namespace,
    places: Places,
    backends: tuple[str, ...],
    subset: list[str],
    queries: list[tuple[str, str]],
    vectors: dict[str, np.ndarray],
    model: BatchedEmbedder,
    *,
    spread: bool,
) -> list[dict[str, Any]]:
    """One size and layout on every backend: a config dict per backend."""
    size, layout = len(subset), f"{SCOPES_SPREAD} scopes" if spread else "one scope"
    scope_texts: dict[str, list[str]] = {}
    for index, text in enumerate(subset):
        scope_texts.setdefault(f"user-{index % SCOPES_SPREAD if spread else 0}", []).append(text)
    memories, locations, configs = {}, {}, {}
    for backend in backends:
        locations[backend] = places.location(backend, f"{size}-{'spread' if spread else 'one'}")
        memory = places.open(locations[backend], PrecomputedEmbedder(vectors, name=model.name, dim=model.dim))
        memories[backend] = memory
        configs[backend] = {
            "backend": backend,
            "size": size,
            "layout": layout,
            "memories_in_searched_scope": size // SCOPES_SPREAD if spread else size,
            "add_per_s_precomputed": load(memory, subset, spread=spread, batch=args.batch),
            "search_ms": {},
        }
        places.settle(backend, locations[backend])
    for recipe in RECIPES:
        for backend, values in search_latency(memories, queries, recipe).items():
            configs[backend]["search_ms"][f"{recipe} excl. embedding"] = latency(values)
    for backend, memory in memories.items():
        configs[backend]["dense_recall_at_10"] = dense_recall(memory, queries[:100], vectors, scope_texts)
        memory.close()
    if args.vectors == "minilm":
        live = {backend: places.open(locations[backend], LocalEmbedder(cache_size=0)) for backend in backends}
        for recipe in RECIPES:
            for backend, values in search_latency(
                live, queries[: args.queries_with_embedding], recipe
            ).items():
                configs[backend]["search_ms"][f"{recipe} incl. embedding"] = latency(values)
        for memory in live.values():
            memory.close()
    for backend in backends:
        configs[backend]["disk_mb"] = places.size_mb(backend, locations[backend])
        configs[backend]["disk_kb_per_memory"] = configs[backend]["disk_mb"] * 1000 / size
        if backend == "sqlite":  # where the bytes go: python -m evals.disk_usage FILE
            configs[backend]["disk_parts"] = usage(locations[backend])["parts"]
        places.drop(backend, locations[backend])
    return [configs[backend] for backend in backends]


def with_model(
    args: argparse.Namespace, places: Places, location: str, texts: list[str], model: BatchedEmbedder
) -> dict[str, Any]:
    """Adds with the model in the loop: batched throughput and single-message latency."""
    with places.open(location, model) as live:
        live.add(texts[:8], user_id="warm-up")  # loads the model outside the timing
        batched = texts[8 : 8 + args.e2e_memories]
        start = time.perf_counter()
        for offset in range(0, len(batched), args.e2e_batch):
            live.add(batched[offset : offset + args.e2e_batch], user_id="user-e2e")
        rate = len(batched) / (time.perf_counter() - start)
        single = []
        for text in texts[8 + args.e2e_memories :]:
            begin = time.perf_counter()
            live.add(text, user_id="user-single")
            single.append((time.perf_counter() - begin) * 1000)
    return {"batched_add_per_s": rate, "single_add_ms": latency(single)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    sizes = [int(size) for size in args.sizes.split(",")]
    largest = max(sizes)
    extra = 8 + args.e2e_memories + args.single_adds
    corpus = generate(largest + extra, seed=args.seed)
    texts = [item.text for item in corpus[:largest]]
    fresh_texts = [item.text for item in corpus[largest:]]
    model: BatchedEmbedder = (
        LocalEmbedder(cache_size=0) if args.vectors == "minilm" else HashEmbedder(384, cache_size=0)
    )
    rng = random.Random(args.seed)
    picks = {size: rng.sample(range(size), min(args.queries, size)) for size in sizes}
    questions = list(dict.fromkeys(corpus[i].question for chosen in picks.values() for i in chosen))
    all_texts = texts + fresh_texts + questions
    matrix = embed_all(all_texts, model) if args.vectors == "minilm" else model.embed(all_texts)
    vectors = dict(zip(all_texts, matrix))
    results: dict[str, Any] = {
        "backends": list(backends),
        "configs": [],
        "machine": machine(),
        "vectors": model.name,
        "with_model": {},
    }
    with (
        tempfile.TemporaryDirectory(dir=args.tmp) as tmp,
        postgres_server(args.postgres_url, backends) as (url, server),
    ):
        results["postgres"] = server
        places = Places(tmp, url, {"partitions": args.postgres_partitions})
        results["postgres_partitions"] = args.postgres_partitions
        for size in sizes:
            for spread in (False, True):
                queries = [
                    (corpus[i].question, f"user-{i % SCOPES_SPREAD if spread else 0}") for i in picks[size]
                ]
                results["configs"] += measure(
                    args, places, backends, texts[:size], queries, vectors, model, spread=spread
                )
                print(f"done: {size} memories, {results['configs'][-1]['layout']}", flush=True)
        for backend in backends:
            live_model = (
                LocalEmbedder(cache_size=0) if args.vectors == "minilm" else HashEmbedder(384, cache_size=0)
            )
            results["live_model"] = live_model.name
            location = places.location(backend, "e2e")
            results["with_model"][backend] = with_model(args, places, location, fresh_texts, live_model)
            places.drop(backend, location)
    return results


def report(results: dict[str, Any]) -> str:
    """The tables, backends side by side; printed and returned."""
    backends = results["backends"]
    by_key = {(c["size"], c["layout"], c["backend"]): c for c in results["configs"]}
    shapes = list(
        dict.fromkeys((c["size"], c["layout"], c["memories_in_searched_scope"]) for c in results["configs"])
    )
    rows = []
    for size, layout, in_scope in shapes:
        for name in by_key[(size, layout, backends[0])]["search_ms"]:
            row: list[Any] = [size, layout, in_scope, name]
            for backend in backends:
                found = by_key[(size, layout, backend)]["search_ms"][name]
                row += [found["p50"], found["p99"]]
            rows.append(row)
    per_backend = [f"{b} {what}" for b in backends for what in ("p50 ms", "p99 ms")]
    out = [f"Search latency, warm, k=10 (vectors: {results['vectors']})", ""]
    out.append(table(["memories", "layout", "in scope", "recipe", *per_backend], rows))
    out += ["", "Writes, dense quality and disk", ""]
    columns = ("add/s (precomputed vectors)", "dense recall@10 vs exact", "disk MB", "disk kB/memory")
    keys = ("add_per_s_precomputed", "dense_recall_at_10", "disk_mb", "disk_kb_per_memory")
    out.append(
        table(
            ["memories", "layout", *(f"{b} {c}" for c in columns for b in backends)],
            [
                [size, layout, *(by_key[(size, layout, b)][key] for key in keys for b in backends)]
                for size, layout, _ in shapes
            ],
        )
    )
    out += ["", f"With the model in the loop ({results['live_model']} embeds every text)", ""]
    out.append(
        table(
            ["backend", "batched add memories/s", "single add p50 ms", "single add p99 ms"],
            [
                [b, m["batched_add_per_s"], m["single_add_ms"]["p50"], m["single_add_ms"]["p99"]]
                for b, m in results["with_model"].items()
            ],
        )
    )
    text = "\n".join(out)
    print("\n" + text)
    return text


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="a PostgreSQL server with pgvector (a schema per configuration is created and dropped "
        "in it); default: start one with pgserver in a temporary folder",
    )
    parser.add_argument(
        "--postgres-partitions",
        type=int,
        default=1,
        help="hash partitions of PostgreSQL's search tables by user (postgres.partitions; 1: none)",
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200, help="queries per configuration")
    parser.add_argument("--queries-with-embedding", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000, help="messages per add() when loading")
    parser.add_argument(
        "--e2e-memories", type=int, default=2000, help="memories added with the model, batched"
    )
    parser.add_argument("--e2e-batch", type=int, default=100, help="messages per add() with the model")
    parser.add_argument("--single-adds", type=int, default=100, help="single-message adds with the model")
    parser.add_argument(
        "--vectors",
        choices=("minilm", "test"),
        default="minilm",
        help="minilm: real MiniLM vectors; test: hash vectors (smoke runs only)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", default=None, help="folder for the SQLite benchmark files")
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_store.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_store.png"))
    args = parser.parse_args(argv)
    results = run(args)
    results["report"] = report(results)
    write_json(args.out, results)
    chart(args.plot, results, RECIPES)
    print(f"\nwrote {args.out} and {args.plot}")
    return results


if __name__ == "__main__":
    main()
