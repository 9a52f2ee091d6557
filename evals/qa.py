"""LoCoMo question answering end to end: ingest the conversations, answer every question from
memory, score with the official F1 (and an LM judge), per category, with cost and latency.

    python -m evals.qa --data ../shared/data/locomo/locomo_dev5.json --lm MODEL
        [--ingest raw|lm] [--judge-lm MODEL] [--rewrite] [--budget 1500] [--limit N] [--threads T]

Categories as released: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop (reported together
as "1-4", the number peers publish), 5 adversarial (reported separately). `--ingest lm` runs the
write program over each session (LM calls and tokens reported); `raw` stores every turn.
Without --lm, the answer is the most relevant memory's text (a no-LM baseline).
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
from evals.locomo import CATEGORY_NAMES, DEFAULT_DATA, Conversation, load_locomo
from evals.locomo_retrieval import index_conversation
from evals.metrics import locomo_f1
from evals.report import RESULTS_DIR, machine, percentile, progress, save, table


def _baseline_answer(memory: Memory, question: str, user: str) -> str:
    hits = memory.search(question, user_id=user, k=1)
    return hits[0].content if hits else "No information available"


def ingest(memory: Memory, conversations: list[Conversation], *, mode: str) -> dict[str, Any]:
    start = time.perf_counter()
    before = memory.stats()["writes"]
    turns = sum(index_conversation(memory, c, infer=mode == "lm") for c in conversations)
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
    rewrite: bool = False,
    budget: int = 1500,
    threads: int = 1,
) -> list[dict[str, Any]]:
    from dspy_memory.lm import run_program
    from dspy_memory.programs import AnswerJudge

    work = [
        (conversation, question)
        for conversation in conversations
        for question in conversation.questions
        if question.category in categories
    ][:limit]

    def one(item: tuple[Conversation, Any]) -> dict[str, Any]:
        conversation, question = item
        today = conversation.sessions[-1].date_time if conversation.sessions else None
        start = time.perf_counter()
        calls = tokens = 0
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
            answer = f"(failed: {str(exc)[:120]})"
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
        }
        if judge_lm is not None and question.category != 5:
            verdict, usage = run_program(
                AnswerJudge(),
                judge_lm,
                {"question": question.question, "gold_answer": question.answer, "answer": answer},
                max_attempts=2,
            )
            row["judge"] = 1.0 if verdict.correct else 0.0
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
        }
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--lm", default=None, help="DSPy model string (default: the no-LM baseline)")
    parser.add_argument("--judge-lm", default=None, help="score with JudgeAnswer too (categories 1-4)")
    parser.add_argument("--ingest", choices=("raw", "lm"), default="raw")
    parser.add_argument("--rewrite", action="store_true", help="plan searches with RewriteQuery first")
    parser.add_argument("--budget", type=int, default=1500, help="context token budget")
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS_DIR / "qa.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "qa.png"))
    args = parser.parse_args(argv)
    import dspy

    lm = dspy.LM(args.lm) if args.lm else None
    judge = dspy.LM(args.judge_lm) if args.judge_lm else None
    return evaluate(
        load_locomo(args.data)[: args.conversations],
        lm=lm,
        judge_lm=judge,
        ingest_mode=args.ingest,
        rewrite=args.rewrite,
        budget=args.budget,
        embedder=args.embedder,
        limit=args.limit,
        threads=args.threads,
        out=args.out,
        plot=args.plot,
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
    threads: int = 1,
    out: str | Path,
    plot: str | Path,
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
            rewrite=rewrite,
            budget=budget,
            threads=threads,
        )
    summary = summarize(rows)
    results = {
        "machine": machine(),
        "lm": getattr(lm, "model", None) or "baseline: top memory",
        "ingestion": ingestion,
        "summary": summary,
        "rows": rows,
    }
    order = [name for name in ("1-4", *CATEGORY_NAMES.values()) if name in summary]
    print(
        f"LoCoMo QA: {len(rows)} questions, LM {results['lm']}, ingestion {ingestion['mode']} "
        f"({ingestion['turns']} turns in {ingestion['seconds']:.1f} s, {ingestion['lm_calls']} LM calls, "
        f"{ingestion['prompt_tokens'] + ingestion['completion_tokens']} tokens)\n"
    )
    print(
        table(
            ["category", "questions", "F1", "judge", "LM calls", "tokens", "answer p50 ms"],
            [
                [
                    name,
                    summary[name]["questions"],
                    summary[name]["f1"],
                    "-" if summary[name]["judge"] is None else summary[name]["judge"],
                    summary[name]["lm_calls"],
                    summary[name]["tokens"],
                    summary[name]["latency_ms_p50"],
                ]
                for name in order
            ],
        )
    )
    save(
        results,
        out=out,
        plot=plot,
        groups=order,
        series={"F1": [summary[name]["f1"] for name in order]},
        title="LoCoMo QA (official F1)",
        ylabel="mean F1",
    )
    return results


if __name__ == "__main__":
    main()
