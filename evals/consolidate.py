"""The consolidation eval: does the program merge, summarize and keep the right memories?

    python -m evals.consolidate [--lm MODEL] [--program FILE] [--split train|dev|test|all]
        [--limit N] [--threads T]

Cases come from evals/data/consolidate.jsonl (eight situations, four hand-written template
families each; `python -m evals.data.consolidate_set.make` rebuilds it). Each case is a cluster
of memories under aliases and the expected partition: MERGE and SUMMARIZE groups with the
words their new content must keep, KEEP for the rest. Scores (consolidation_score): exact (the
groups, their actions and their kept words all right), partition (groups and actions right,
content aside) and action accuracy per memory, per category and per family. --program loads a
compiled MemoryConsolidator (`dspy-memory optimize consolidate`). Without --lm a scripted
reference answers with the expected decisions, which checks the harness, not a model.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evals.reconcile import load_cases as _load_jsonl
from evals.report import RESULTS_DIR, machine, progress, save, stage, table
from evals.sampling import add_limit_arguments

DATA = Path(__file__).resolve().parent / "data" / "consolidate.jsonl"
SPLITS = ("train", "dev", "test")
GROUPED = ("MERGE", "SUMMARIZE")
SCORES = ("exact", "partition", "action_accuracy")


def load_cases(
    path: str | Path = DATA, *, split: str | None = None, limit: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """The cases (of one `split`, whose families are in no other), `limit` of them sampled
    across categories: the reconcile set's loader, which reads any such JSONL."""
    return _load_jsonl(path, split=split, limit=limit, seed=seed)


def as_examples(cases: list[dict[str, Any]]) -> list[Any]:
    """dspy.Examples with inputs `memories` and `today`. The label `decisions` is the expected
    partition with one good content per group, so a labeled example is also a demonstration;
    the metric reads `expected` (the words content must keep), never that content."""
    import dspy

    from dspy_memory.ops import ClusterMemory

    return [
        dspy.Example(
            memories=[ClusterMemory(**memory) for memory in case["memories"]],
            today=case["today"],
            decisions=[
                {"action": item["action"], "aliases": item["aliases"], "content": item["content"]}
                for item in case["expected"]
            ],
            expected=case["expected"],
            category=case["category"],
            group=case["family"],
            split=case.get("split"),
            case_id=case["id"],
        ).with_inputs("memories", "today")
        for case in cases
    ]


def _decision(item: Any) -> Any:
    """A ConsolidationOp from an op or a dict as an LM wrote it; None if it is not one."""
    from dspy_memory.ops import ConsolidationOp

    if isinstance(item, ConsolidationOp):
        return item
    try:
        return ConsolidationOp.model_validate(item)
    except ValidationError:
        return None


def consolidation_score(expected: list[dict[str, Any]], decisions: list[Any]) -> dict[str, Any]:
    """How `decisions` (ConsolidationOps or dicts) compare with a case's `expected` partition.

    exact 1/0: the answer is valid (only the cluster's aliases, none twice, every decision
    readable), its MERGE and SUMMARIZE groups are the expected ones with the expected actions
    (an alias no decision covers is kept), and each group's content holds every must_keep
    term (case-insensitive). partition: the same without the content check. action_accuracy:
    the share of aliases whose action (KEEP when uncovered) is the expected one. `missing`:
    must_keep terms the content of a right group lacks (for reports, not for prompts)."""
    gold_action = {alias: item["action"] for item in expected for alias in item["aliases"]}
    gold = {
        (item["action"], frozenset(item["aliases"])): item["must_keep"]
        for item in expected
        if item["action"] in GROUPED
    }
    ops = [_decision(item) for item in decisions or []]
    valid = all(op is not None for op in ops)
    predicted: dict[int, str] = {}
    groups = []
    for op in filter(None, ops):
        for alias in op.aliases:
            valid = valid and isinstance(alias, int) and alias in gold_action and alias not in predicted
            predicted.setdefault(alias, op.action)
        if op.action in GROUPED:
            groups.append(((op.action, frozenset(op.aliases)), op.content or ""))
    partition = valid and {key for key, _ in groups} == set(gold)
    missing = [
        term
        for key, content in groups
        if key in gold
        for term in gold[key]
        if term.lower() not in content.lower()
    ]
    right = [predicted.get(alias, "KEEP") == action for alias, action in gold_action.items()]
    return {
        "exact": 1.0 if partition and not missing else 0.0,
        "partition": 1.0 if partition else 0.0,
        "action_accuracy": sum(right) / len(right) if right else 1.0,
        "valid": valid,
        "missing": missing,
    }


