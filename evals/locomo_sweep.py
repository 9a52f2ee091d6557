"""`python -m evals.locomo_retrieval --sweep`: the read path's settings tried on the LoCoMo
development split (never the test split), in two stages, printing the best settings and where
the defaults rank. Raw turns by default; `--facts observation` sweeps over observation facts
(stage 2 only: facts have no conversation context)."""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import make_embedder
from evals.locomo import CATEGORY_NAMES, Conversation
from evals.locomo_retrieval import evaluate, index_conversation, index_observations
from evals.report import bar_chart, machine, progress, stage, table, write_json

# The sweep's grids, tried on the development split only. Stage 1, fusion: the context window
# (turns before, after) is fixed when turns are indexed (one index per window), the rest are
# read-time settings of the same index. Stage 2, boosts and graph expansion, on the index and
# fusion of the defaults.
SWEEP_WINDOWS = [(0, 0), (1, 1), (2, 0), (2, 1), (2, 2), (3, 1)]
SWEEP_FUSION = {
    "keyword_context_weight": [0.25, 0.5, 1.0],
    "rrf_k": [5.0, 10.0, 30.0],
    "dense_weight": [0.5, 0.7, 1.0],
}
SWEEP_STAGES = {
    "temporal_weight": [0.0, 0.2, 0.4, 0.6],
    "when_weight": [0.0, 0.1],
    "graph": [None, 1, 2],  # graph_in_hybrid off, or on with this graph_depth
}


def sweep(args: argparse.Namespace, conversations: list[Conversation]) -> dict[str, Any]:
    """Hybrid R@10 over the grids; prints the best settings and where the defaults rank."""
    embedder = make_embedder(args.embedder)
    defaults = RetrievalConfig()
    fusion: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []

    kinds = ["fact"] if args.facts == "observation" else None

    def measure(db: str, settings: dict[str, Any]) -> dict[str, Any]:
        with Memory(db, embedder=embedder, retrieval=settings) as memory:
            result = evaluate(memory, conversations, ["hybrid"], fresh_embeddings=False, kinds=kinds)[
                "hybrid"
            ]
        recall = result["recall"]
        return {
            "R@10": recall["overall"]["R@10"],
            "nDCG@10": result["ndcg@10"]["overall"],
            **{
                CATEGORY_NAMES[c]: recall[CATEGORY_NAMES[c]]["R@10"]
                for c in (1, 2, 3, 4)
                if CATEGORY_NAMES[c] in recall
            },
        }

    default_window = (defaults.turn_context_before, defaults.turn_context_after)
    with tempfile.TemporaryDirectory() as tmp:
        dbs: dict[tuple[int, int], str] = {}
        windows = SWEEP_WINDOWS if args.facts == "turns" else [default_window]
        for before, after in windows:
            window = {"turn_context_before": before, "turn_context_after": after}
            db = dbs[before, after] = str(Path(tmp) / f"context_{before}_{after}.db")
            stage(f"indexing {args.facts} with {window}")
            if args.facts == "observation":
                for conversation in conversations:
                    index_observations(db, embedder, conversation)
                continue  # facts have no conversation context: stage 1 does not apply
            with Memory(db, embedder=embedder, retrieval=window) as memory:
                for conversation in conversations:
                    index_conversation(memory, conversation)
            # Without a context, its weight changes nothing: one value is enough.
            weights = SWEEP_FUSION["keyword_context_weight"] if before or after else [1.0]
            grid = list(itertools.product(weights, SWEEP_FUSION["rrf_k"], SWEEP_FUSION["dense_weight"]))
            for weight, rrf_k, dense_weight in progress(grid, desc=f"context {before} before, {after} after"):
                point = {
                    **window,
                    "keyword_context_weight": weight,
                    "rrf_k": rrf_k,
                    "dense_weight": dense_weight,
                }
                fusion.append({**point, **measure(db, point)})
        db = dbs[default_window]
        grid = list(itertools.product(*SWEEP_STAGES.values()))
        for temporal_weight, when_weight, depth in progress(grid, desc="boosts and graph"):
            point = {
                "temporal_weight": temporal_weight,
                "when_weight": when_weight,
                "graph_in_hybrid": depth is not None,
                "graph_depth": depth or defaults.graph_depth,
            }
            stages.append({**point, **measure(db, point)})

    report: dict[str, Any] = {
        "data": str(args.data),
        "stored": args.facts,
        "embedder": embedder.name,
        "machine": machine(),
    }
    groups = [CATEGORY_NAMES[c] for c in (1, 2, 3, 4)]
    for name, points, knobs in (
        ("fusion", fusion, ["turn_context_before", "turn_context_after", *SWEEP_FUSION]),
        ("boosts and graph", stages, ["temporal_weight", "when_weight", "graph_in_hybrid", "graph_depth"]),
    ):
        if not points:
            continue
        points.sort(key=lambda point: (point["R@10"], point["nDCG@10"]), reverse=True)
        columns = [*knobs, "R@10", "nDCG@10", *groups]
        print(f"\nLoCoMo hybrid recall@10, {name} ({len(points)} settings, {args.facts}), best first:\n")
        print(table(columns, [[point.get(column, "") for column in columns] for point in points[:12]]))
        default = {knob: getattr(defaults, knob) for knob in knobs}
        matching = [p for p in points if all(p[knob] == value for knob, value in default.items())]
        if matching:
            rank = points.index(matching[0]) + 1
            print(f"the defaults {default}: R@10 {matching[0]['R@10']:.3f}, rank {rank} of {len(points)}")
        report[name] = {"defaults": default, "points": points}
    write_json(args.out, report)
    best: dict[str, float] = {}
    for point in fusion or stages:
        name = (
            f"{point['turn_context_before']} before, {point['turn_context_after']} after"
            if fusion
            else "facts"
        )
        best.setdefault(name, point["R@10"])
    bar_chart(
        args.plot,
        list(best),
        {"best R@10": list(best.values())},
        title="LoCoMo hybrid recall@10: best settings per context window (turns)",
        ylabel="recall@10",
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return report
