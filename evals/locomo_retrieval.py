"""LoCoMo evidence retrieval, no LM: index every turn, ask each question, measure whether the
evidence turns come back.

    python -m evals.locomo download              # once: data/locomo10.json, checked
    python -m evals.locomo_retrieval --data data/locomo10.json   # the development split
    python -m evals.locomo_retrieval --data data/locomo10.json --cv      # choose settings by CV
    python -m evals.locomo_retrieval --data data/locomo10.json --split test  # once, at the end

Each conversation gets its own scope (user_id = sample id); every turn is one raw `turn` memory
(speaker name + text + image caption), dated with its session's date. For each category 1-4
question we search with each recipe and report evidence recall@5/10/20 (the share of the
question's evidence turns among the top k hits) and session recall sR@k (the share of its
evidence sessions among the sessions of the top k hits), averaged over questions.

`--facts observation` measures retrieval over facts instead, without a model: LoCoMo ships, per
session and speaker, `observation` facts written by the dataset's authors with the turn each came
from. The sessions go through the LM write path with a scripted LM that answers, for the turns it
is shown, the observations of those turns (subject: the speaker; valid at: the session's date),
so the memories are what a good extractor would write, stored the way the write path stores them
(entities, dates, provenance picked by word overlap). The object of a fact is the first other
name in it (a capitalised word not starting a sentence), the entity graph expansion follows. A fact hit counts for the evidence turns
of its provenance; recall@k is the share of evidence turns covered by the top k facts. Turns
no observation came from are kept raw by the write path (no input is lost); the search is
limited to facts, so recall is through the facts alone.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.embed import make_embedder
from evals.locomo import (
    CATEGORY_NAMES,
    Conversation,
    add_data_arguments,
    conversations_from_args,
    normalize_dia_ids,
)
from evals.metrics import ndcg_at_k
from evals.report import RESULTS_DIR, bar_chart, machine, percentile, progress, stage, table, write_json

KS = (5, 10, 20)


def index_conversation(
    memory: Memory,
    conversation: Conversation,
    *,
    speaker: bool = True,
    caption: bool = True,
    infer: bool = False,
) -> int:
    """Add every turn of a conversation, one `add` per session: as raw turn memories, or
    through the LM write path with infer=True. Returns the number of turns. Each message
    carries its turn's id (metadata dia_id), which hits and provenance report."""
    count = 0
    for session in conversation.sessions:
        messages = [
            {
                "role": "user",
                "name": turn.speaker if speaker else None,
                "content": turn.content(with_caption=caption),
                "metadata": {"dia_id": turn.dia_id, "session": session.index},
            }
            for turn in session.turns
        ]
        if messages:
            memory.add(messages, user_id=conversation.sample_id, at=session.date_time, infer=infer)
            count += len(messages)
    return count


# A capitalised word (or a run of them) that does not start a sentence: a name, as an extractor
# would make it a fact's object ("... an LGBTQ support group" -> LGBTQ).
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")


def other_name(text: str, subject: str) -> str | None:
    """The first name in `text` other than the subject's (possessives trimmed), if any."""
    for match in _NAME.finditer(text):
        name = re.sub(r"'s$", "", match.group(1))
        if name.casefold() != subject.casefold() and name not in ("I", "I'm"):
            return name
    return None


def observation_facts(conversation: Conversation) -> dict[str, list[dict[str, Any]]]:
    """{turn text: the observation facts LoCoMo's authors wrote from that turn}, as fact dicts
    the write program would answer (subject: the speaker, valid_at: the session's date).
    Observations whose evidence names no turn of their session are left out."""
    facts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for session in conversation.sessions:
        by_id = {turn.dia_id: turn for turn in session.turns}
        observed = conversation.observations.get(f"session_{session.index}_observation") or {}
        for speaker, items in observed.items():
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, list) or len(item) < 2 or not str(item[0]).strip():
                    continue
                turns = [by_id[dia_id] for dia_id in normalize_dia_ids(item[1]) if dia_id in by_id]
                if not turns:
                    continue
                content = str(item[0]).strip()
                fact = {
                    "content": content,
                    "kind": "fact",
                    "subject": speaker,
                    "object": other_name(content, speaker),
                    "valid_at": session.date_time.date().isoformat(),
                }
                facts[turns[0].content()].append(fact)
    return dict(facts)


