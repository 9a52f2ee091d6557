"""`python -m evals.locomo_retrieval --retention-weights 0,0.05,0.1`: what ranking by the
forgetting curve costs on LoCoMo (issue 14: the default `retention_weight` must not lower
recall@10 by more than 0.01).

The conversations are lived in time: the clock stands at each session's date while it is
added, so a turn is stored when it was said, and each conversation's questions are asked one
day after its last session. Sessions months old have a low retention, last week's a high one;
a question about an old session is where a retention weight can hurt. Searches do not count
as recalls here (track_access off), so every weight sees the same memories in the same state,
whatever order the questions come in.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.embed import make_embedder
from dspy_memory.util.timeutil import set_clock
from evals.locomo import CATEGORY_NAMES, Conversation
from evals.locomo_retrieval import evaluate, index_conversation
from evals.report import bar_chart, machine, progress, stage, table, write_json

ASKED_DAYS_AFTER = 1.0


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def index_in_time(memory: Memory, conversation: Conversation) -> int:
    """Each session added with the clock at its date (what the memory was stored at)."""
    count = 0
    for session in conversation.sessions:
        at = _aware(session.date_time)
        set_clock(lambda at=at: at)
        try:
            count += index_conversation(memory, _only(conversation, session))
        finally:
            set_clock(None)
    return count


def _only(conversation: Conversation, session: Any) -> Conversation:
    return dataclasses.replace(conversation, sessions=[session], questions=[])


def asked_after(conversations: list[Conversation]) -> Any:
    """A hook for evaluate(): the clock at a day after the conversation's last session."""

    def before(conversation: Conversation) -> None:
        last = max((_aware(session.date_time) for session in conversation.sessions), default=None)
        if last is not None:
            at = last + timedelta(days=ASKED_DAYS_AFTER)
            set_clock(lambda: at)

    return before


def retention_weights(args: argparse.Namespace, conversations: list[Conversation]) -> dict[str, Any]:
    weights = [float(part) for part in args.retention_weights.split(",") if part.strip()]
    embedder = make_embedder(args.embedder)
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "locomo_lifecycle.db")
        total = sum(len(c.turns) for c in conversations)
        stage(f"indexing {total:,} turns in time (the clock at each session's date)")
        with Memory(db, embedder=embedder) as memory:
            for conversation in progress(conversations, desc="conversations indexed"):
                index_in_time(memory, conversation)
        try:
            for weight in weights:
                stage(f"hybrid search with retention_weight {weight}")
                settings = {"retrieval": {"retention_weight": weight}, "track_access": False}
                with Memory(db, embedder=embedder, **settings) as memory:
                    result = evaluate(
                        memory,
                        conversations,
                        ["hybrid"],
                        fresh_embeddings=False,
                        before=asked_after(conversations),
                    )["hybrid"]
                results[str(weight)] = result
        finally:
            set_clock(None)
    base = results[str(weights[0])]["recall"]
    groups = [group for group in ["overall"] + [CATEGORY_NAMES[c] for c in (1, 2, 3, 4)] if group in base]
    for weight in weights:
        recall = results[str(weight)]["recall"]
        rows.append(
            [
                weight,
                *(recall[group]["R@10"] for group in groups),
                recall["overall"]["R@10"] - base["overall"]["R@10"],
            ]
        )
    print(
        f"\nLoCoMo evidence recall@10 by retention_weight ({len(conversations)} conversations, asked a day after)"
    )
    print(table(["retention_weight", *groups, f"vs {weights[0]}"], rows))
    report = {"data": str(args.data), "embedder": embedder.name, "weights": weights, "machine": machine()}
    report["results"] = results
    out, plot = args.out, args.plot
    write_json(out, report)
    bar_chart(
        plot,
        groups,
        {
            f"w={weight}": [results[str(weight)]["recall"].get(g, {}).get("R@10", 0.0) for g in groups]
            for weight in weights
        },
        title="LoCoMo recall@10 by retention_weight (lived in time, no LM)",
        ylabel="recall@10",
    )
    print(f"\nwrote {out} and {plot}")
    return report