def reference_lm(cases: list[dict[str, Any]]) -> Any:
    """A scripted LM answering each cluster with its expected decisions (found by the memories'
    texts): a run with it checks the harness and the metric, and scores 1."""
    from dspy_memory.testing import scripted_lm

    def key(memories: list[dict[str, Any]]) -> tuple[str, ...]:
        return tuple(sorted(memory["content"] for memory in memories))

    answers = {key(case["memories"]): case["expected"] for case in cases}

    def responder(call: Any) -> dict[str, Any]:
        expected = answers.get(key(call.inputs["memories"]), [])
        return {"decisions": [{k: item[k] for k in ("action", "aliases", "content")} for item in expected]}

    return scripted_lm(responder, model="scripted/reference")


def run(cases: list[dict[str, Any]], *, lm: Any, program: Any = None, threads: int = 1) -> dict[str, Any]:
    from dspy_memory.programs import MemoryConsolidator
    from dspy_memory.util.lm import run_program

    module = program or MemoryConsolidator()

    def one(example: Any) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            prediction, usage = run_program(module, lm, dict(example.inputs()), max_attempts=1)
            decisions = [op.model_dump() for op in prediction.decisions]
            error = None
        except Exception as exc:  # a failed answer scores 0, and says why
            decisions, usage, error = [], getattr(exc, "usage", None), str(exc)[:200]
        scores = consolidation_score(example.expected, decisions)
        if error:
            scores.update(exact=0.0, partition=0.0, action_accuracy=0.0, valid=False)
        return {
            "id": example.case_id,
            "category": example.category,
            "family": example.group,
            **scores,
            "decisions": decisions,
            "error": error,
            "lm_calls": usage.lm_calls if usage else 0,
            "tokens": (usage.prompt_tokens + usage.completion_tokens) if usage else 0,
            "seconds": time.perf_counter() - start,
        }

    examples = as_examples(cases)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        rows = list(progress(pool.map(one, examples), total=len(examples), desc="clusters"))
    return {
        "by_category": _summary(rows, "category"),
        "by_family": _summary(rows, "family"),
        "cases": rows,
        "lm_calls": sum(row["lm_calls"] for row in rows),
        "tokens": sum(row["tokens"] for row in rows),
    }


def _summary(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, float]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row[key]].append(row)
        grouped["overall"].append(row)
    return {
        name: {
            "cases": len(items),
            **{score: sum(item[score] for item in items) / len(items) for score in SCORES},
        }
        for name, items in grouped.items()
    }


def _table(summary: dict[str, dict[str, float]], label: str) -> tuple[list[str], str]:
    names = ["overall", *sorted(name for name in summary if name != "overall")]
    rows = [[name, summary[name]["cases"], *(summary[name][score] for score in SCORES)] for name in names]
    return names, table([label, "cases", "exact", "partition", "action accuracy"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--lm", default=None, help="DSPy model string (default: the scripted reference)")
    parser.add_argument("--program", default=None, help="a compiled MemoryConsolidator (consolidate.json)")
    parser.add_argument(
        "--split", choices=(*SPLITS, "all"), default="all", help="only this split (default: all)"
    )
    add_limit_arguments(parser, "cases", "categories")
    parser.add_argument("--threads", type=int, default=1, help="cases run at once (default 1)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "consolidate.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "consolidate.png"))
    args = parser.parse_args(argv)
    from dspy_memory.programs import MemoryConsolidator
    from dspy_memory.util.lm import make_lm

    cases = load_cases(
        args.data, split=None if args.split == "all" else args.split, limit=args.limit, seed=args.seed
    )
    program = None
    if args.program:
        program = MemoryConsolidator()
        program.load(args.program)
    lm = make_lm(args.lm) if args.lm else reference_lm(cases)
    stage(f"running the consolidation program on {len(cases):,} clusters")
    results = run(cases, lm=lm, program=program, threads=args.threads)
    results.update(
        machine=machine(), lm=args.lm or "scripted reference", program=args.program or "as shipped"
    )
    groups, by_category = _table(results["by_category"], "category")
    _, by_family = _table(results["by_family"], "family")
    shown = "\n\n".join(
        [
            f"Consolidation eval: program {results['program']}, LM {results['lm']}, "
            f"{len(cases)} clusters ({args.split})",
            by_category,
            by_family,
            f"LM calls {results['lm_calls']}, tokens {results['tokens']}",
        ]
    )
    print(shown)
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=groups,
        series={"exact": [results["by_category"][g]["exact"] for g in groups]},
        title="Consolidation: exact decisions per category",
        ylabel="share of clusters",
        text=shown,
    )
    return results


if __name__ == "__main__":
    main()
