"""LongMemEval retrieval: does memory find the turns and sessions that hold the answer?

    python -m evals.longmemeval --data longmemeval_s_cleaned.json [--limit N] [--embedder local]
    python -m evals.longmemeval --hub xiaowu0162/longmemeval-cleaned --file longmemeval_s_cleaned.json

Reads the public format (a JSON list of instances with question_id, question_type, question,
answer, question_date, haystack_session_ids, haystack_dates, haystack_sessions, and
answer_session_ids; evidence turns carry "has_answer": true) from a local path, or downloads it
from the Hugging Face hub where a network is available.

Everything is measured as the benchmark's own retrieval code measures it, cited as
`run_retrieval.py:LINE` and `eval_utils.py:LINE`: files src/retrieval/run_retrieval.py and
src/retrieval/eval_utils.py of github.com/xiaowu0162/LongMemEval at commit
9e0b455f4ef0e2ab8f2e582289761153549043fc. This is its turn-granularity run:

- The corpus is the USER turns of every haystack session, one document each
  (run_retrieval.py:211-225); assistant turns are not indexed. A turn's id is
  `<session id>_<index in the session, counting every turn from 1>`; in an answer session (an id
  containing "answer") a user turn without has_answer is renamed "noans" (line 224).
- Evidence is every corpus id that still contains "answer" (line 272): the has_answer user
  turns of the answer sessions. `answer_session_ids` is not consulted.
- recall_any@k / recall_all@k: whether any / all evidence ids are among the top k
  (eval_utils.py:24-29). nDCG@k ("ndcg_any"): binary relevance, DCG = rel_1 + sum over
  positions p >= 2 of rel_p / log2(p) -- position 2 is NOT discounted (eval_utils.py:4-9) --
  over the ideal DCG of all corpus relevances sorted (lines 12-21).
- Session level from the same ranking (eval_utils.py:32-46): every id loses its last "_part",
  so a "noans" turn counts for a "noans" session, never the answer session; k grows until the
  top k turns span k distinct sessions (the loop runs while effective_k <= corpus size).
- k in 1, 3, 5, 10, 30, 50 (run_retrieval.py:316). Averages skip abstention questions (a
  question_id containing "_abs", line 396) and questions without a has_answer user turn
  (line 400); the runner reports how many it skipped.

The ranking is the memory's search over every indexed turn (k = the corpus size, up to the
search limit); turns it did not return follow in corpus order, so the ranking is a permutation
of the corpus as the benchmark's argsort is.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.read.retrieval import MAX_K
from evals.report import RESULTS_DIR, command_line, machine, percentile, progress, save, table
from evals.sampling import add_limit_arguments, stratified

KS = (1, 3, 5, 10, 30, 50)
LEVELS = ("session", "turn")
METRICS = ("recall_any", "recall_all", "ndcg_any")


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


# -- the benchmark's metrics (eval_utils.py) ----------------------------------------------------


def dcg(relevances: Sequence[float], k: int) -> float:
    """eval_utils.py:4-9: the first position is undiscounted and position p >= 2 is divided by
    log2(p), so positions 1 and 2 both count fully (textbook DCG divides by log2(p + 1))."""
    top = list(relevances)[:k]
    if not top:
        return 0.0
    return top[0] + sum(
        relevance / math.log2(position) for position, relevance in enumerate(top[1:], start=2)
    )


def ndcg(rankings: Sequence[int], correct: Sequence[str], corpus_ids: Sequence[str], k: int) -> float:
    """eval_utils.py:12-21. `rankings` are positions in `corpus_ids`, best first; an id may
    appear more than once in the corpus (sessions, at session level), and each copy counts."""
    relevances = [1 if doc_id in correct else 0 for doc_id in corpus_ids]
    ideal = dcg(sorted(relevances, reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([relevances[index] for index in rankings[:k]], k) / ideal


def evaluate_retrieval(
    rankings: Sequence[int], correct: Sequence[str], corpus_ids: Sequence[str], k: int
) -> dict[str, float]:
    """eval_utils.py:24-29."""
    recalled = {corpus_ids[index] for index in rankings[:k]}
    return {
        "recall_any": float(any(doc_id in recalled for doc_id in correct)),
        "recall_all": float(all(doc_id in recalled for doc_id in correct)),
        "ndcg_any": ndcg(rankings, correct, corpus_ids, k),
    }


def session_of(turn_id: str) -> str:
    """eval_utils.py:34-35: the id without its last "_" part."""
    return "_".join(turn_id.split("_")[:-1])


def evaluate_retrieval_turn2session(
    rankings: Sequence[int], correct: Sequence[str], corpus_ids: Sequence[str], k: int
) -> dict[str, float]:
    """eval_utils.py:32-46: turn ids and evidence mapped to sessions; k grows until the top k
    turns span k distinct sessions (or past the corpus)."""
    correct_sessions = sorted({session_of(doc_id) for doc_id in correct})
    sessions = [session_of(doc_id) for doc_id in corpus_ids]
    effective_k = k
    while effective_k <= len(sessions) and len({sessions[i] for i in rankings[:effective_k]}) < k:
        effective_k += 1
    return evaluate_retrieval(rankings, correct_sessions, sessions, effective_k)


# -- the benchmark's corpus (run_retrieval.py) --------------------------------------------------


@dataclass(frozen=True)
class Turn:
    corpus_id: str
    content: str
    session_id: str
    date: str


def turn_corpus(instance: dict[str, Any]) -> list[Turn]:
    """run_retrieval.py:211-225: the user turns of every session, in order, with their ids."""
    corpus = []
    for session_id, date, turns in zip(
        instance["haystack_session_ids"], instance["haystack_dates"], instance["haystack_sessions"]
    ):
        for index, turn in enumerate(turns):
            if turn["role"] != "user":
                continue
            corpus_id = f"{session_id}_{index + 1}"
            if "answer" in session_id and not turn.get("has_answer"):
                corpus_id = corpus_id.replace("answer", "noans")
            corpus.append(Turn(corpus_id, turn["content"], session_id, date))
    return corpus


def evidence(corpus: Sequence[Turn]) -> list[str]:
    """run_retrieval.py:272: the corpus ids that contain "answer"."""
    return sorted({turn.corpus_id for turn in corpus if "answer" in turn.corpus_id})


def skip_reason(instance: dict[str, Any]) -> str | None:
    """Why the benchmark leaves an instance out of its averages (run_retrieval.py:396-402)."""
    if "_abs" in instance["question_id"]:
        return "abstention"
    user_turns = (
        turn for session in instance["haystack_sessions"] for turn in session if turn["role"] == "user"
    )
    if not any(turn.get("has_answer") for turn in user_turns):
        return "no evidence turn from the user"
    return None


def scores(rankings: Sequence[int], corpus: Sequence[Turn]) -> dict[str, float]:
    """Every metric at every k, named "<level>_<metric>@<k>" (run_retrieval.py:316-329)."""
    correct = evidence(corpus)
    corpus_ids = [turn.corpus_id for turn in corpus]
    row: dict[str, float] = {}
    for k in KS:
        for name, value in evaluate_retrieval(rankings, correct, corpus_ids, k).items():
            row[f"turn_{name}@{k}"] = value
        for name, value in evaluate_retrieval_turn2session(rankings, correct, corpus_ids, k).items():
            row[f"session_{name}@{k}"] = value
    return row


# -- the run -------------------------------------------------------------------------------------


def evaluate_instance(memory: Memory, instance: dict[str, Any], *, recipe: str) -> dict[str, Any]:
    scope = f"lme-{instance['question_id']}"
    corpus = turn_corpus(instance)
    by_session: dict[str, list[tuple[int, Turn]]] = defaultdict(list)
    for index, turn in enumerate(corpus):
        by_session[turn.session_id].append((index, turn))
    for turns in by_session.values():
        messages = [
            {"role": "user", "content": turn.content, "metadata": {"corpus_index": index}}
            for index, turn in turns
        ]
        memory.add(messages, user_id=scope, at=parse_date(turns[0][1].date), infer=False)
    start = time.perf_counter()
    hits = memory.search(
        instance["question"], user_id=scope, k=max(1, min(len(corpus), MAX_K)), recipe=recipe
    )
    latency = (time.perf_counter() - start) * 1000
    found = [hit.memory.metadata["corpus_index"] for hit in hits]
    rankings = list(dict.fromkeys(found))
    returned = set(rankings)
    rankings += [index for index in range(len(corpus)) if index not in returned]
    return {
        "question_id": instance["question_id"],
        "type": instance.get("question_type", "?"),
        "search_ms": latency,
        "turns": len(corpus),
        "ranked_by_search": len(set(found)),
        **scores(rankings, corpus),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Means per question type and overall."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups["overall"].append(row)
        groups[row["type"]].append(row)
    names = [f"{level}_{metric}@{k}" for level in LEVELS for k in KS for metric in METRICS]
    return {
        group: {"questions": len(items), **{name: sum(r[name] for r in items) / len(items) for name in names}}
        for group, items in groups.items()
    }


SHOWN = ["session_recall_any@5", "session_recall_all@5", "session_ndcg_any@5", "session_recall_all@10",
         "turn_recall_all@10", "turn_ndcg_any@10", "turn_recall_all@50"]  # fmt: skip


def _question_type(instance: dict[str, Any]) -> str:
    return str(instance.get("question_type", "?"))


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
    add_limit_arguments(parser, "instances", "question types")
    parser.add_argument("--threads", type=int, default=1, help="instances in parallel (one memory file)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "longmemeval.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "longmemeval.png"))
    args = parser.parse_args(argv)
    instances = load_longmemeval(args.data, hub=args.hub, file=args.file)
    instances = stratified(instances, args.limit, key=_question_type, seed=args.seed)
    skipped: dict[str, list[str]] = defaultdict(list)
    kept = []
    for instance in instances:
        reason = skip_reason(instance)
        if reason:
            skipped[reason].append(instance["question_id"])
        else:
            kept.append(instance)
    if not kept:
        raise SystemExit(f"no question left to evaluate: all {len(instances)} are skipped ({dict(skipped)})")
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "lme.db", embedder=args.embedder) as memory:
        with ThreadPoolExecutor(max_workers=max(1, args.threads)) as pool:
            jobs = [pool.submit(evaluate_instance, memory, instance, recipe=args.recipe) for instance in kept]
            rows = [job.result() for job in progress(jobs, desc="questions")]
    summary = summarize(rows)
    results = {
        "machine": machine(),
        "benchmark_code": "github.com/xiaowu0162/LongMemEval@9e0b455f4ef0e2ab8f2e582289761153549043fc",
        "recipe": args.recipe,
        "embedder": args.embedder,
        "skipped": dict(skipped),
        "summary": summary,
        "rows": rows,
        "search_ms_p50": percentile([r["search_ms"] for r in rows], 50),
        "search_ms_p95": percentile([r["search_ms"] for r in rows], 95),
    }
    order = ["overall", *sorted(name for name in summary if name != "overall")]
    left_out = ", ".join(f"{len(ids)} {reason}" for reason, ids in skipped.items()) or "none"
    tables = [
        f"LongMemEval retrieval: {len(rows)} questions (skipped as the benchmark does: {left_out}), "
        f"user turns indexed, recipe {args.recipe}",
        table(
            ["type", "questions", *SHOWN],
            [[name, summary[name]["questions"], *(summary[name][m] for m in SHOWN)] for name in order],
        ),
    ]
    print("\n\n".join(tables))
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=order,
        series={
            "session recall_all@5": [summary[n]["session_recall_all@5"] for n in order],
            "turn recall_all@10": [summary[n]["turn_recall_all@10"] for n in order],
        },
        title="LongMemEval retrieval",
        ylabel="share of questions",
        text="\n\n".join(tables),
        command=command_line("evals.longmemeval", argv),
        lm="none (retrieval only)",
    )
    return results


if __name__ == "__main__":
    main()
