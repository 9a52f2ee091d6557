"""Compile a memory program with a DSPy optimizer against its eval set and metric.

    python -m evals.optimize reconcile --optimizer bootstrap --lm ollama_chat/llama3.2 \\
        --teacher-lm openai/gpt-4o-mini --out programs/reconcile.json

Programs and what they are compiled against:
  reconcile  ReconcileFacts on the reconcile set (exact operations)
  write      the fused WriteMemories on the reconcile set (exact operations)
  extract    ExtractFacts on LoCoMo sessions (fact F1 against the observations, MiniLM matching)
  answer     AnswerFromMemory on LoCoMo questions 1-4 with memory contexts (official F1)
  query      RewriteQuery on the temporal scenarios (does the plan ask about the right date?)
Optimizers: bootstrap (BootstrapFewShot), mipro (MIPROv2), gepa (GEPA, with textual feedback
from the metric), simba (SIMBA). The data is split into train and dev (stratified where a
category exists) unless --val gives a dev file. Prints the dev score before and after, and saves
the compiled program; `Memory(path, programs="programs/")` loads it (see programs_in_use).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evals.tasks import TASK_NAMES, Task, get_task, shuffle_split


def evaluate(program: Any, examples: list[Any], lm: Any, *, metric: Any = None, threads: int = 1) -> float:
    """Mean metric of `program` on `examples`, 0-100 (default metric: exact operations)."""
    import dspy

    from evals.tasks import ops_metric

    with dspy.context(lm=lm):
        evaluation = dspy.Evaluate(
            devset=examples, metric=metric or ops_metric, num_threads=threads, display_progress=False
        )
        return float(evaluation(program).score)


def compile_program(
    task: Task,
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

    student = task.make_program()
    with dspy.context(lm=lm):
        if optimizer == "bootstrap":
            teleprompter = dspy.BootstrapFewShot(
                metric=task.metric,
                teacher_settings={"lm": teacher_lm} if teacher_lm is not None else None,
                max_bootstrapped_demos=4,
                max_labeled_demos=0,
            )
            return teleprompter.compile(student, trainset=trainset)
        if optimizer == "mipro":
            teleprompter = dspy.MIPROv2(
                metric=task.metric,
                prompt_model=teacher_lm or lm,
                task_model=lm,
                auto="light",
                num_threads=threads,
                seed=seed,
            )
            return teleprompter.compile(student, trainset=trainset, requires_permission_to_run=False)
        if optimizer == "gepa":
            teleprompter = dspy.GEPA(
                metric=task.feedback,
                auto="light",
                reflection_lm=reflection_lm or teacher_lm or lm,
                num_threads=threads,
                seed=seed,
            )
            return teleprompter.compile(student, trainset=trainset, valset=trainset)
        if optimizer == "simba":
            teleprompter = dspy.SIMBA(
                metric=task.metric,
                max_steps=4,
                max_demos=4,
                num_threads=threads,
                bsize=min(32, len(trainset)),
            )
            return teleprompter.compile(student, trainset=trainset, seed=seed)
    raise ValueError(f"unknown optimizer {optimizer!r}; choose bootstrap, mipro, gepa or simba")


def split(
    cases: list[dict[str, Any]], *, dev_share: float, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stratified split of reconcile cases: every category in both parts."""
    import dspy

    wrapped = [dspy.Example(case=case, category=case["category"]) for case in cases]
    train, dev = shuffle_split(wrapped, dev_share=dev_share, seed=seed, key="category")
    return [item.case for item in train], [item.case for item in dev]


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
    embedder: Any = "local",
) -> dict[str, Any]:
    task = get_task(name, embedder=embedder)
    before = evaluate(task.make_program(), devset, lm, metric=task.metric, threads=threads)
    print(f"{name}: dev score before {optimizer}: {before:.1f} ({len(devset)} dev, {len(trainset)} train)")
    compiled = compile_program(
        task,
        optimizer,
        trainset,
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        threads=threads,
        seed=seed,
    )
    after = evaluate(compiled, devset, lm, metric=task.metric, threads=threads)
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("program", choices=TASK_NAMES)
    parser.add_argument("--optimizer", choices=("bootstrap", "mipro", "gepa", "simba"), default="bootstrap")
    parser.add_argument("--lm", required=True, help="DSPy model string of the model the program runs on")
    parser.add_argument(
        "--teacher-lm", default=None, help="a stronger model for demos / instruction proposals"
    )
    parser.add_argument(
        "--reflection-lm", default=None, help="GEPA's reflection model (default: the teacher)"
    )
    parser.add_argument("--train", default=None, help="training data (default: the program's eval set)")
    parser.add_argument("--val", default=None, help="a separate dev file (default: 30%% of --train)")
    parser.add_argument("--embedder", default="local", help="for extract (matching) and answer (contexts)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N examples of --train")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", required=True, help="where to save the compiled program, e.g. programs/NAME.json"
    )
    args = parser.parse_args(argv)
    import dspy

    task = get_task(args.program, embedder=args.embedder)
    examples = task.examples(args.train or task.default_data, args.embedder)[: args.limit]
    if args.val:
        trainset, devset = examples, task.examples(args.val, args.embedder)
    else:
        trainset, devset = shuffle_split(examples, dev_share=0.3, seed=args.seed, key="category")
    if Path(args.out).name != task.file:
        print(f"note: Memory(programs=...) looks for {task.file}; save it under that name to have it loaded")
    return run(
        args.program,
        args.optimizer,
        trainset,
        devset,
        lm=dspy.LM(args.lm),
        teacher_lm=dspy.LM(args.teacher_lm) if args.teacher_lm else None,
        reflection_lm=dspy.LM(args.reflection_lm) if args.reflection_lm else None,
        threads=args.threads,
        seed=args.seed,
        out=args.out,
        embedder=args.embedder,
    )


if __name__ == "__main__":
    main()
