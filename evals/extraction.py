"""The extraction eval: do the facts extracted from a session match LoCoMo's observations?

    python -m evals.extraction --data data/locomo10.json [--lm MODEL]
        [--limit N] [--threads T] [--embedder local|test]
    dspy-memory eval extraction --lm ollama_chat/llama3.2 --data data/locomo10.json   (the same, installed)

Built at run time from a LoCoMo file (it may not be copied into the repository): one case per
session, input = the session's turns with its date, reference = that session's `observation`
facts for both speakers. Predicted and reference facts are matched one to one by MiniLM cosine
similarity >= 0.8 (evals/metrics.py); precision, recall and F1 are per session, averaged.
Without --lm the baseline "every turn is a fact" runs (no LM), which is what raw mode stores.
Model strings are built by `dspy_memory.util.lm.make_lm`. Per conversation and overall: precision,
recall, F1, LM calls, tokens, latency p50/p95 per session and failed calls; written to --out
(JSON), the same name with .md, and --plot (PNG).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dspy_memory.util.lm import lm_name, make_lm, run_program, short_error
from evals.locomo import Conversation, add_data_arguments, conversations_from_args
from evals.metrics import FACT_MATCH_THRESHOLD, match_facts
from evals.report import RESULTS_DIR, command_line, machine, percentile, progress, save, stage, table
from evals.sampling import add_limit_arguments, stratified


def extraction_cases(conversations: list[Conversation]) -> list[dict[str, Any]]:
    """One case per session that has reference observations."""
    cases = []
    for conversation in conversations:
        for session in conversation.sessions:
            observed = conversation.observations.get(f"session_{session.index}_observation") or {}
            reference = [item[0] for facts in observed.values() for item in facts if item and item[0]]
            if not reference:
                continue
            cases.append(
                {
                    "id": f"{conversation.sample_id}/session_{session.index}",
                    "observed_at": f"{session.date_time:%Y-%m-%d (%A)}",
                    "turns": [
                        {
                            "speaker": turn.speaker,
                            "text": turn.content(),
                            "time": f"{session.date_time:%Y-%m-%d %H:%M}",
                        }
                        for turn in session.turns
                    ],
                    "context": f"A conversation between {conversation.speaker_a} and {conversation.speaker_b}.",
                    "reference": reference,
                }
            )
    return cases


def as_dataset(cases: list[dict[str, Any]]) -> Any:
    """The cases as a Hugging Face `datasets.Dataset` (for sharing, filtering, mapping)."""
    import datasets

    return datasets.Dataset.from_list(cases)


def baseline_facts(case: dict[str, Any]) -> list[str]:
    return [f"{turn['speaker']}: {turn['text']}" for turn in case["turns"]]


def run(cases: list[dict[str, Any]], *, lm: Any, embed: Any, threads: int = 1) -> dict[str, Any]:
    from dspy_memory.programs import FactExtractor, Turn

    module = FactExtractor()

    def one(case: dict[str, Any]) -> dict[str, Any]:
        start = time.perf_counter()
        usage, error = None, None
        if lm is None:
            predicted = baseline_facts(case)
        else:
            inputs = {
                "turns": [Turn(**turn) for turn in case["turns"]],
                "observed_at": case["observed_at"],
                "context": case["context"],
            }
            try:
                prediction, usage = run_program(module, lm, inputs, max_attempts=1)
                predicted = [fact.content for fact in prediction.facts or []]
            except Exception as exc:  # a failed answer extracts nothing, and says why
                predicted, error, usage = [], short_error(exc), getattr(exc, "usage", None)
        scores = match_facts(predicted, case["reference"], embed)
        return {
            "id": case["id"],
            "predicted": len(predicted),
            "reference": len(case["reference"]),
            **{key: scores[key] for key in ("precision", "recall", "f1")},
            "error": error,
            "lm_calls": usage.lm_calls if usage else 0,
            "tokens": (usage.prompt_tokens + usage.completion_tokens) if usage else 0,
            "seconds": time.perf_counter() - start,
        }

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        rows = list(progress(pool.map(one, cases), total=len(cases), desc="sessions"))
    by_conversation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_conversation[row["id"].split("/")[0]].append(row)
    return {
        **summarize(rows),
        "conversations": {name: summarize(items) for name, items in by_conversation.items()},
        "cases": rows,
        "threshold": FACT_MATCH_THRESHOLD,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means per session of precision, recall and F1; totals of cost; latency per session."""
    return {
        "sessions": len(rows),
        **{key: sum(row[key] for row in rows) / max(len(rows), 1) for key in ("precision", "recall", "f1")},
        "lm_calls": sum(row["lm_calls"] for row in rows),
        "tokens": sum(row["tokens"] for row in rows),
        "latency_ms_p50": percentile([row["seconds"] * 1000 for row in rows], 50),
        "latency_ms_p95": percentile([row["seconds"] * 1000 for row in rows], 95),
        "failed": sum(1 for row in rows if row["error"]),
    }


COLUMNS = ["sessions", "precision", "recall", "F1", "LM calls", "tokens", "p50 ms", "p95 ms", "failed"]
KEYS = [
    "sessions",
    "precision",
    "recall",
    "f1",
    "lm_calls",
    "tokens",
    "latency_ms_p50",
    "latency_ms_p95",
    "failed",
]


def report_text(results: dict[str, Any]) -> str:
    """What the runner prints and the Markdown report holds: overall, then per conversation."""
    groups = {"overall": results, **results["conversations"]}
    return "\n".join(
        [
            f"Extraction eval: {results['sessions']} sessions, {results['lm']}, matching by "
            f"{results['embedder']} cosine >= {FACT_MATCH_THRESHOLD}",
            "",
            table(
                ["conversation", *COLUMNS],
                [[name, *(group[key] for key in KEYS)] for name, group in groups.items()],
            ),
        ]
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_arguments(parser)
    parser.add_argument("--lm", default=None, help="DSPy model string (default: the every-turn baseline)")
    add_limit_arguments(parser, "sessions", "conversations")
    parser.add_argument("--threads", type=int, default=1, help="sessions run at once (default 1)")
    parser.add_argument("--embedder", default="local", help="embedder for matching (default: local MiniLM)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "extraction.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "extraction.png"))
    args = parser.parse_args(argv)
    from dspy_memory.embed import make_embedder

    cases = extraction_cases(conversations_from_args(args))
    cases = stratified(cases, args.limit, key=lambda case: case["id"].split("/")[0], seed=args.seed)
    lm = make_lm(args.lm) if args.lm else None
    embedder = make_embedder(args.embedder)
    stage(
        f"extracting facts from {len(cases):,} sessions" + (f" with {args.lm}" if args.lm else " (baseline)")
    )
    results = run(cases, lm=lm, embed=embedder.embed, threads=args.threads)
    results.update(
        machine=machine(),
        lm=lm_name(lm) if lm is not None else "baseline: every turn is a fact",
        embedder=embedder.name,
    )
    text = report_text(results)
    print(text)
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=["precision", "recall", "F1"],
        series={results["lm"]: [results[k] for k in ("precision", "recall", "f1")]},
        title="Fact extraction against LoCoMo observations",
        ylabel="mean per session",
        text=text,
        command=command_line("evals.extraction", argv),
    )
    return results


if __name__ == "__main__":
    main()
