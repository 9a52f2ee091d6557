"""LoCoMo question answering end to end: ingest the conversations, answer every question from
memory, score with the official F1 (and an LM judge), per category, with cost and latency.

    python -m evals.qa --data data/locomo10.json --lm MODEL
        [--ingest raw|lm] [--judge-lm MODEL] [--rewrite] [--budget 1500] [--limit N] [--threads T]
    dspy-memory eval qa --lm ollama_chat/llama3.2 --data data/locomo10.json    (the same, installed)

Categories as released: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop (reported together
as "1-4", the number peers publish), 5 adversarial (reported separately). `--ingest lm` runs the
write program over each session (LM calls and tokens reported); `raw` stores every turn.
Without --lm, the answer is the most relevant memory's text (a no-LM baseline). Model strings
are built by `dspy_memory.util.lm.make_lm` (Ollama models get the native route with num_ctx).
Per category: official F1, the judge's accuracy (--judge-lm), LM calls, tokens, answer latency
p50/p95 and failed answers; written to --out (JSON), the same name with .md, and --plot (PNG).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.util.lm import lm_name, make_lm, run_program, short_error
from evals.locomo import CATEGORY_NAMES, Conversation, add_data_arguments, conversations_from_args
from evals.locomo_retrieval import index_conversation
from evals.metrics import locomo_f1
from evals.report import RESULTS_DIR, command_line, machine, percentile, progress, save, stage, table
from evals.sampling import add_limit_arguments, stratified


def _baseline_answer(memory: Memory, question: str, user: str) -> str:
    hits = memory.search(question, user_id=user, k=1)
    return hits[0].content if hits else "No information available"


def ingest(memory: Memory, conversations: list[Conversation], *, mode: str) -> dict[str, Any]:
    start = time.perf_counter()
    before = memory.stats()["writes"]
    total = sum(len(c.turns) for c in conversations)
    stage(f"ingesting {total:,} turns of {len(conversations)} conversations ({mode})")
    turns = sum(
        index_conversation(memory, c, infer=mode == "lm")
        for c in progress(conversations, desc="conversations")
    )
    after = memory.stats()["writes"]
    return {
        "mode": mode,
        "turns": turns,
        "seconds": time.perf_counter() - start,
        **{key: after[key] - before[key] for key in ("lm_calls", "prompt_tokens", "completion_tokens")},
    }


def answer_all(
    memory: Memory,
    conversations: list[Conversation],
    *,
    lm: Any,
    judge_lm: Any = None,
    categories: tuple[int, ...] = (1, 2, 3, 4, 5),
    limit: int | None = None,
    seed: int = 0,
    rewrite: bool = False,
    budget: int = 1500,
    threads: int = 1,
) -> list[dict[str, Any]]:
    from dspy_memory.programs import AnswerJudge

    work = [
        (conversation, question)
        for conversation in conversations
        for question in conversation.questions
        if question.category in categories
    ]
    work = stratified(work, limit, key=lambda item: item[1].category, seed=seed)
    stage(f"answering {len(work):,} questions" + (" and judging the answers" if judge_lm is not None else ""))

    def one(item: tuple[Conversation, Any]) -> dict[str, Any]:
        conversation, question = item
        today = conversation.sessions[-1].date_time if conversation.sessions else None
        start = time.perf_counter()
        calls = tokens = 0
        error = None
        try:
            if lm is None:
                answer = _baseline_answer(memory, question.question, conversation.sample_id)
            else:
                result = memory.answer(
                    question.question,
                    user_id=conversation.sample_id,
                    today=today,
                    budget_tokens=budget,
                    rewrite=rewrite,
                )
                answer = result.answer
                calls, tokens = (
                    result.usage.lm_calls,
                    result.usage.prompt_tokens + result.usage.completion_tokens,
                )
        except Exception as exc:  # a failed answer scores 0, and says why
            answer, error = "", short_error(exc)
            spent = getattr(exc, "usage", None)  # what the failed attempts cost
            if spent is not None:
                calls, tokens = spent.lm_calls, spent.prompt_tokens + spent.completion_tokens
        seconds = time.perf_counter() - start
        row = {
            "conversation": conversation.sample_id,
            "category": question.category,
            "question": question.question,
            "gold": question.answer,
            "answer": answer,
            "f1": locomo_f1(answer, question.answer, question.category),
            "lm_calls": calls,
            "tokens": tokens,
            "seconds": seconds,
            "error": error,
        }
        if judge_lm is not None and question.category != 5:
            try:
                verdict, usage = run_program(
                    AnswerJudge(),
                    judge_lm,
                    {"question": question.question, "gold_answer": question.answer, "answer": answer},
                    max_attempts=2,
                )
            except Exception as exc:  # an unjudged answer is left out of the judge's mean
                row["judge_error"], usage = short_error(exc), getattr(exc, "usage", None)
            else:
                row["judge"] = 1.0 if verdict.correct else 0.0
            row["judge_lm_calls"] = usage.lm_calls if usage else 0
            row["judge_tokens"] = (usage.prompt_tokens + usage.completion_tokens) if usage else 0
        return row

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(progress(pool.map(one, work), total=len(work), desc="questions"))


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[CATEGORY_NAMES.get(row["category"], str(row["category"]))].append(row)
        if row["category"] != 5:
            groups["1-4"].append(row)
    summary = {}
    for name, items in groups.items():
        judged = [item["judge"] for item in items if "judge" in item]
        summary[name] = {
            "questions": len(items),
            "f1": sum(item["f1"] for item in items) / len(items),
            "judge": sum(judged) / len(judged) if judged else None,
            "lm_calls": sum(item["lm_calls"] for item in items),
            "tokens": sum(item["tokens"] for item in items),
            "latency_ms_p50": percentile([item["seconds"] * 1000 for item in items], 50),
            "latency_ms_p95": percentile([item["seconds"] * 1000 for item in items], 95),
            "failed": sum(1 for item in items if item.get("error")),
            "judge_lm_calls": sum(item.get("judge_lm_calls", 0) for item in items),
            "judge_tokens": sum(item.get("judge_tokens", 0) for item in items),
        }
    return summary


def report_text(results: dict[str, Any]) -> str:
    """What the runner prints and the Markdown report holds."""
    summary, ingestion = results["summary"], results["ingestion"]
    order = [name for name in ("1-4", *CATEGORY_NAMES.values()) if name in summary]
    everything = [summary[name] for name in order if name != "1-4"]  # "1-4" repeats 1 to 4
    judge = "no judge"
    if results["judge_lm"]:
        judge = (
            f"judge {results['judge_lm']} ({sum(s['judge_lm_calls'] for s in everything)} LM calls, "
            f"{sum(s['judge_tokens'] for s in everything)} tokens)"
        )
    lines = [
        f"LoCoMo QA: {sum(s['questions'] for s in everything)} questions, LM {results['lm']}, {judge}.",
        "",
        f"Ingestion {ingestion['mode']}: {ingestion['turns']} turns in {ingestion['seconds']:.1f} s, "
        f"{ingestion['lm_calls']} LM calls, {ingestion['prompt_tokens'] + ingestion['completion_tokens']} tokens.",
        "",
        table(
            ["category", "questions", "F1", "judge", "LM calls", "tokens", "p50 ms", "p95 ms", "failed"],
            [
                [
                    name,
                    summary[name]["questions"],
                    summary[name]["f1"],
                    "-" if summary[name]["judge"] is None else summary[name]["judge"],
                    summary[name]["lm_calls"],
                    summary[name]["tokens"],
                    summary[name]["latency_ms_p50"],
                    summary[name]["latency_ms_p95"],
                    summary[name]["failed"],
                ]
                for name in order
            ],
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_arguments(parser)
    parser.add_argument("--lm", default=None, help="DSPy model string (default: the no-LM baseline)")
    parser.add_argument("--judge-lm", default=None, help="score with JudgeAnswer too (categories 1-4)")
    parser.add_argument("--ingest", choices=("raw", "lm"), default="raw")
    parser.add_argument("--rewrite", action="store_true", help="plan searches with RewriteQuery first")
    parser.add_argument("--budget", type=int, default=1500, help="context token budget")
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    add_limit_arguments(parser, "questions", "categories")
    parser.add_argument("--threads", type=int, default=1, help="questions answered at once (default 1)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "qa.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "qa.png"))
    args = parser.parse_args(argv)
    lm = make_lm(args.lm) if args.lm else None
    judge = make_lm(args.judge_lm) if args.judge_lm else None
    return evaluate(
        conversations_from_args(args)[: args.conversations],
        lm=lm,
        judge_lm=judge,
        ingest_mode=args.ingest,
        rewrite=args.rewrite,
        budget=args.budget,
        embedder=args.embedder,
        limit=args.limit,
        seed=args.seed,
        threads=args.threads,
        out=args.out,
        plot=args.plot,
        command=command_line("evals.qa", argv),
    )


def evaluate(
    conversations: list[Conversation],
    *,
    lm: Any,
    judge_lm: Any = None,
    ingest_mode: str = "raw",
    rewrite: bool = False,
    budget: int = 1500,
    embedder: Any = "local",
    limit: int | None = None,
    seed: int = 0,
    threads: int = 1,
    out: str | Path,
    plot: str | Path,
    command: str | None = None,
) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory(Path(tmp) / "qa.db", embedder=embedder, lm=lm) as memory,
    ):
        ingestion = ingest(memory, conversations, mode=ingest_mode)
        rows = answer_all(
            memory,
            conversations,
            lm=lm,
            judge_lm=judge_lm,
            limit=limit,
            seed=seed,
            rewrite=rewrite,
            budget=budget,
            threads=threads,
        )
    summary = summarize(rows)
    results = {
        "machine": machine(),
        "lm": lm_name(lm) if lm is not None else "baseline: top memory",
        "judge_lm": lm_name(judge_lm) if judge_lm is not None else None,
        "ingestion": ingestion,
        "summary": summary,
        "rows": rows,
    }
    text = report_text(results)
    print(text)
    order = [name for name in ("1-4", *CATEGORY_NAMES.values()) if name in summary]
    save(
        results,
        out=out,
        plot=plot,
        groups=order,
        series={
            "F1": [summary[name]["f1"] for name in order],
            **({"judge": [summary[name]["judge"] or 0.0 for name in order]} if judge_lm is not None else {}),
        },
        title="LoCoMo QA (official F1)",
        ylabel="mean F1",
        text=text,
        command=command,
    )
    return results


if __name__ == "__main__":
    main()