def index_observations(db: str, embedder: Any, conversation: Conversation, **settings: Any) -> int:
    """Every session through the write path, answered by a scripted LM that knows the
    conversation's observation facts (see the module's docstring). Returns the facts known."""
    from dspy_memory.testing import oracle_write_lm

    facts = observation_facts(conversation)
    with Memory(db, embedder=embedder, lm=oracle_write_lm(facts), **settings) as memory:
        index_conversation(memory, conversation, infer=True)
    return sum(len(items) for items in facts.values())


def evidence_of(hit: Any) -> list[str]:
    """The turns a hit stands for: a raw turn's own id, or the turns a fact came from."""
    own = hit.memory.metadata.get("dia_id")
    if own:
        return [own]
    return [p.metadata["dia_id"] for p in hit.provenance if p.metadata.get("dia_id")]


def covered(ranked: list[list[str]], evidence: list[str], k: int) -> float:
    """Share of the evidence turns that the top k hits stand for."""
    found = {dia_id for ids in ranked[:k] for dia_id in ids}
    return len(found & set(evidence)) / len(set(evidence))


def first_new_evidence(ranked: list[list[str]], evidence: list[str]) -> list[str | None]:
    """Per hit, the first evidence turn it stands for that no hit above it did (else None)."""
    seen: set[str] = set()
    flat: list[str | None] = []
    for ids in ranked:
        new = next((dia_id for dia_id in ids if dia_id in evidence and dia_id not in seen), None)
        if new is not None:
            seen.add(new)
        flat.append(new)
    return flat


@dataclass(frozen=True)
class Answered:
    """How one question's search went: the share of its evidence turns among the top k hits
    (`recall`), the share of its evidence sessions among the top k hits' sessions
    (`session_recall`, sR@k as some peers report), and nDCG@10."""

    conversation: str
    category: str
    recall: dict[int, float]
    session_recall: dict[int, float]
    ndcg: float


def session_of(dia_id: str) -> str:
    """ "D3:12" -> "D3"."""
    return dia_id.split(":", 1)[0]


def ask(
    memory: Memory,
    conversation: Conversation,
    recipe: str,
    *,
    categories: tuple[int, ...] = (1, 2, 3, 4),
    ks: tuple[int, ...] = KS,
    kinds: list[str] | None = None,
    latencies: list[float] | None = None,
) -> tuple[list[Answered], int]:
    """Each question of `conversation` searched with `recipe`: what it found, and how many
    questions were skipped for naming no turn of the conversation as evidence."""
    known = {turn.dia_id for turn in conversation.turns}
    answered: list[Answered] = []
    skipped = 0
    for question in conversation.questions:
        if question.category not in categories:
            continue
        evidence = [dia_id for dia_id in question.evidence if dia_id in known]
        if not evidence:
            skipped += 1
            continue
        start = time.perf_counter()
        hits = memory.search(
            question.question, user_id=conversation.sample_id, k=max(ks), recipe=recipe, kinds=kinds
        )
        if latencies is not None:
            latencies.append((time.perf_counter() - start) * 1000)
        ranked = [evidence_of(hit) for hit in hits]
        sessions = {session_of(dia_id) for dia_id in evidence}
        answered.append(
            Answered(
                conversation=conversation.sample_id,
                category=question.category_name,
                recall={k: covered(ranked, evidence, k) for k in ks},
                session_recall={
                    k: len(sessions & {session_of(dia_id) for ids in ranked[:k] for dia_id in ids})
                    / len(sessions)
                    for k in ks
                },
                # nDCG over the hits, each relevant when it stands for an evidence turn not
                # already credited to a hit above it.
                ndcg=ndcg_at_k(first_new_evidence(ranked, evidence), evidence, 10),
            )
        )
    return answered, skipped


def summarize(answered: list[Answered], ks: tuple[int, ...] = KS) -> dict[str, Any]:
    """R@k, sR@k and nDCG@10 averaged over questions, overall and per category."""
    groups: dict[str, list[Answered]] = defaultdict(list)
    for item in answered:
        groups["overall"].append(item)
        groups[item.category].append(item)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return {
        "recall": {
            group: {f"R@{k}": mean([a.recall[k] for a in items]) for k in ks}
            for group, items in groups.items()
        },
        "session_recall": {
            group: {f"sR@{k}": mean([a.session_recall[k] for a in items]) for k in ks}
            for group, items in groups.items()
        },
        "ndcg@10": {group: mean([a.ndcg for a in items]) for group, items in groups.items()},
        "questions": {group: len(items) for group, items in groups.items()},
    }


