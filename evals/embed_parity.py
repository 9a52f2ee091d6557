"""Does the numpy forward pass give sentence-transformers' vectors, and what does each cost?

    python -m evals.embed_parity --data data/locomo10.json --turns 1000

Embeds the first N turns of a LoCoMo file with both backends of the local embedder (numpy and
sentence-transformers; the latter needs `pip install 'dspy-memory[sentence-transformers]'`),
prints the cosine between the two vectors of each turn (min, median) and the throughput of
each backend side by side, batched and one text at a time. `--write-reference FILE` stores
sentence-transformers' vectors of the library's own reference sentences (no LoCoMo text, whose
license forbids copying it) for tests/test_numpy_bert.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from evals.locomo import load_locomo, select_split
from evals.report import command_line, save, table

# Reference sentences for the stored vectors: everyday memory text, plus edge cases the
# tokenizer and the attention mask must get right (empty, punctuation only, accents, CJK,
# emoji, numbers, one long text that is cut at 256 tokens, padding next to long neighbours).
REFERENCE_TEXTS = [
    "Ada moved to Denver last month.",
    "I live in Somerville, just outside Boston.",
    "My cat Miso sleeps all day on the sofa.",
    "I work night shifts at the hospital.",
    "The quarterly report is late again.",
    "Where does Ada live now?",
    "what is ada's job",
    "Caroline went to an LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "We adopted a rescue dog called Biscuit in March.",
    "Ben's favourite band is Radiohead; he saw them twice.",
    "I'm allergic to peanuts, so no satay for me please.",
    "Remind me to call the dentist on Tuesday at 3pm.",
    "The meeting moved from Room 4B to the big conference room.",
    "Jules has been learning the cello for two years.",
    "Forget what I said about my address.",
    "Actually I meant Denver, not Boston.",
    "Yes, last Tuesday.",
    "ok",
    "",
    "   ",
    "!!! ??? ...",
    "Café au lait, naïve façade, Ångström, Zürich.",
    "東京で寿司を食べました。",
    "Best trip ever 🎉🏔️ — can't wait to go back!",
    "Order #12345 shipped on 2024-05-02 for $1,299.99.",
    "user: hi\nassistant: hello! how can I help?",
    "C'est la vie; das ist gut; ¿qué tal?",
    "A" * 40,
    " ".join(["The hike up the ridge took longer than we planned because of the snow."] * 30),
]


def locomo_turns(path: Path, limit: int) -> list[str]:
    conversations = select_split(load_locomo(path))
    texts = [turn.text for conversation in conversations for turn in conversation.turns]
    return texts[:limit]


def _throughput(embedder: Any, texts: list[str], *, one_at_a_time: int) -> dict[str, float]:
    started = time.perf_counter()
    vectors = embedder._embed_batch(texts)
    batched = time.perf_counter() - started
    single = []
    for text in texts[:one_at_a_time]:
        started = time.perf_counter()
        embedder._embed_batch([text])
        single.append(time.perf_counter() - started)
    return {
        "vectors": np.asarray(vectors, dtype=np.float32),
        "batched_per_s": len(texts) / batched,
        "one_text_ms": statistics.median(single) * 1000,
    }


def compare(texts: list[str], *, one_at_a_time: int = 100) -> dict[str, Any]:
    from dspy_memory.embed.local import LocalEmbedder

    numpy_embedder = LocalEmbedder(backend="numpy")
    torch_embedder = LocalEmbedder(backend="sentence-transformers")
    load = {}
    for name, embedder in (("numpy", numpy_embedder), ("sentence-transformers", torch_embedder)):
        started = time.perf_counter()
        embedder._load()
        load[name] = time.perf_counter() - started
    fast = _throughput(numpy_embedder, texts, one_at_a_time=one_at_a_time)
    slow = _throughput(torch_embedder, texts, one_at_a_time=one_at_a_time)
    cosines = (fast.pop("vectors") * slow.pop("vectors")).sum(axis=1)
    worst = int(np.argmin(cosines))
    return {
        "texts": len(texts),
        "cosine_min": float(cosines.min()),
        "cosine_median": float(np.median(cosines)),
        "worst_text_chars": len(texts[worst]),
        "load_s": load,
        "numpy": fast,
        "sentence-transformers": slow,
    }


def write_reference(path: Path) -> None:
    from dspy_memory.embed.local import LocalEmbedder

    embedder = LocalEmbedder(backend="sentence-transformers")
    vectors = np.asarray(embedder._embed_batch(REFERENCE_TEXTS), dtype=np.float32)
    np.savez_compressed(path, texts=np.array(REFERENCE_TEXTS), vectors=vectors)
    print(f"wrote {len(REFERENCE_TEXTS)} reference vectors from sentence-transformers to {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evals.embed_parity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="a LoCoMo file (default: data/locomo10.json, from python -m evals.locomo download)",
    )
    parser.add_argument("--turns", type=int, default=1000, help="turns to embed (default 1,000)")
    parser.add_argument("--one-at-a-time", type=int, default=100, help="texts timed one by one (default 100)")
    parser.add_argument("--write-reference", type=Path, default=None, help="store reference vectors here")
    parser.add_argument(
        "--out", default="results/embed_parity.json", help="the JSON (Markdown, PNG next to it)"
    )
    args = parser.parse_args(argv)
    if args.write_reference is not None:
        write_reference(args.write_reference)
        return
    from evals.locomo import DEFAULT_DATA

    texts = locomo_turns(args.data or DEFAULT_DATA, args.turns)
    print(f"embedding {len(texts):,} LoCoMo turns with both backends...", file=sys.stderr)
    report = compare(texts, one_at_a_time=args.one_at_a_time)
    backends = ("numpy", "sentence-transformers")
    rows = [
        ["load the model, s", *(f"{report['load_s'][b]:.2f}" for b in backends)],
        ["batched, texts/s", *(f"{report[b]['batched_per_s']:.0f}" for b in backends)],
        ["one text, ms (median)", *(f"{report[b]['one_text_ms']:.1f}" for b in backends)],
    ]
    text = table(["", *backends], rows) + (
        f"\n\ncosine(numpy, sentence-transformers) over {report['texts']:,} turns: "
        f"min {report['cosine_min']:.7f}, median {report['cosine_median']:.7f}"
    )
    print(text)
    save(
        report,
        out=args.out,
        plot=str(Path(args.out).with_suffix(".png")),
        groups=["batched texts/s"],
        series={b: [report[b]["batched_per_s"]] for b in backends},
        title="Local MiniLM: numpy vs sentence-transformers",
        ylabel="texts per second",
        text=text,
        command=command_line("evals.embed_parity", argv),
    )
    if report["cosine_min"] < 0.9999:
        raise SystemExit(f"parity broken: min cosine {report['cosine_min']:.6f} < 0.9999")


if __name__ == "__main__":
    main()
