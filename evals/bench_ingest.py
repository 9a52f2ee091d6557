"""Bulk ingestion benchmark (issue 32): how fast `Memory.ingest` stores raw turns against the
embedder's own batched rate, and how much memory it takes while the file streams by.

    python -m evals.bench_ingest                                  # LoCoMo dev + 10k + 100k synthetic, MiniLM
    python -m evals.bench_ingest --synthetic 3000 --embedder test # a quick run (hash vectors)
    python -m evals.bench_ingest --synthetic 20000 --ceiling-sample 2000 --backend postgres

Datasets: LoCoMo's development conversations (`--locomo`, read where it lies; "" to skip) and
a synthetic JSONL file the script writes to a temporary folder: `--synthetic N` messages
(default 100,000) in conversations of 20-50 turns between two named speakers, each turn 4-60
words (about 22 on average, like LoCoMo's) from a seeded vocabulary, with an ISO time; the same
generator at N/10 as well, so the table shows whether peak memory grows with the file.

Each dataset is ingested raw (no LM) by a child process into a fresh store (`--backend`: a
SQLite file, or a schema of a PostgreSQL server, pgserver's when no `--postgres-url`). The
child opens the Memory and warms its embedder (one search), then:
1. the ceiling, before: a fresh instance of the same embedder spec built with the Memory's
   embedder settings (same process, same threads), warmed on a few texts, embeds the raw-turn
   texts ("Name: text") of the file in batches of `--batch-size` (the ingest's); texts/s.
   With more messages than `--ceiling-sample` (default 10,000) it embeds that many, evenly
   spread over the file (the parent picks them while streaming the file and hands them over in
   a small JSON file; the child drops them before the ingest);
2. the ingest, timed: messages, memories/s; the peak RSS of the ingest (Linux: the process's
   peak is reset just before it, /proc/self/clear_refs; elsewhere the child's whole peak) and
   the RSS at each tenth of the file;
3. the ceiling again, after (the machine is shared and noisy: the ratio uses their mean);
4. the same ingest again (everything already there): its seconds and `already` count.

Prints a table and a verdict per dataset (ingest >= 90% of the embedder's batched rate), and
writes JSON, a Markdown report and a bar chart (evals/results/bench_ingest.*). With MiniLM on
2 cores (~60-300 texts/s; ~100 with OPENBLAS_NUM_THREADS=1) the default run takes about
20-30 minutes, most of it the 100k ingest.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from evals.report import RESULTS_DIR, command_line, machine, save, stage, table

ROOT = Path(__file__).resolve().parent.parent
USER = "bench"
TARGET = 0.9  # the acceptance bar: raw ingestion at >= 90% of the embedder's batched rate
WARM_TEXTS = 16  # texts a fresh ceiling embedder is warmed on (not part of the measured ones)

SPEAKERS = (
    "Ada", "Ben", "Caroline", "Dev", "Emi", "Finn", "Gus", "Hana", "Ivo", "Jules", "Kofi", "Lena",
    "Melanie", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tomas",
)  # fmt: skip
VOCABULARY = """
the a and to of in it that is was for on with as at this but be have you we they my your our
just so really very also too then still always never often sometimes maybe probably actually
i he she them him her me us their his its there here what when where why how which who
went go going come came got get make made take took see saw know knew think thought feel felt
love loved like liked want wanted need needed try tried start started finish finished help
helped talk talked tell told say said ask asked work worked play played read wrote write
visit visited move moved plan planned learn learned paint painted cook cooked run ran walk
today yesterday tomorrow weekend week month year morning evening night summer winter spring
family friends kids sister brother mom dad grandma partner dog cat neighbor teacher coworker
home house garden kitchen park beach lake mountains city town school office library museum
cafe restaurant store market gym studio hospital church festival concert trip vacation
book books music song guitar piano painting photo picture camera movie show game class course
job project meeting interview promotion team boss career volunteer shelter charity race
support group community center adoption agency counseling workshop conference speech
dinner lunch breakfast coffee tea cake pizza pasta salad bread cookies recipe picnic
new old big small great good bad nice hard easy busy happy sad excited nervous proud tired
beautiful amazing awesome fun quiet loud long short early late first last next different
really important special favorite lovely wonderful peaceful stressful exciting interesting
because after before while during since until about around through over under into from
again together alone already almost enough quite pretty lot lots bit little much many
hiking camping swimming running painting pottery baking gardening dancing singing reading
sunrise sunset ocean river forest trail bike car train flight hotel camp tent fire
remember forgot hope hoped wish wished decided realized noticed enjoyed shared joined
""".split()
ENDINGS = (".", ".", ".", ".", "!", "?")


# -- the synthetic file ------------------------------------------------------------------------


def write_synthetic(path: Path, messages: int, seed: int) -> Path:
    """`messages` JSONL lines: conversations of 20-50 turns between two named speakers, each turn
    4-60 words (~22 on average), one ISO time a turn. Written line by line."""
    rng = random.Random(seed)
    at = datetime(2023, 1, 2, 9, 0, tzinfo=timezone.utc)
    written, conversation = 0, 0
    with open(path, "w", encoding="utf-8") as file:
        while written < messages:
            conversation += 1
            speakers = rng.sample(SPEAKERS, 2)
            at += timedelta(hours=rng.randint(6, 72))
            for turn in range(min(rng.randint(20, 50), messages - written)):
                words = rng.choices(VOCABULARY, k=max(4, min(60, round(rng.gauss(22, 8)))))
                for _ in range(len(words) // 12):  # a comma or two in longer turns
                    spot = rng.randrange(2, len(words) - 1)
                    words[spot] += ","
                words[0] = words[0].capitalize()
                record = {
                    "role": "user",
                    "name": speakers[turn % 2],
                    "content": " ".join(words) + rng.choice(ENDINGS),
                    "at": (at + timedelta(seconds=40 * turn)).isoformat().replace("+00:00", "Z"),
                    "conversation": f"c{conversation}",
                }
                file.write(json.dumps(record) + "\n")
                written += 1
    return path


def sample_texts(path: str | Path, format: str, limit: int) -> tuple[int, list[str]]:
    """(messages in the file, the raw-turn texts of at most `limit` of them, evenly spread),
    streaming the file twice (once to count) and holding only the sample."""
    from dspy_memory.write.formats import Message, MessageStream

    def messages() -> Any:
        return (item for item in MessageStream(path, format) if isinstance(item, Message))

    total = sum(1 for _ in messages())
    count = min(limit, total)
    wanted = {index * total // count for index in range(count)} if count else set()
    texts = [
        f"{m.name}: {m.content}" if m.name else m.content  # write/inputs.py turn_text
        for index, m in enumerate(messages())
        if index in wanted
    ]
    return total, texts


# -- the child: one dataset's ingest and its ceilings ------------------------------------------


def _kilobytes_to_mb(value: int) -> float:
    return value / 1e6 if sys.platform == "darwin" else value * 1024 / 1e6  # macOS: bytes


def peak_rss_mb() -> float:
    import resource  # Unix

    return _kilobytes_to_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def rss_mb() -> float | None:
    """The resident set now (Linux), else None."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the process's peak RSS (and so ru_maxrss) to what it uses now (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def ceiling(memory: Any, spec: str, sample_path: str, batch_size: int) -> dict[str, Any]:
    """The embedder's own batched rate on the sample: a fresh instance built like the Memory's
    (so no cache is shared), warmed, then the texts `batch_size` at a time."""
    from dspy_memory.embed import make_embedder

    config = memory.config
    embedder = make_embedder(
        spec,
        batch_size=config.embed_batch_size,
        cache_size=config.embed_cache_size,
        local_backend=config.local_backend,
        batch_wait_ms=config.embed_batch_wait_ms,
    )
    texts = json.loads(Path(sample_path).read_text(encoding="utf-8"))
    embedder.embed([f"warming up the model, text {i}" for i in range(WARM_TEXTS)])
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        embedder.embed(texts[start : start + batch_size])
    seconds, count = time.perf_counter() - started, len(texts)
    if hasattr(embedder, "close"):
        embedder.close()
    del embedder, texts
    gc.collect()
    return {"texts": count, "seconds": seconds}


