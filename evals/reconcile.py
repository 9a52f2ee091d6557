"""The reconcile eval: does the program decide the right operations?

    python -m evals.reconcile [--program reconcile|write] [--split train|dev|test] [--lm MODEL]
        [--limit N] [--threads T]

Cases come from evals/data/reconcile.jsonl (ten situations, 30+ hand-written template families
each; `python -m evals.data.make_reconcile` rebuilds it). Every case names its `family` and the
`split` (train, dev or test) its family is in. `reconcile` runs ReconcileFacts on the new facts;
`write` runs the fused WriteMemories on the turns. Scores: op accuracy (exact match of the
(action, alias) multiset), op F1 and action F1 (evals/metrics.py), per category. Without --lm a
scripted oracle (`dspy_memory.testing.oracle_decisions`) answers, which checks the harness, not
a model.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evals.metrics import op_accuracy
from evals.report import RESULTS_DIR, machine, progress, save, stage, table
from evals.sampling import add_limit_arguments, stratified
from evals.tasks import ops_metric as score  # noqa: F401 - the metric DSPy optimizers use

DATA = Path(__file__).resolve().parent / "data" / "reconcile.jsonl"


SPLITS = ("train", "dev", "test")


def load_cases(
    path: str | Path = DATA, *, split: str | None = None, limit: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """The cases of the set (or of one `split`: its template families are in no other split);
    `limit` of them sampled across categories (evals/sampling.py)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    with open(path, encoding="utf-8") as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    if split is not None:
        cases = [case for case in cases if case.get("split") == split]
    return stratified(cases, limit, key=lambda case: case.get("category"), seed=seed)


def as_examples(cases: list[dict[str, Any]], program: str) -> list[Any]:
    """dspy.Examples for the chosen program; the label is `ops`, the program's output field, so
    a labeled example is also a complete demonstration."""
    import dspy

    from dspy_memory.ops import Fact
    from dspy_memory.programs import KnownMemory, Turn

    examples = []
    for case in cases:
        existing = [KnownMemory(**memory) for memory in case["existing_memories"]]
        about = {
            "ops": case["expected_ops"],
            "category": case["category"],
            "group": case.get("family", case["category"]),
            "split": case.get("split"),
            "case_id": case.get("id"),
        }
        if program == "reconcile":
            example = dspy.Example(
                new_facts=[Fact(**fact) for fact in case["new_facts"]],
                existing_memories=existing,
                observed_at=case["observed_at"],
                **about,
            ).with_inputs("new_facts", "existing_memories", "observed_at")
        else:
            example = dspy.Example(
                turns=[Turn(**turn) for turn in case["turns"]],
                observed_at=case["observed_at"],
                existing_memories=existing,
                context="",
                **about,
            ).with_inputs("turns", "observed_at", "existing_memories", "context")
        examples.append(example)
    return examples


def oracle_responder(cases: list[dict[str, Any]]) -> Any:
    """The rule-based oracle (`oracle_decisions`) as a responder for the two write signatures;
    for the fused program it looks the facts up by the last turn (speaker, text, time)."""
    from dspy_memory.testing import oracle_decisions

    def said(turn: dict[str, Any]) -> tuple[Any, ...]:
        # Two cases may share a last line ("Same as ever."); who said it and when tell them apart.
        return (turn.get("speaker"), turn.get("text"), turn.get("time"))

    facts_by_turn = {said(case["turns"][-1]): case["new_facts"] for case in cases}

    def responder(call: Any) -> dict[str, Any]:
        facts = call.inputs.get("new_facts")
        if facts is None:
            facts = facts_by_turn.get(said(call.inputs["turns"][-1]), [])
        return {"ops": oracle_decisions(facts, call.inputs["existing_memories"])}

    return responder


def oracle_lm(cases: list[dict[str, Any]]) -> Any:
    """The rule-based oracle as an LM."""
    from dspy_memory.testing import scripted_lm

    return scripted_lm(oracle_responder(cases), model="scripted/oracle")


