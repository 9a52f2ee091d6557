"""LongMemEval retrieval: does memory find the sessions and turns that hold the answer?

    python -m evals.longmemeval --data longmemeval_s_cleaned.json [--limit N] [--embedder local]
    python -m evals.longmemeval --hub xiaowu0162/longmemeval-cleaned --file longmemeval_s_cleaned.json

Reads the public format (a JSON list of instances with question_id, question_type, question,
answer, question_date, haystack_session_ids, haystack_dates, haystack_sessions, and
answer_session_ids; answer turns carry "has_answer": true) from a local path, or downloads it
from the Hugging Face hub where a network is available. Each instance's haystack goes into its
own scope, one episode per turn, then the question is searched. Metrics as the benchmark defines
them (src/retrieval/eval_utils.py): recall_any@k, recall_all@k and nDCG@k, at turn level and at
session level (turn results mapped to sessions, k widened until k distinct sessions).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from evals.report import RESULTS_DIR, machine, percentile, progress, save, table

KS = (5, 10)


def load_longmemeval(
    path: str | Path | None = None, *, hub: str | None = None, file: str | None = None
) -> list[dict[str, Any]]:
    """Instances from a local file, or from the hub (`hub` repo id and `file` name)."""
    if path is None:
        if hub is None or file is None:
            raise ValueError("give --data PATH, or --hub REPO_ID with --file NAME")
        from huggingface_hub import hf_hub_download  # a datasets dependency

        path = hf_hub_download(repo_id=hub, filename=file, repo_type="dataset")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no LongMemEval file at {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    required = {"question_id", "question", "haystack_session_ids", "haystack_sessions", "haystack_dates"}
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and required <= set(item) for item in data
    ):
        raise ValueError(
            f"{path} is not in the LongMemEval format (a list of instances with {sorted(required)})"
        )
    return data


def parse_date(text: str) -> datetime:
    """LongMemEval dates look like "2023/04/10 (Mon) 17:50"."""
    parts = text.split()
    return datetime.strptime(f"{parts[0]} {parts[-1]}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def turn_id(session_id: str, index: int) -> str:
    return f"{session_id}_{index + 1}"


def _dcg(relevances: list[int]) -> float:
    return sum(relevance / math.log2(position + 2) for position, relevance in enumerate(relevances))


def retrieval_scores(ranked: list[str], correct: list[str], corpus: list[str], k: int) -> dict[str, float]:
    """recall_any@k, recall_all@k and nDCG@k as LongMemEval computes them (every ranked item
    whose id is correct counts, duplicates included; the ideal ranks all correct corpus items first)."""
    top = set(ranked[:k])
    relevances = [1 if item in correct else 0 for item in ranked[:k]]
    ideal = sorted((1 if item in correct else 0 for item in corpus), reverse=True)[:k]
    ideal_dcg = _dcg(ideal)
    return {
        "recall_any": float(any(item in top for item in correct)),
        "recall_all": float(all(item in top for item in correct)),
        "ndcg": _dcg(relevances) / ideal_dcg if ideal_dcg else 0.0,
    }


def session_scores(
    ranked_turns: list[str], correct_sessions: list[str], corpus_turns: list[str], k: int
) -> dict[str, float]:
    """Turn results mapped to their sessions, k widened until it covers k distinct sessions."""

    def session(item: str) -> str:
        return item.rsplit("_", 1)[0]

    ranked = [session(item) for item in ranked_turns]
    corpus = [session(item) for item in corpus_turns]
    effective = k
    while effective < len(ranked) and len(set(ranked[:effective])) < k:
        effective += 1
    return retrieval_scores(ranked, correct_sessions, corpus, effective)


def evaluate_instance(memory: Memory, instance: dict[str, Any], *, recipe: str) -> dict[str, Any]:
    scope = f"lme-{instance['question_id']}"
    corpus: list[str] = []
    correct_turns: list[str] = []
    for session_id, date, turns in zip(
        instance["haystack_session_ids"], instance["haystack_dates"], instance["haystack_sessions"]
    ):
        messages = []
        for index, turn in enumerate(turns):
            identifier = turn_id(session_id, index)
            corpus.append(identifier)
            if turn.get("has_answer"):
                correct_turns.append(identifier)
            messages.append(
                {
                    "role": turn["role"],
                    "content": turn["content"],
                    "metadata": {"turn_id": identifier, "session_id": session_id},
                }
            )
        if messages:
            memory.add(messages, user_id=scope, at=parse_date(date), infer=False)
    start = time.perf_counter()
    hits = memory.search(instance["question"], user_id=scope, k=max(KS) * 5, recipe=recipe)
    latency = (time.perf_counter() - start) * 1000
    ranked = [hit.memory.metadata.get("turn_id") for hit in hits]
    correct_sessions = list(instance.get("answer_session_ids") or [])
    row: dict[str, Any] = {
        "question_id": instance["question_id"],
        "type": instance.get("question_type", "?"),
        "search_ms": latency,
    }
    for k in KS:
        for name, value in session_scores(ranked, correct_sessions, corpus, k).items():
            row[f"session_{name}@{k}"] = value
        if correct_turns:
            for name, value in retrieval_scores(ranked, correct_turns, corpus, k).items():
                row[f"turn_{name}@{k}"] = value
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=None, help="a LongMemEval JSON file")
    parser.add_argument(
        "--hub", default=None, help="a Hugging Face dataset id, e.g. xiaowu0162/longmemeval-cleaned"
    )
    parser.add_argument(
        "--file", default=None, help="the file in the hub dataset, e.g. longmemeval_s_cleaned.json"
    )
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--recipe", default="hybrid")
    parser.add_argument("--limit", type=int, default=None, help="only the first N instances")
    parser.add_argument("--threads", type=int, default=1, help="instances in parallel (one memory file)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "longmemeval.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "longmemeval.png"))
    args = parser.parse_args(argv)
    instances = load_longmemeval(args.data, hub=args.hub, file=args.file)[: args.limit]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "lme.db", embedder=args.embedder) as memory:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, args.threads)) as pool:
            jobs = [
                pool.submit(evaluate_instance, memory, instance, recipe=args.recipe) for instance in instances
            ]
            rows = [job.result() for job in progress(jobs, desc="questions")]
    metrics = [
        f"{level}_{name}@{k}"
        for level in ("session", "turn")
        for k in KS
        for name in ("recall_any", "recall_all", "ndcg")
    ]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups["overall"].append(row)
        groups[row["type"]].append(row)
    summary = {
        name: {
            "questions": len(items),
            **{
                m: sum(r[m] for r in items if m in r) / max(1, sum(1 for r in items if m in r))
                for m in metrics
            },
        }
        for name, items in groups.items()
    }
    results = {
        "machine": machine(),
        "recipe": args.recipe,
        "summary": summary,
        "rows": rows,
        "search_ms_p50": percentile([r["search_ms"] for r in rows], 50),
    }
    order = ["overall", *sorted(name for name in summary if name != "overall")]
    print(f"LongMemEval retrieval: {len(rows)} questions, recipe {args.recipe}\n")
    shown = [
        "session_recall_any@5",
        "session_recall_any@10",
        "session_ndcg@10",
        "turn_recall_any@10",
        "turn_ndcg@10",
    ]
    print(
        table(
            ["type", "questions", *shown],
            [[name, summary[name]["questions"], *(summary[name][m] for m in shown)] for name in order],
        )
    )
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=order,
        series={"session recall_any@10": [summary[n]["session_recall_any@10"] for n in order]},
        title="LongMemEval retrieval",
        ylabel="share of questions",
    )
    return results


if __name__ == "__main__":
    main()
