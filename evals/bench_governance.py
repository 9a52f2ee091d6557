"""Governance benchmark: what encryption, backups and export/import cost at 10k memories.

    python -m evals.bench_governance                  # 10k memories, real MiniLM vectors (cached)
    python -m evals.bench_governance --size 1000 --vectors test

Two SQLite files get the same memories, vectors and queries: one plain, one encrypted
(SQLCipher, a derived raw key). Both are opened through sqlcipher3 (sqlite-vec lives in one
SQLite library per process), so the difference is the encryption alone, on the same SQLite build. Measured side by side, the two files alternating call by call
so both see the same machine:
- single-message add latency (precomputed vectors: the write path without the model) and
  batched add throughput while loading;
- search p50/p99 per recipe, warm, excluding the query embedding;
- `delete()` of single memories (erasure with compaction);
- `backup()` (FTS optimize + VACUUM INTO + verification + manifest) and `verify_file()`;
- `export()` of the whole store with and without embeddings, and `import_()` of each into a
  fresh file (with embeddings: vectors kept; without: every memory re-embedded).
Each timed operation runs `--repeats` times; tables quote medians.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder, LocalEmbedder
from dspy_memory.embed.base import BatchedEmbedder
from dspy_memory.governance.backup import verify_file
from dspy_memory.store.sqlite.connection import DRIVER_ENV
from evals.bench_backends import embed_all
from evals.bench_store import PrecomputedEmbedder, latency
from evals.report import RESULTS_DIR, machine, table, write_json
from evals.synthetic import generate

RECIPES = ("dense", "keyword", "hybrid")
FILES = ("plain", "encrypted")
# A fixed passphrase: the benchmark measures the cipher, not key handling.
PASSPHRASE = "bench-governance-passphrase"


def open_file(path: Path, name: str, embedder: BatchedEmbedder) -> Memory:
    key = PASSPHRASE if name == "encrypted" else None
    return Memory(str(path), embedder=embedder, encryption_key=key)


def timed(function: Any, repeats: int) -> float:
    """Median seconds of `function(run)` for run = 0 .. repeats - 1."""
    seconds = []
    for run in range(repeats):
        start = time.perf_counter()
        function(run)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def load(memories: dict[str, Memory], texts: list[str], batch: int) -> dict[str, float]:
    """Add `texts` to every file, batch by batch in turn; memories per second per file."""
    spent = dict.fromkeys(memories, 0.0)
    for offset in range(0, len(texts), batch):
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.add(texts[offset : offset + batch], user_id="user-0")
            spent[name] += time.perf_counter() - start
    return {name: len(texts) / seconds for name, seconds in spent.items()}


def single_adds(memories: dict[str, Memory], texts: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, list[float]] = {name: [] for name in memories}
    for text in texts:
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.add(text, user_id="user-single")
            out[name].append((time.perf_counter() - start) * 1000)
    return {name: latency(values) for name, values in out.items()}


def searches(memories: dict[str, Memory], queries: list[str], recipe: str) -> dict[str, dict[str, float]]:
    for memory in memories.values():  # warm-up: page cache, code cache, statements
        for query in queries:
            memory.search(query, user_id="user-0", k=10, recipe=recipe)
    out: dict[str, list[float]] = {name: [] for name in memories}
    for query in queries:
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.search(query, user_id="user-0", k=10, recipe=recipe)
            out[name].append((time.perf_counter() - start) * 1000)
    return {name: latency(values) for name, values in out.items()}


def deletes(memories: dict[str, Memory], count: int) -> dict[str, dict[str, float]]:
    """`delete()` of single memories, the files in turn: erasure and compaction (on SQLCipher's
    build, which has no sqlite_dbpage, a VACUUM of the file)."""
    victims = {
        name: [r.id for r in memory.get_all(user_id="user-single", limit=count)]
        for name, memory in memories.items()
    }
    out: dict[str, list[float]] = {name: [] for name in memories}
    for index in range(count):
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.delete(victims[name][index], user_id="user-single")
            out[name].append((time.perf_counter() - start) * 1000)
    return {name: latency(values) for name, values in out.items()}


def backups(memories: dict[str, Memory], folder: Path, repeats: int) -> dict[str, dict[str, float]]:
    """`backup()` of each file `repeats` times, then `verify_file()` of its last backup."""
    out = {}
    for name, memory in memories.items():
        dest = functools.partial(lambda run, name: folder / f"{name}-backup-{run}.db", name=name)
        backup_s = timed(lambda run, memory=memory, dest=dest: memory.backup(str(dest(run))), repeats)
        last, key = dest(repeats - 1), PASSPHRASE if name == "encrypted" else None
        verify_s = timed(lambda run, last=last, key=key: verify_file(str(last), encryption_key=key), repeats)
        out[name] = {"backup_s": backup_s, "verify_s": verify_s, "mb": last.stat().st_size / 1e6}
    return out


def import_into_fresh(source: Path, target: Path, embedder: BatchedEmbedder) -> None:
    with Memory(str(target), embedder=embedder) as fresh:
        fresh.import_(str(source))


def exchange(
    memory: Memory, folder: Path, embedder: BatchedEmbedder, repeats: int
) -> dict[str, dict[str, float]]:
    """Export the plain file with and without embeddings; import each into fresh files."""
    out = {}
    for with_vectors, label in ((True, "with embeddings"), (False, "without embeddings")):
        path = folder / f"export-{'vectors' if with_vectors else 'text'}.jsonl.gz"
        export_s = timed(
            lambda run, path=path, embed=with_vectors: memory.export(
                str(path), include_embeddings=embed, all_scopes=True
            ),
            repeats,
        )
        import_s = timed(
            lambda run, path=path: import_into_fresh(path, folder / f"import-{path.stem}-{run}.db", embedder),
            repeats,
        )
        out[label] = {"export_s": export_s, "import_s": import_s, "file_mb": path.stat().st_size / 1e6}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ[DRIVER_ENV] = "sqlcipher3"  # both files, one SQLite library (see the docstring)
    corpus = generate(args.size + args.single_adds, seed=args.seed)
    texts = [item.text for item in corpus[: args.size]]
    fresh = [item.text for item in corpus[args.size :]]
    queries = [corpus[i].question for i in random.Random(args.seed).sample(range(args.size), args.queries)]
    model: BatchedEmbedder = (
        LocalEmbedder(cache_size=0) if args.vectors == "minilm" else HashEmbedder(384, cache_size=0)
    )
    everything = list(dict.fromkeys(texts + fresh + queries))
    matrix = embed_all(everything, model) if args.vectors == "minilm" else model.embed(everything)
    vectors: dict[str, np.ndarray] = dict(zip(everything, matrix))
    embedder = PrecomputedEmbedder(vectors, name=model.name, dim=model.dim)
    results: dict[str, Any] = {"size": args.size, "vectors": model.name, "machine": machine()}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        folder = Path(tmp)
        memories = {name: open_file(folder / f"{name}.db", name, embedder) for name in FILES}
        try:
            results["add_per_s"] = load(memories, texts, args.batch)
            results["single_add_ms"] = single_adds(memories, fresh)
            results["search_ms"] = {recipe: searches(memories, queries, recipe) for recipe in RECIPES}
            results["delete_ms"] = deletes(memories, min(args.deletes, args.single_adds))
            results["backup"] = backups(memories, folder, args.repeats)
            results["exchange"] = exchange(memories["plain"], folder, embedder, args.repeats)
        finally:
            for memory in memories.values():
                memory.close()
    return results


def report(results: dict[str, Any]) -> str:
    def ratio(values: dict[str, float], key: str = "p50") -> float:
        return values["encrypted"][key] / values["plain"][key]

    out = [f"{results['size']} memories in one scope (vectors: {results['vectors']})", ""]
    rows: list[list[Any]] = [
        ["add, one message (ms)", *(results["single_add_ms"][f]["p50"] for f in FILES)]
        + [ratio(results["single_add_ms"])],
        ["add, batched (memories/s)", *(results["add_per_s"][f] for f in FILES)]
        + [results["add_per_s"]["encrypted"] / results["add_per_s"]["plain"]],
    ]
    for recipe in RECIPES:
        found = results["search_ms"][recipe]
        rows.append(
            [f"search {recipe} excl. embedding (ms)", *(found[f]["p50"] for f in FILES), ratio(found)]
        )
    rows.append(
        [
            "delete one memory (ms)",
            *(results["delete_ms"][f]["p50"] for f in FILES),
            ratio(results["delete_ms"]),
        ]
    )
    for what in ("backup_s", "verify_s"):
        found = results["backup"]
        rows.append(
            [
                f"{what[:-2]} (s)",
                *(found[f][what] for f in FILES),
                found["encrypted"][what] / found["plain"][what],
            ]
        )
    out.append(table(["p50 / median", *FILES, "encrypted / plain"], rows))
    out += ["", "Export and import of the whole store (plain file; import into a fresh file)", ""]
    out.append(
        table(
            ["export", "export s", "import s", "file MB"],
            [[label, v["export_s"], v["import_s"], v["file_mb"]] for label, v in results["exchange"].items()],
        )
    )
    text = "\n".join(out)
    print("\n" + text)
    return text


def chart(path: str | Path, results: dict[str, Any]) -> Path:
    """p50 / median of each measurement, plain and encrypted side by side (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["add ms", *(f"{recipe} ms" for recipe in RECIPES), "backup s", "verify s"]
    series = {
        name: [
            results["single_add_ms"][name]["p50"],
            *(results["search_ms"][recipe][name]["p50"] for recipe in RECIPES),
            results["backup"][name]["backup_s"],
            results["backup"][name]["verify_s"],
        ]
        for name in FILES
    }
    fig, ax = plt.subplots(figsize=(8, 4))
    positions = np.arange(len(labels))
    for offset, (name, values) in zip((-0.2, 0.2), series.items()):
        ax.bar(positions + offset, values, width=0.4, label=name)
    ax.set_xticks(positions, labels)
    ax.set_yscale("log")
    ax.set_title(f"Plain vs encrypted file, {results['size']} memories")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=10_000, help="memories per file")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--single-adds", type=int, default=200, help="single-message adds per file")
    parser.add_argument("--deletes", type=int, default=10, help="single-memory deletes per file")
    parser.add_argument("--batch", type=int, default=500, help="messages per add() when loading")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each backup, export and import")
    parser.add_argument("--vectors", choices=("minilm", "test"), default="minilm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", default=None, help="folder for the benchmark files")
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_governance.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_governance.png"))
    args = parser.parse_args(argv)
    results = run(args)
    results["report"] = report(results)
    write_json(args.out, results)
    chart(args.plot, results)
    print(f"\nwrote {args.out} and {args.plot}")
    return results


if __name__ == "__main__":
    main()