def evaluate(
    memory: Memory | dict[str, Memory],
    conversations: list[Conversation],
    recipes: list[str],
    *,
    categories: tuple[int, ...] = (1, 2, 3, 4),
    ks: tuple[int, ...] = KS,
    fresh_embeddings: bool = True,
    kinds: list[str] | None = None,
    before: Any = None,
) -> dict[str, Any]:
    """Evidence recall@k per recipe, overall and per category, session-level recall, per
    conversation R@10, plus search latency; `kinds` limits the search to those kinds of memory;
    `before(conversation)` runs before its questions are asked (e.g. to set the clock).
    `memory` may map each conversation's id to the Memory that holds it."""
    results: dict[str, Any] = {}

    def memory_of(conversation: Conversation) -> Memory:
        return memory[conversation.sample_id] if isinstance(memory, dict) else memory

    for recipe in recipes:
        # Each recipe pays for its own query embeddings, so latencies compare fairly.
        clear = getattr(memory_of(conversations[0]).embedder, "clear_cache", None)
        if clear is not None and fresh_embeddings:
            clear()
        latencies: list[float] = []
        answered: list[Answered] = []
        skipped = 0
        questions = sum(1 for c in conversations for q in c.questions if q.category in categories)
        stage(f"searching {questions:,} questions with the {recipe} recipe")
        for conversation in progress(conversations, desc=f"{recipe}: conversations"):
            if before is not None:
                before(conversation)
            found, missing = ask(
                memory_of(conversation),
                conversation,
                recipe,
                categories=categories,
                ks=ks,
                kinds=kinds,
                latencies=latencies,
            )
            answered += found
            skipped += missing
        by_conversation: dict[str, list[Answered]] = defaultdict(list)
        for item in answered:
            by_conversation[item.conversation].append(item)
        results[recipe] = {
            **summarize(answered, ks),
            "per_conversation": {
                name: summarize(items, ks)["recall"]["overall"] for name, items in by_conversation.items()
            },
            "skipped_without_evidence": skipped,
            "search_ms_p50": percentile(latencies, 50),
            "search_ms_p95": percentile(latencies, 95),
        }
    return results


