"""Compile a memory program with a DSPy optimizer against its eval set and metric.

    python -m evals.optimize reconcile --optimizer bootstrap --lm ollama_chat/llama3.2 \\
        --teacher-lm openai/gpt-4o-mini --train evals/data/reconcile.jsonl --out programs/reconcile.json

Prints the dev score before and after, and saves the compiled program (`program.save`): load it
with `Memory(path, programs="programs/")`. The train file is split into train and dev (`--val`
takes a separate dev file instead). Programs: `reconcile` (ReconcileFacts) and `write` (the
fused WriteMemories), both on the reconcile set; optimizers: bootstrap (BootstrapFewShot),
mipro (MIPROv2), gepa (GEPA, with textual feedback from the metric), simba (SIMBA).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from evals.metrics import op_accuracy
from evals.reconcile import DATA, as_examples, load_cases, score

PROGRAM_FILES = {"reconcile": "reconcile.json", "write": "write.json"}


def make_program(name: str) -> Any:
    from dspy_memory.programs import FactReconciler, FusedWriter

    if name == "reconcile":
        return FactReconciler()
    if name == "write":
        return FusedWriter()
    raise ValueError(f"unknown program {name!r}; choose from {sorted(PROGRAM_FILES)}")


def feedback_metric(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    """GEPA's metric: the score plus what went wrong, in words the reflection LM can use."""
    import dspy

    ops = [op.model_dump() if hasattr(op, "model_dump") else dict(op) for op in (pred.ops or [])]
    result = op_accuracy(ops, gold.expected_ops)
    if result["exact"] == 1.0:
        feedback = "Correct."
    else:
        want = ", ".join(
            f"{op['action']}{' ' + str(op['target']) if 'target' in op else ''}" for op in gold.expected_ops
        )
        got = ", ".join(
            f"{op.get('action')}{' ' + str(op.get('target')) if op.get('target') else ''}" for op in ops
        )
        feedback = (
            f"In a '{gold.category}' situation the right operations were [{want}] but the answer was "
            f"[{got or 'nothing'}]. Review the rules for this kind of situation."
        )
    return dspy.Prediction(score=result["exact"], feedback=feedback)


def evaluate(program: Any, examples: list[Any], lm: Any, *, threads: int = 1) -> float:
    """Mean exact-operation score of `program` on `examples`, 0-100."""
    import dspy

    with dspy.context(lm=lm):
        evaluation = dspy.Evaluate(devset=examples, metric=score, num_threads=threads, display_progress=False)
        return float(evaluation(program).score)


def compile_program(
    name: str,
    optimizer: str,
    trainset: list[Any],
    *,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    threads: int = 1,
    seed: int = 0,
) -> Any:
    import dspy

    student = make_program(name)
    with dspy.context(lm=lm):
        if optimizer == "bootstrap":
            teleprompter = dspy.BootstrapFewShot(
                metric=score,
                teacher_settings={"lm": teacher_lm} if teacher_lm is not None else None,
                max_bootstrapped_demos=4,
                max_labeled_demos=0,
            )
            return teleprompter.compile(student, trainset=trainset)
        if optimizer == "mipro":
            teleprompter = dspy.MIPROv2(
                metric=score,
                prompt_model=teacher_lm or lm,
                task_model=lm,
                auto="light",
                num_threads=threads,
                seed=seed,
            )
            return teleprompter.compile(student, trainset=trainset, requires_permission_to_run=False)
        if optimizer == "gepa":
            teleprompter = dspy.GEPA(
                metric=feedback_metric,
                auto="light",
                reflection_lm=reflection_lm or teacher_lm or lm,
                num_threads=threads,
                seed=seed,
            )
            return teleprompter.compile(student, trainset=trainset, valset=trainset)
        if optimizer == "simba":
            teleprompter = dspy.SIMBA(
                metric=score, max_steps=4, max_demos=4, num_threads=threads, bsize=min(32, len(trainset))
            )
            return teleprompter.compile(student, trainset=trainset, seed=seed)
    raise ValueError(f"unknown optimizer {optimizer!r}; choose bootstrap, mipro, gepa or simba")


def split(
    cases: list[dict[str, Any]], *, dev_share: float, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stratified split: every category in both parts."""
    rng = random.Random(seed)
    train, dev = [], []
    for category in sorted({case["category"] for case in cases}):
        group = [case for case in cases if case["category"] == category]
        rng.shuffle(group)
        cut = max(1, round(len(group) * dev_share))
        dev += group[:cut]
        train += group[cut:]
    rng.shuffle(train)
    return train, dev


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("program", choices=sorted(PROGRAM_FILES))
    parser.add_argument("--optimizer", choices=("bootstrap", "mipro", "gepa", "simba"), default="bootstrap")
    parser.add_argument("--lm", required=True, help="DSPy model string of the model the program runs on")
    parser.add_argument(
        "--teacher-lm", default=None, help="a stronger model for demos / instruction proposals"
    )
    parser.add_argument(
        "--reflection-lm", default=None, help="GEPA's reflection model (default: the teacher)"
    )
    parser.add_argument("--train", default=str(DATA))
    parser.add_argument("--val", default=None, help="a separate dev file (default: 30%% of --train)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N cases of --train")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="where to save the compiled program (JSON)")
    args = parser.parse_args(argv)
    import dspy

    cases = load_cases(args.train, limit=args.limit)
    if args.val:
        train_cases, dev_cases = cases, load_cases(args.val)
    else:
        train_cases, dev_cases = split(cases, dev_share=0.3, seed=args.seed)
    trainset, devset = as_examples(train_cases, args.program), as_examples(dev_cases, args.program)
    lm = dspy.LM(args.lm)
    teacher = dspy.LM(args.teacher_lm) if args.teacher_lm else None
    reflection = dspy.LM(args.reflection_lm) if args.reflection_lm else None
    return run(
        args.program,
        args.optimizer,
        trainset,
        devset,
        lm=lm,
        teacher_lm=teacher,
        reflection_lm=reflection,
        threads=args.threads,
        seed=args.seed,
        out=args.out,
    )


def run(
    name: str,
    optimizer: str,
    trainset: list[Any],
    devset: list[Any],
    *,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    threads: int = 1,
    seed: int = 0,
    out: str | Path,
) -> dict[str, Any]:
    before = evaluate(make_program(name), devset, lm, threads=threads)
    print(f"{name}: dev score before {optimizer}: {before:.1f} ({len(devset)} cases; train {len(trainset)})")
    compiled = compile_program(
        name,
        optimizer,
        trainset,
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        threads=threads,
        seed=seed,
    )
    after = evaluate(compiled, devset, lm, threads=threads)
    print(f"{name}: dev score after {optimizer}: {after:.1f}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    compiled.save(str(out))
    print(f"saved {out}; load it with Memory(path, programs={str(out.parent)!r})")
    return {
        "program": name,
        "optimizer": optimizer,
        "before": before,
        "after": after,
        "out": str(out),
        "compiled": compiled,
    }


if __name__ == "__main__":
    main()