def child(job: dict[str, Any]) -> dict[str, Any]:
    """Runs in its own process: warm, ceiling, ingest, ceiling, ingest again."""
    from dspy_memory import Memory

    opened = time.perf_counter()
    memory = Memory(job["location"], embedder=job["embedder"])
    try:
        memory.search("warm up", user_id=USER)  # loads the model and opens the store
        memory.embedder.embed(["warm"])
        inner = getattr(memory.embedder, "inner", memory.embedder)
        result: dict[str, Any] = {
            "embedder": memory.embedder.name,
            "embedder backend": getattr(inner, "backend", type(inner).__name__),
            "open s": time.perf_counter() - opened,
        }
        before = ceiling(memory, job["embedder"], job["sample"], job["batch_size"])
        result["peak RSS MB, open and ceiling"] = peak_rss_mb()
        gc.collect()
        result["RSS MB, before ingest"] = rss_mb()
        reset = reset_peak_rss()
        result["peak RSS scope"] = "the ingest (peak reset before it)" if reset else "the whole child"
        along: dict[int, float | None] = {}

        def on_progress(progress: Any) -> None:
            if progress.total:
                along.setdefault(min(10, 10 * progress.done // progress.total), rss_mb())

        started = time.perf_counter()
        first = memory.ingest(
            job["file"], user_id=USER, format=job["format"], infer=False, batch_size=job["batch_size"],
            on_progress=on_progress,
        )  # fmt: skip
        result["ingest s"] = time.perf_counter() - started
        # The kernel updates the peak lazily: a sample taken along the way can read a little above it.
        result["peak RSS MB"] = max([peak_rss_mb(), *(v for v in along.values() if v is not None)])
        result["RSS MB along the file (tenths)"] = {f"{k / 10:.1f}": v for k, v in sorted(along.items())}
        result["first"] = first.model_dump(exclude={"refused"}) | {"refused": first.refused[:5]}
        after = ceiling(memory, job["embedder"], job["sample"], job["batch_size"])
        result["ceiling"] = {"before": before, "after": after}
        started = time.perf_counter()
        second = memory.ingest(
            job["file"], user_id=USER, format=job["format"], infer=False, batch_size=job["batch_size"]
        )
        result["re-run s"] = time.perf_counter() - started
        result["second"] = second.model_dump(exclude={"refused"})
        result["stored rows"] = memory.stats()["tables"]["memories"]
    finally:
        memory.close()
    return result


# -- the parent --------------------------------------------------------------------------------


def run_child(job: dict[str, Any]) -> dict[str, Any]:
    """The child's result (the last line it prints); its stderr passes through."""
    command = [sys.executable, "-m", "evals.bench_ingest", "--child", json.dumps(job)]
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the ingest child failed ({done.returncode}) on {job['file']}:\n{done.stdout}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(dataset: dict[str, Any], places: Any, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    name, path = dataset["name"], Path(dataset["file"])
    stage(f"{name}: picking the ceiling's texts from {path.name}")
    total, texts = sample_texts(path, dataset["format"], args.ceiling_sample)
    sample = Path(places.tmp) / f"sample_{name.replace(' ', '_')}.json"
    sample.write_text(json.dumps(texts), encoding="utf-8")
    del texts
    location = places.location(backend, f"ingest_{name}")
    try:
        stage(f"{name}: {total} messages, ingest in a child process ({backend}, {args.embedder})")
        job = {
            "file": str(path), "format": dataset["format"], "location": location, "embedder": args.embedder,
            "batch_size": args.batch_size, "sample": str(sample),
        }  # fmt: skip
        out = run_child(job)
        places.settle(backend, location)
        db_mb = places.size_mb(backend, location)
    finally:
        places.drop(backend, location)
        sample.unlink(missing_ok=True)
    first, second, ceilings = out["first"], out["second"], out["ceiling"]
    rates = {when: c["texts"] / c["seconds"] for when, c in ceilings.items()}
    mean = (rates["before"] + rates["after"]) / 2
    per_s = first["memories"] / out["ingest s"] if out["ingest s"] else 0.0
    return {
        "dataset": name,
        "backend": backend,
        "format": dataset["format"],
        "messages in file": total,
        "messages": first["messages"],
        "stored": first["stored"],
        "memories": first["memories"],
        "ingest s": out["ingest s"],
        "memories/s": per_s,
        "ceiling texts": ceilings["before"]["texts"],
        "ceiling texts/s before": rates["before"],
        "ceiling texts/s after": rates["after"],
        "ceiling texts/s": mean,
        "ingest/ceiling": per_s / mean if mean else 0.0,
        "peak RSS MB": out["peak RSS MB"],
        "RSS MB, before ingest": out["RSS MB, before ingest"],
        "input MB": path.stat().st_size / 1e6,
        "db MB": db_mb,
        "re-run s": out["re-run s"],
        "re-run already": second["already"],
        "re-run stored": second["stored"],
        "child": out,
    }


def datasets(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    found = []
    if args.locomo:
        if not Path(args.locomo).is_file():
            raise SystemExit(
                f"{args.locomo}: no LoCoMo file there: `python -m evals.locomo download`, then "
                f"`python -m evals.locomo split --out {args.locomo}` (--locomo '' leaves it out)"
            )
        found.append({"name": "locomo dev", "file": args.locomo, "format": "locomo"})
    for size in sorted({max(1, args.synthetic // 10), args.synthetic} if args.synthetic else set()):
        stage(f"writing {size} synthetic messages")
        path = write_synthetic(tmp / f"synthetic_{size}.jsonl", size, args.seed)
        found.append({"name": f"synthetic {size}", "file": str(path), "format": "jsonl"})
    return found


HEADERS = (
    "dataset",
    "messages",
    "ingest s",
    "memories/s",
    "ceiling texts/s (before/after)",
    "ingest/ceiling %",
    "peak RSS MB",
    "input MB",
    "db MB",
    "re-run s",
    "re-run already",
)


def rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            r["dataset"] + ("" if r["backend"] == "sqlite" else f" ({r['backend']})"),
            r["messages"],
            r["ingest s"],
            r["memories/s"],
            f"{r['ceiling texts/s before']:.0f} / {r['ceiling texts/s after']:.0f}",
            100 * r["ingest/ceiling"],
            r["peak RSS MB"],
            r["input MB"],
            r["db MB"],
            r["re-run s"],
            r["re-run already"],
        ]
        for r in results
    ]


RSS_HEADERS = ("dataset", "before", *(f"{t / 10:.1f}" for t in range(11)), "peak")


def rss_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """The RSS along the file: after the first batch that had read at least each tenth of it ("-": no
    batch ended in that tenth)."""
    found = []
    for r in results:
        along = r["child"]["RSS MB along the file (tenths)"]
        found.append(
            [
                r["dataset"] + ("" if r["backend"] == "sqlite" else f" ({r['backend']})"),
                r["RSS MB, before ingest"],
                *(along.get(f"{t / 10:.1f}", "-") for t in range(11)),
                r["peak RSS MB"],
            ]
        )
    return found


def verdict(result: dict[str, Any]) -> str:
    ratio = result["ingest/ceiling"]
    return (
        f"{result['dataset']} ({result['backend']}): ingest reaches {ratio:.0%} of the embedder's batched "
        f"rate (>= {TARGET:.0%}: {'yes' if ratio >= TARGET else 'no'})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--locomo",
        default=os.environ.get("LOCOMO_DEV") or "data/locomo_dev.json",
        help="LoCoMo's development conversations (default $LOCOMO_DEV or data/locomo_dev.json, which "
        "`python -m evals.locomo split --out data/locomo_dev.json` writes); '' to skip",
    )
    parser.add_argument("--synthetic", type=int, default=100_000, help="messages (also N/10); 0 to skip")
    parser.add_argument("--embedder", default="local", help="an embedder spec: local (MiniLM), test, ...")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the ingest's (RAW_BATCH)")
    parser.add_argument(
        "--ceiling-sample", type=int, default=10_000, help="texts the ceiling embeds, evenly spread"
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--postgres-url", default=None, help="default: start one with pgserver")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_ingest.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_ingest.png"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child)), default=str))
        return 0
    from dspy_memory.write.ingest import RAW_BATCH
    from evals.bench_backends import Places, postgres_server

    args.batch_size = args.batch_size or RAW_BATCH
    if args.ceiling_sample < 1:
        parser.error("--ceiling-sample must be at least 1")
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp,
        postgres_server(args.postgres_url, backends) as (url, server),
    ):
        places = Places(tmp, url)
        for dataset in datasets(args, Path(tmp)):
            for backend in backends:
                results.append(measure(dataset, places, backend, args))
    if not results:
        raise SystemExit("nothing to measure: give --locomo or --synthetic")
    embedder = results[0]["child"]["embedder"]
    heading = (
        f"Raw ingestion ({embedder}, {results[0]['child']['embedder backend']}; batches of "
        f"{args.batch_size}; the ceiling on <= {args.ceiling_sample} of each file's texts, before / after "
        "the ingest, the ratio against their mean; peak RSS of "
        f"{results[0]['child']['peak RSS scope']})"
    )
    text = "\n".join(
        [
            heading,
            "",
            table(HEADERS, rows(results)),
            "",
            *map(verdict, results),
            "",
            "Resident memory of the ingest child (MB): before the ingest, on reaching each tenth of the file, "
            "and the ingest's peak",
            "",
            table(RSS_HEADERS, rss_rows(results)),
        ]
    )
    print("\n" + text)
    save(
        {"args": vars(args), "machine": machine(), "postgres": server, "results": results},
        out=args.out,
        plot=args.plot,
        groups=[r["dataset"] + ("" if r["backend"] == "sqlite" else f" {r['backend']}") for r in results],
        series={
            "ingest memories/s": [r["memories/s"] for r in results],
            "embedder ceiling texts/s": [r["ceiling texts/s"] for r in results],
        },
        title=f"Raw ingestion vs the embedder's batched rate ({args.embedder})",
        ylabel="per second",
        text=text,
        command=command_line("evals.bench_ingest", argv),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