def run(cases: list[dict[str, Any]], *, program: str, lm: Any, threads: int = 1) -> dict[str, Any]:
    from dspy_memory.programs import FactReconciler, FusedWriter
    from dspy_memory.util.lm import run_program

    module = FactReconciler() if program == "reconcile" else FusedWriter()
    examples = as_examples(cases, program)

    def one(example: Any) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            prediction, usage = run_program(module, lm, dict(example.inputs()), max_attempts=1)
            ops = [op.model_dump() for op in prediction.ops or []]
            error = None
        except Exception as exc:  # a failed answer scores 0, and says why
            ops, usage, error = [], getattr(exc, "usage", None), str(exc)[:200]
        scores = op_accuracy(ops, example.ops)
        return {
            "category": example.category,
            **scores,
            "ops": ops,
            "error": error,
            "lm_calls": usage.lm_calls if usage else 0,
            "tokens": (usage.prompt_tokens + usage.completion_tokens) if usage else 0,
            "seconds": time.perf_counter() - start,
        }

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        rows = list(progress(pool.map(one, examples), total=len(examples), desc="cases"))
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_category[row["category"]].append(row)
        by_category["overall"].append(row)
    summary = {
        group: {
            "cases": len(items),
            **{key: sum(item[key] for item in items) / len(items) for key in ("exact", "f1", "action_f1")},
        }
        for group, items in by_category.items()
    }
    return {
        "program": program,
        "summary": summary,
        "cases": rows,
        "lm_calls": sum(row["lm_calls"] for row in rows),
        "tokens": sum(row["tokens"] for row in rows),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument(
        "--locomo",
        default=None,
        metavar="LOCOMO_JSON",
        help="score the slice from real LoCoMo dialogue instead (evals/reconcile_locomo.py; the LoCoMo file)",
    )
    parser.add_argument("--program", choices=("reconcile", "write"), default="reconcile")
    parser.add_argument("--lm", default=None, help="DSPy model string (default: the scripted oracle)")
    parser.add_argument("--split", choices=SPLITS, default=None, help="only this split (default: all)")
    add_limit_arguments(parser, "cases", "categories")
    parser.add_argument("--threads", type=int, default=1, help="cases run at once (default 1)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "reconcile.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "reconcile.png"))
    args = parser.parse_args(argv)
    from dspy_memory.util.lm import make_lm

    if args.locomo:
        from evals.reconcile_locomo import load_locomo_cases

        cases = [c for c in load_locomo_cases(args.locomo) if args.split in (None, c["split"])]
        cases = stratified(cases, args.limit, key=lambda case: case.get("category"), seed=args.seed)
    else:
        cases = load_cases(args.data, split=args.split, limit=args.limit, seed=args.seed)
    lm = make_lm(args.lm) if args.lm else oracle_lm(cases)
    stage(f"running the {args.program} program on {len(cases):,} cases")
    results = run(cases, program=args.program, lm=lm, threads=args.threads)
    results["machine"] = machine()
    results["lm"] = args.lm or "scripted oracle"
    summary = results["summary"]
    groups = ["overall", *sorted(group for group in summary if group != "overall")]
    source = "the LoCoMo slice" if args.locomo else "the template set"
    shown = "\n\n".join(
        [
            f"Reconcile eval: {args.program} program, LM {results['lm']}, {summary['overall']['cases']} cases of {source}",
            table(
                ["category", "cases", "op exact", "op F1", "action F1"],
                [
                    [g, summary[g]["cases"], summary[g]["exact"], summary[g]["f1"], summary[g]["action_f1"]]
                    for g in groups
                ],
            ),
            f"LM calls {results['lm_calls']}, tokens {results['tokens']}",
        ]
    )
    print(shown)
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=groups,
        series={"op exact": [summary[g]["exact"] for g in groups]},
        title="Reconcile: exact operations per category",
        ylabel="share of cases",
        text=shown,
    )
    return results


if __name__ == "__main__":
    main()
