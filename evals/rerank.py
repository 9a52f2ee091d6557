"""Recipe "rerank" on LoCoMo: the labelled set the LM reranker compiles against, and the side
by side measurement of hybrid and rerank.

    python -m evals.rerank --data data/locomo10.json --reranker cross-encoder:BAAI/bge-reranker-base
    python -m evals.rerank --data data/locomo10.json --reranker lm --lm ollama_chat/llama3.2
    python -m evals.optimize rerank --lm ollama_chat/llama3.2 --out programs/rerank.json

The set: every turn of each conversation of the development split is one raw turn memory (as
`evals.locomo_retrieval` stores them); each category 1-4 question is searched with the hybrid
recipe for its top `POOL` candidates, shown as the reranker sees them (read/rerank.py's
`lm_candidates`). Its label is the candidates that are evidence turns first, the rest in hybrid
order; questions with no evidence among the candidates are left out (no order can help them).
The metric is evidence recall@10 of the order a search would return (the answer merged with the
hybrid order by `reorder`, as the library does), so an empty answer scores what hybrid scores.
Examples are grouped by conversation: no conversation is in two splits.

The measurement indexes the conversations once and asks every question with both recipes in the
same run (evidence recall@5/10/20 per category, search latency), the reranker named by
--reranker. No reranker model is available offline here: its quality is unmeasured until this is
run where one is (docs/retrieval.md).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.read.rerank import lm_candidates, lm_placements, reorder
from evals.locomo import (
    CATEGORY_NAMES,
    add_data_arguments,
    conversations_from_args,
    load_locomo,
    select_split,
)
from evals.locomo_retrieval import KS, covered, evaluate, evidence_of, index_conversation
from evals.report import RESULTS_DIR, machine, progress, stage, table, write_json

# Candidates shown per question (RetrievalConfig.rerank_candidates' default) and the k scored.
POOL = 30
AT = 10


def rerank_examples(path: str, embedder: Any) -> list[Any]:
    """One example per category 1-4 question that has an evidence turn among its candidates."""
    import dspy

    examples = []
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "rerank.db", embedder=embedder) as memory:
        for conversation in select_split(load_locomo(path)):
            index_conversation(memory, conversation)
            known = {turn.dia_id for turn in conversation.turns}
            today = f"{conversation.sessions[-1].date_time:%Y-%m-%d}" if conversation.sessions else ""
            for question in conversation.questions:
                evidence = [dia_id for dia_id in question.evidence if dia_id in known]
                if question.category not in (1, 2, 3, 4) or not evidence:
                    continue
                hits = memory.search(
                    question.question, user_id=conversation.sample_id, k=POOL, recipe="hybrid"
                )
                found = [evidence_of(hit) for hit in hits]
                relevant = [alias for alias, ids in enumerate(found, start=1) if set(ids) & set(evidence)]
                if not relevant:
                    continue
                others = [alias for alias in range(1, len(hits) + 1) if alias not in relevant]
                examples.append(
                    dspy.Example(
                        query=question.question,
                        today=today,
                        memories=lm_candidates([hit.memory for hit in hits]),
                        ranking=relevant + others,
                        evidence=evidence,
                        found=found,
                        category=question.category,
                        group=conversation.sample_id,
                    ).with_inputs("query", "today", "memories")
                )
    return examples


def searched_order(example: Any, ranking: object) -> list[int]:
    """The candidates' ids in the order a search returns for this answer (read/rerank.py)."""
    ids = range(1, len(example.memories) + 1)
    merged = reorder([(alias, {}) for alias in ids], lm_placements(ranking), pool=len(example.memories))
    return [alias for alias, _ in merged]


def rerank_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """Evidence recall@10 of the order a search would return."""
    order = searched_order(example, getattr(prediction, "ranking", None))
    return covered([example.found[alias - 1] for alias in order], example.evidence, AT)


def rerank_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    """Where the answer put the memories that hold the evidence (ids only, no text)."""
    import dspy

    score = rerank_metric(gold, pred)
    order = searched_order(gold, getattr(pred, "ranking", None))
    relevant = [alias for alias, ids in enumerate(gold.found, start=1) if set(ids) & set(gold.evidence)]
    places = ", ".join(f"id {alias} at {order.index(alias) + 1}" for alias in relevant)
    return dspy.Prediction(
        score=score,
        feedback=f"The memories that answer the query are ids {relevant}; the ranking put {places} "
        f"(recall@{AT} {score:.2f}). Put the memories that state the answer first.",
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_arguments(parser)
    parser.add_argument("--reranker", default="lm", help="'lm', 'lm:<model>' or 'cross-encoder:<model>'")
    parser.add_argument("--lm", default=None, help="the LM of --reranker lm (default: none)")
    parser.add_argument("--candidates", type=int, default=POOL, help=f"hybrid hits reranked (default {POOL})")
    parser.add_argument("--embedder", default="local", help="embedder spec (default: local MiniLM)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of the split")
    parser.add_argument("--out", default=str(RESULTS_DIR / "locomo_rerank.json"), help="JSON report")
    args = parser.parse_args(argv)
    from dspy_memory.embed import make_embedder

    conversations = conversations_from_args(args)[: args.limit]
    embedder = make_embedder(args.embedder)
    retrieval = {"reranker": args.reranker, "rerank_candidates": args.candidates}
    # A reranker that cannot run (no LM, no extra, no model) says so now, not after the hybrid
    # pass; in a file of its own, so the probe's recall counts touch nothing measured.
    with Memory(":memory:", embedder=embedder, lm=args.lm, retrieval=retrieval) as probe:
        probe.add("a probe", user_id="probe", infer=False)
        probe.search("probe", user_id="probe", recipe="rerank")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "rerank.db"
        stage(f"indexing {len(conversations)} conversations with {embedder.name}")
        start = time.perf_counter()
        with Memory(db, embedder=embedder, lm=args.lm, retrieval=retrieval) as memory:
            for conversation in progress(conversations, desc="conversations indexed"):
                index_conversation(memory, conversation)
            index_seconds = time.perf_counter() - start
            results = evaluate(memory, conversations, ["hybrid", "rerank"])
    rows = [
        [recipe, group, result["questions"][group], *(result["recall"][group][f"R@{k}"] for k in KS)]
        for recipe, result in results.items()
        for group in ["overall", *(CATEGORY_NAMES[c] for c in (1, 2, 3, 4))]
        if group in result["recall"]
    ]
    print(table(["recipe", "category", "questions", *(f"R@{k}" for k in KS)], rows))
    print(
        table(
            ["recipe", "search p50 ms", "search p95 ms"],
            [[recipe, r["search_ms_p50"], r["search_ms_p95"]] for recipe, r in results.items()],
        )
    )
    report = {
        "reranker": args.reranker,
        "lm": args.lm,
        "candidates": args.candidates,
        "embedder": embedder.name,
        "conversations": [c.sample_id for c in conversations],
        "index_seconds": index_seconds,
        "results": results,
        "machine": machine(),
    }
    print(f"wrote {write_json(args.out, report)}")
    return report


if __name__ == "__main__":
    main()
