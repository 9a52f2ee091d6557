"""Store benchmark: add throughput and warm search latency at 1k / 10k / 100k memories.

    python -m evals.bench_store                      # full run (first run embeds ~111k texts)
    python -m evals.bench_store --sizes 1000,10000   # smaller

For each size, memories go either all into one scope or spread over 100 scopes. Measured:
- add throughput with precomputed vectors (the write path without the model);
- search p50/p95 per recipe, warm, excluding the query embedding (precomputed query vectors)
  and including it (MiniLM embeds every query; its cache is off);
- dense recall@10 of the binary coarse pass + exact rescoring against brute-force cosine;
- with MiniLM in the loop: single-message add latency and batched add throughput.
Vectors are real MiniLM embeddings, computed once and cached in evals/.cache/.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder, LocalEmbedder
from dspy_memory.embed.base import BatchedEmbedder
from evals.report import RESULTS_DIR, bar_chart, machine, percentile, table, write_json
from evals.synthetic import generate

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
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


def embed_all(texts: list[str], model: BatchedEmbedder) -> np.ndarray:
    """Embed `texts` once per corpus and model; later runs read evals/.cache/."""
    key = hashlib.sha256(("\n".join(texts) + model.name).encode()).hexdigest()[:16]
    path = CACHE_DIR / f"vectors-{key}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts)} texts with {model.name} (cached for later runs) ...", flush=True)
    start = time.perf_counter()
    chunks = []
    for offset in range(0, len(texts), 5000):
        chunks.append(model.embed(texts[offset : offset + 5000]))
        done = offset + len(chunks[-1])
        print(f"  {done}/{len(texts)} ({done / (time.perf_counter() - start):.0f}/s)", flush=True)
    vectors = np.concatenate(chunks).astype(np.float32)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


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


def search_latency(memory: Memory, queries: list[tuple[str, str]], recipe: str) -> list[float]:
    for question, user in queries:  # warm-up pass: page cache, code cache, statements
        memory.search(question, user_id=user, k=10, recipe=recipe)
    return [
        timed(lambda q=question, u=user: memory.search(q, user_id=u, k=10, recipe=recipe), 1)[0]
        for question, user in queries
    ]


def dense_recall(
    memory: Memory,
    queries: list[tuple[str, str]],
    vectors: dict[str, np.ndarray],
    scope_texts: dict[str, list[str]],
) -> float:
    """Recall@10 of the dense recipe against exact cosine over the whole scope."""
    recalls = []
    for question, user in queries:
        texts = scope_texts[user]
        matrix = np.stack([vectors[text] for text in texts])
        exact = {texts[i] for i in np.argsort(-(matrix @ vectors[question]))[:10]}
        found = {hit.content for hit in memory.search(question, user_id=user, k=10, recipe="dense")}
        recalls.append(len(found & exact) / 10)
    return float(np.mean(recalls))


def run(args: argparse.Namespace) -> dict[str, Any]:
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
    results: dict[str, Any] = {"configs": [], "machine": machine(), "vectors": model.name}

    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for size in sizes:
            for spread in (False, True):
                layout = f"{SCOPES_SPREAD} scopes" if spread else "one scope"
                db = str(Path(tmp) / f"bench-{size}-{'spread' if spread else 'one'}.db")
                subset = texts[:size]
                embedder = PrecomputedEmbedder(vectors, name=model.name, dim=model.dim)
                memory = Memory(db, embedder=embedder)
                add_rate = load(memory, subset, spread=spread, batch=args.batch)
                scope_texts: dict[str, list[str]] = {}
                for index, text in enumerate(subset):
                    scope_texts.setdefault(f"user-{index % SCOPES_SPREAD if spread else 0}", []).append(text)
                queries = [
                    (corpus[i].question, f"user-{i % SCOPES_SPREAD if spread else 0}") for i in picks[size]
                ]
                config: dict[str, Any] = {
                    "size": size,
                    "layout": layout,
                    "memories_in_searched_scope": size // SCOPES_SPREAD if spread else size,
                    "add_per_s_precomputed": add_rate,
                    "file_mb": Path(db).stat().st_size / 1e6,
                    "search_ms": {},
                }
                for recipe in RECIPES:
                    latencies = search_latency(memory, queries, recipe)
                    config["search_ms"][f"{recipe} excl. embedding"] = {
                        "p50": percentile(latencies, 50),
                        "p95": percentile(latencies, 95),
                    }
                config["dense_recall_at_10"] = dense_recall(memory, queries[:100], vectors, scope_texts)
                memory.close()
                if args.vectors == "minilm":
                    with Memory(db, embedder=LocalEmbedder(cache_size=0)) as live:
                        for recipe in RECIPES:
                            latencies = search_latency(live, queries[: args.queries_with_embedding], recipe)
                            config["search_ms"][f"{recipe} incl. embedding"] = {
                                "p50": percentile(latencies, 50),
                                "p95": percentile(latencies, 95),
                            }
                results["configs"].append(config)
                print(f"done: {size} memories, {layout}", flush=True)

        live_model = (
            LocalEmbedder(cache_size=0) if args.vectors == "minilm" else HashEmbedder(384, cache_size=0)
        )
        with Memory(str(Path(tmp) / "e2e.db"), embedder=live_model) as live:
            live.add(fresh_texts[:8], user_id="warm-up")  # loads the model outside the timing
            batched = fresh_texts[8 : 8 + args.e2e_memories]
            start = time.perf_counter()
            for offset in range(0, len(batched), args.e2e_batch):
                live.add(batched[offset : offset + args.e2e_batch], user_id="user-e2e")
            results["batched_add_per_s_with_model"] = len(batched) / (time.perf_counter() - start)
            single = []
            for text in fresh_texts[8 + args.e2e_memories :]:
                begin = time.perf_counter()
                live.add(text, user_id="user-single")
                single.append((time.perf_counter() - begin) * 1000)
            results["single_add_ms_with_model"] = {
                "p50": percentile(single, 50),
                "p95": percentile(single, 95),
            }
    return results


def report(results: dict[str, Any]) -> None:
    rows = []
    for config in results["configs"]:
        for name, latency in config["search_ms"].items():
            rows.append(
                [
                    config["size"],
                    config["layout"],
                    config["memories_in_searched_scope"],
                    name,
                    latency["p50"],
                    latency["p95"],
                ]
            )
    print(f"\nSearch latency, warm, k=10 (vectors: {results['vectors']})\n")
    print(table(["memories", "layout", "in scope", "recipe", "p50 ms", "p95 ms"], rows))
    print("\nWrites and dense quality\n")
    print(
        table(
            ["memories", "layout", "add/s (precomputed vectors)", "dense recall@10 vs exact", "file MB"],
            [
                [c["size"], c["layout"], c["add_per_s_precomputed"], c["dense_recall_at_10"], c["file_mb"]]
                for c in results["configs"]
            ],
        )
    )
    single = results["single_add_ms_with_model"]
    print(
        f"\nWith the model in the loop: batched add {results['batched_add_per_s_with_model']:.0f} "
        f"memories/s; single-message add p50 {single['p50']:.1f} ms, p95 {single['p95']:.1f} ms"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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
    parser.add_argument("--tmp", default=None, help="folder for the benchmark databases")
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_store.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_store.png"))
    args = parser.parse_args(argv)
    results = run(args)
    report(results)
    write_json(args.out, results)
    groups = [f"{c['size'] // 1000}k {c['layout']}" for c in results["configs"]]
    bar_chart(
        args.plot,
        groups,
        {
            recipe: [c["search_ms"][f"{recipe} excl. embedding"]["p50"] for c in results["configs"]]
            for recipe in RECIPES
        },
        title="Search p50, warm, excluding query embedding",
        ylabel="ms (log scale)",
        log=True,
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return results


if __name__ == "__main__":
    main()