def name_and_value(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (a RetrievalConfig setting), got {text!r}")
    return name.strip(), value.strip()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_arguments(parser)
    parser.add_argument("--embedder", default="local", help="embedder spec (default: local MiniLM)")
    parser.add_argument("--recipes", default="keyword,dense,hybrid", help="comma-separated recipes")
    parser.add_argument("--db", default=None, help="memory file (default: a temporary file)")
    parser.add_argument(
        "--file-per-conversation",
        action="store_true",
        help="each conversation in its own SQLite file, so that FTS5's BM25 statistics (file-wide) are "
        "its own, as PostgreSQL's (per user) are",
    )
    parser.add_argument("--no-speaker", action="store_true", help="index turn text without the speaker name")
    parser.add_argument("--no-caption", action="store_true", help="do not append image captions")
    parser.add_argument(
        "--facts",
        choices=["turns", "observation"],
        default="turns",
        help="what is stored: every raw turn (default), or LoCoMo's observation facts through the write path",
    )
    parser.add_argument(
        "--turn-context",
        default=None,
        metavar="BEFORE,AFTER",
        help="turns of context a raw turn is keyword-indexed with, e.g. 2,1 (default: the library's)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=name_and_value,
        metavar="NAME=VALUE",
        help="a retrieval setting (RetrievalConfig), e.g. --set candidates=30 --set said_together_weight=0: "
        "what the ablations in docs/benchmarks.md change",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of the split")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="choose every read setting by leave-one-conversation-out cross-validation and report "
        "the held-out recall per conversation and category (evals/locomo_cv.py)",
    )
    parser.add_argument("--sweep", action="store_true", help="the same as --cv (the sweep reports CV scores)")
    parser.add_argument(
        "--retention-weights",
        default=None,
        metavar="W,W,...",
        help="hybrid recall@10 per retention_weight, the turns stored at their sessions' dates (issue 14)",
    )
    parser.add_argument("--out", default=None, help="JSON report (default: evals/results/...)")
    parser.add_argument("--plot", default=None, help="plot (default: evals/results/...)")
    args = parser.parse_args(argv)
    args.cv = args.cv or args.sweep
    name = (
        "locomo_retrieval"
        + ("_cv" if args.cv else "")
        + ("_retention" if args.retention_weights else "")
        + ("_observation" if args.facts == "observation" else "")
    )
    args.out = args.out or str(RESULTS_DIR / f"{name}.json")
    args.plot = args.plot or str(RESULTS_DIR / f"{name}.png")

    conversations = conversations_from_args(args)[: args.limit]
    if args.cv:
        from evals.locomo_cv import cross_validate  # it measures with this module's ask()

        return cross_validate(args, conversations)
    if args.retention_weights:
        from evals.locomo_lifecycle import retention_weights

        return retention_weights(args, conversations)
    recipes = [name.strip() for name in args.recipes.split(",") if name.strip()]
    settings: dict[str, Any] = {}
    retrieval: dict[str, Any] = dict(args.set)  # RetrievalConfig validates names and values
    if args.turn_context is not None:
        before, after = (int(part) for part in args.turn_context.split(","))
        retrieval.update(turn_context_before=before, turn_context_after=after)
    if retrieval:
        settings["retrieval"] = retrieval
    if args.file_per_conversation and (args.db or args.facts != "turns"):
        raise SystemExit(
            "--file-per-conversation indexes raw turns into temporary files: no --db, no --facts"
        )
    embedder = make_embedder(args.embedder)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "locomo.db")
        files = {c.sample_id: str(Path(tmp) / f"{c.sample_id}.db") for c in conversations}
        start = time.perf_counter()
        total = sum(len(c.turns) for c in conversations)
        if args.facts == "observation":
            stage(f"writing the observation facts of {total:,} turns through the write path")
            stored = sum(
                index_observations(db, embedder, c, **settings)
                for c in progress(conversations, desc="conversations written")
            )
        else:
            stage(f"indexing {total:,} turns of {len(conversations)} conversations with {embedder.name}")
            stored = 0
            for c in progress(conversations, desc="conversations indexed"):
                with Memory(
                    files[c.sample_id] if args.file_per_conversation else db, embedder=embedder, **settings
                ) as memory:
                    stored += index_conversation(
                        memory, c, speaker=not args.no_speaker, caption=not args.no_caption
                    )
        index_seconds = time.perf_counter() - start
        kinds = ["fact"] if args.facts == "observation" else None
        paths = files if args.file_per_conversation else {c.sample_id: db for c in conversations}
        opened = {path: Memory(path, embedder=embedder, **settings) for path in set(paths.values())}
        try:
            by_conversation = {name: opened[path] for name, path in paths.items()}
            memories = sum(
                len(by_conversation[c.sample_id].get_all(user_id=c.sample_id, kinds=kinds, limit=100_000))
                for c in conversations
            )
            results = evaluate(by_conversation, conversations, recipes, kinds=kinds)
        finally:
            for memory in opened.values():
                memory.close()

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
                        result["session_recall"][group]["sR@10"],
                        result["ndcg@10"][group],
                    ]
                )
    print(
        f"LoCoMo evidence recall: {len(conversations)} conversations, {total} turns, stored as "
        f"{memories} {'observation facts' if args.facts == 'observation' else 'raw turns'} in "
        f"{index_seconds:.1f} s, embedder {embedder.name}\n"
    )
    print(table(["recipe", "category", "questions", *(f"R@{k}" for k in KS), "sR@10", "nDCG@10"], rows))
    print()
    print(
        table(
            ["recipe", "search p50 ms", "search p95 ms"],
            [[recipe, r["search_ms_p50"], r["search_ms_p95"]] for recipe, r in results.items()],
        )
    )
    report = {
        "data": str(args.data),
        "embedder": embedder.name,
        "conversations": len(conversations),
        "turns": total,
        "stored": args.facts,
        "memories": memories,
        "observation_facts_given": stored if args.facts == "observation" else None,
        "index_seconds": index_seconds,
        "speaker_in_text": not args.no_speaker,
        "caption_in_text": not args.no_caption,
        "turn_context": args.turn_context,
        "file_per_conversation": args.file_per_conversation,
        "retrieval_settings": retrieval,
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
        title=f"LoCoMo evidence recall@10, {args.facts} stored (no LM)",
        ylabel="recall@10",
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return report


if __name__ == "__main__":
    main()
