"""LoCoMo evidence retrieval, no LM: index every turn, ask each question, measure whether the
evidence turns come back.

    python -m evals.locomo download              # once: data/locomo10.json, checked
    python -m evals.locomo_retrieval --data data/locomo10.json   # the development split

Each conversation gets its own scope (user_id = sample id); every turn is one raw `turn` memory
(speaker name + text + image caption), dated with its session's date. For each category 1-4
question we search with each recipe and report evidence recall@5/10/20: the share of the
question's evidence turns among the top k hits, averaged over questions.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from evals.locomo import CATEGORY_NAMES, Conversation, add_data_arguments, conversations_from_args
from evals.metrics import ndcg_at_k, recall_at_k
from evals.report import RESULTS_DIR, bar_chart, machine, percentile, progress, stage, table, write_json

KS = (5, 10, 20)


def index_conversation(
    memory: Memory,
    conversation: Conversation,
    *,
    speaker: bool = True,
    caption: bool = True,
    infer: bool = False,
    context: int = 0,
) -> int:
    """Add every turn of a conversation, one `add` per session: as raw turn memories, or
    through the LM write path with infer=True. Returns the number of turns.

    `context` > 0 is an experiment for context-aware indexing: each turn is stored with up to
    `context` turns of its session on each side ("speaker: text" lines), so a reply is found
    by its question's words; hits still name the one turn (metadata dia_id). A session shorter
    than the window gives its turns one text, stored once (raw turns of one text and time are
    one memory), so the later turns of it cannot be found."""
    count = 0
    for session in conversation.sessions:
        lines = [f"{turn.speaker}: {turn.content(with_caption=caption)}" for turn in session.turns]
        messages = [
            {
                "role": "user",
                "name": turn.speaker if speaker and not context else None,
                "content": (
                    "\n".join(lines[max(0, index - context) : index + context + 1])
                    if context
                    else turn.content(with_caption=caption)
                ),
                "metadata": {"dia_id": turn.dia_id, "session": session.index},
            }
            for index, turn in enumerate(session.turns)
        ]
        if messages:
            memory.add(messages, user_id=conversation.sample_id, at=session.date_time, infer=infer)
            count += len(messages)
    return count


def evaluate(
    memory: Memory,
    conversations: list[Conversation],
    recipes: list[str],
    *,
    categories: tuple[int, ...] = (1, 2, 3, 4),
    ks: tuple[int, ...] = KS,
) -> dict[str, Any]:
    """Evidence recall@k per recipe, overall and per category, plus search latency."""
    results: dict[str, Any] = {}
    for recipe in recipes:
        # Each recipe pays for its own query embeddings, so latencies compare fairly.
        clear = getattr(memory.embedder, "clear_cache", None)
        if clear is not None:
            clear()
        recalls: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        ndcgs: dict[str, list[float]] = defaultdict(list)
        latencies: list[float] = []
        skipped = 0
        questions = sum(1 for c in conversations for q in c.questions if q.category in categories)
        stage(f"searching {questions:,} questions with the {recipe} recipe")
        for conversation in progress(conversations, desc=f"{recipe}: conversations"):
            known = {turn.dia_id for turn in conversation.turns}
            for question in conversation.questions:
                if question.category not in categories:
                    continue
                evidence = [dia_id for dia_id in question.evidence if dia_id in known]
                if not evidence:
                    skipped += 1
                    continue
                start = time.perf_counter()
                hits = memory.search(
                    question.question, user_id=conversation.sample_id, k=max(ks), recipe=recipe
                )
                latencies.append((time.perf_counter() - start) * 1000)
                ranked = [hit.memory.metadata.get("dia_id") for hit in hits]
                for k in ks:
                    recall = recall_at_k(ranked, evidence, k)
                    recalls["overall"][k].append(recall)
                    recalls[question.category_name][k].append(recall)
                gain = ndcg_at_k(ranked, evidence, 10)
                ndcgs["overall"].append(gain)
                ndcgs[question.category_name].append(gain)
        results[recipe] = {
            "recall": {
                group: {f"R@{k}": sum(values) / len(values) for k, values in by_k.items()}
                for group, by_k in recalls.items()
            },
            "ndcg@10": {group: sum(values) / len(values) for group, values in ndcgs.items()},
            "questions": {group: len(by_k[ks[0]]) for group, by_k in recalls.items()},
            "skipped_without_evidence": skipped,
            "search_ms_p50": percentile(latencies, 50),
            "search_ms_p95": percentile(latencies, 95),
        }
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_arguments(parser)
    parser.add_argument("--embedder", default="local", help="embedder spec (default: local MiniLM)")
    parser.add_argument("--recipes", default="keyword,dense,hybrid", help="comma-separated recipes")
    parser.add_argument("--db", default=None, help="memory file (default: a temporary file)")
    parser.add_argument("--no-speaker", action="store_true", help="index turn text without the speaker name")
    parser.add_argument("--no-caption", action="store_true", help="do not append image captions")
    parser.add_argument(
        "--context",
        type=int,
        default=0,
        help="experiment: store each turn with N turns of its session on each side (default 0)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of the split")
    parser.add_argument("--out", default=str(RESULTS_DIR / "locomo_retrieval.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "locomo_retrieval.png"))
    args = parser.parse_args(argv)

    conversations = conversations_from_args(args)[: args.limit]
    recipes = [name.strip() for name in args.recipes.split(",") if name.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "locomo.db")
        with Memory(db, embedder=args.embedder) as memory:
            start = time.perf_counter()
            total = sum(len(c.turns) for c in conversations)
            stage(
                f"indexing {total:,} turns of {len(conversations)} conversations with {memory.embedder.name}"
            )
            turns = sum(
                index_conversation(
                    memory, c, speaker=not args.no_speaker, caption=not args.no_caption, context=args.context
                )
                for c in progress(conversations, desc="conversations indexed")
            )
            index_seconds = time.perf_counter() - start
            results = evaluate(memory, conversations, recipes)
            embedder = memory.embedder.name

    groups = ["overall"] + [CATEGORY_NAMES[c] for c in (1, 2, 3, 4)]
    rows = []
    for recipe, result in results.items():
        for group in groups:
            if group in result["recall"]:
                recall = result["recall"][group]
                rows.append(
                    [
                        recipe,
                        group,
                        result["questions"][group],
                        *(recall[f"R@{k}"] for k in KS),
                        result["ndcg@10"][group],
                    ]
                )
    print(
        f"LoCoMo evidence recall: {len(conversations)} conversations, {turns} turns indexed in "
        f"{index_seconds:.1f} s, embedder {embedder}\n"
    )
    print(table(["recipe", "category", "questions", *(f"R@{k}" for k in KS), "nDCG@10"], rows))
    print()
    print(
        table(
            ["recipe", "search p50 ms", "search p95 ms"],
            [[recipe, r["search_ms_p50"], r["search_ms_p95"]] for recipe, r in results.items()],
        )
    )
    report = {
        "data": str(args.data),
        "embedder": embedder,
        "conversations": len(conversations),
        "turns": turns,
        "index_seconds": index_seconds,
        "speaker_in_text": not args.no_speaker,
        "caption_in_text": not args.no_caption,
        "context_turns": args.context,
        "machine": machine(),
        "results": results,
    }
    write_json(args.out, report)
    bar_chart(
        args.plot,
        groups,
        {
            recipe: [r["recall"].get(group, {}).get("R@10", 0.0) for group in groups]
            for recipe, r in results.items()
        },
        title="LoCoMo evidence recall@10 (no LM)",
        ylabel="recall@10",
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return report


if __name__ == "__main__":
    main()
