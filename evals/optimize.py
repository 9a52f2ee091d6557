"""Compile a memory program with a DSPy optimizer against its eval set and metric.

    python -m evals.optimize reconcile --optimizer mipro --lm ollama_chat/llama3.2 \\
        --teacher-lm openai/gpt-4o-mini --out programs/reconcile.json

Programs and what they are compiled against:
  reconcile  ReconcileFacts on the reconcile set (exact operations)
  write      the fused WriteMemories on the reconcile set (exact operations)
  extract    ExtractFacts on LoCoMo sessions (fact F1 against the observations, MiniLM matching)
  answer     AnswerFromMemory on LoCoMo questions 1-4 with memory contexts (official F1)
  query      RewriteQuery on the temporal scenarios (does the plan ask about the right date?)
  consolidate  ConsolidateMemories on the consolidation set (exact partition and kept words)
  rerank     RerankMemories on LoCoMo questions 1-4 with their top 30 hybrid candidates
             (evidence recall@10 of the order a search returns; evals/rerank.py)
Optimizers: bootstrap (BootstrapFewShot), mipro (MIPROv2, light), gepa (GEPA, light, with
textual feedback from the metric), simba (SIMBA).

Splits: the optimizer compiles on train; MIPROv2 and GEPA choose among their candidates on dev
(never on train); test is only reported. reconcile, write and consolidate are split by their
sets' template families, extract, answer and rerank by conversation, query by scenario: no wording,
conversation or scenario is in two parts. --val (and --test) give separate files instead; all
of --train is then train.

Roles: --lm runs the program (the student). --teacher-lm, when given, is the teacher that
bootstraps demos (teacher_settings of BootstrapFewShot, MIPROv2 and SIMBA) and the proposer
that writes instructions (MIPROv2's prompt model, SIMBA's rules); without it the student does
both. --reflection-lm is GEPA's reflection model (default: the teacher, else the student).

Prints dev and test scores before and after and the compile's cost (LM calls and prompt and
completion tokens per role, wall time), saves the compiled program to --out and the numbers
next to it (NAME.optimize.json); `Memory(path, programs="programs/")` loads the program (see
programs_in_use). One compile is an anecdote: --seeds N compiles N times (each seed shuffles
the train order and seeds the optimizer) and prints the compiled mean [min, max] on test next to
the uncompiled program, with a paired 95% interval of the difference; a gain is shown only when
the interval excludes 0 (the first seed's program is saved).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from dspy_memory.learn.optimizers import OPTIMIZERS, CostMeter, scored
from dspy_memory.learn.optimizers import compile_program as compile_with
from dspy_memory.learn.seeded import compile_seeds
from dspy_memory.learn.stats import describe
from evals.report import machine, table, write_json
from evals.tasks import TASK_NAMES, Task, get_task, split_examples


def per_example(
    program: Any, examples: list[Any], lm: Any, *, metric: Any = None, threads: int = 1
) -> list[float]:
    """The metric of `program` on each of `examples` (default metric: exact operations)."""
    from evals.tasks import ops_metric

    return scored(program, examples, lm, metric=metric or ops_metric, threads=threads)


def evaluate(program: Any, examples: list[Any], lm: Any, *, metric: Any = None, threads: int = 1) -> float:
    """Mean metric of `program` on `examples`, 0-100 (default metric: exact operations)."""
    scores = per_example(program, examples, lm, metric=metric, threads=threads)
    return 100.0 * sum(scores) / len(scores) if scores else 0.0


def scores(
    program: Any, splits: dict[str, list[Any]], lm: Any, *, metric: Any, threads: int = 1
) -> dict[str, float | None]:
    """`program`'s score on the dev and test splits (None for an empty one)."""
    return {
        part: evaluate(program, splits[part], lm, metric=metric, threads=threads)
        if splits.get(part)
        else None
        for part in ("dev", "test")
    }


def compile_program(
    task: Task,
    optimizer: str,
    trainset: list[Any],
    valset: list[Any],
    *,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    meter: CostMeter | None = None,
    labeled_demos: int = 8,
    threads: int = 1,
    seed: int = 0,
) -> Any:
    """`task`'s program compiled by `optimizer` on `trainset` (dspy_memory.learn.optimizers)."""
    return compile_with(
        task.make_program(),
        optimizer,
        trainset,
        valset,
        metric=task.metric,
        feedback=task.feedback,
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        meter=meter,
        labeled_demos=labeled_demos,
        threads=threads,
        seed=seed,
    )


def run(
    name: str,
    optimizer: str,
    splits: dict[str, list[Any]],
    *,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    labeled_demos: int = 8,
    threads: int = 1,
    seed: int = 0,
    out: str | Path | None = None,
    embedder: Any = "local",
    before: dict[str, float | None] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Compile on splits["train"] (selecting on splits["dev"]); score dev and test before and
    after; save the program to `out` and the numbers to NAME.optimize.json beside it. `before`
    passes the uncompiled program's {"dev": score, "test": score} when they are already known
    (they do not depend on the optimizer), saving their LM calls."""
    task = get_task(name, embedder=embedder)
    say = (lambda *_: None) if quiet else print
    parts = {part: splits.get(part) or [] for part in ("train", "dev", "test")}

    sizes = ", ".join(f"{len(items)} {part}" for part, items in parts.items())
    say(f"{name}: {optimizer} on {sizes}")
    before = before or scores(task.make_program(), parts, lm, metric=task.metric, threads=threads)
    meter = CostMeter()
    start = time.perf_counter()
    compiled = compile_program(
        task,
        optimizer,
        parts["train"],
        parts["dev"],
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        meter=meter,
        labeled_demos=labeled_demos,
        threads=threads,
        seed=seed,
    )
    seconds = time.perf_counter() - start
    after = scores(compiled, parts, lm, metric=task.metric, threads=threads)
    result = {
        **_compiled_what(name, optimizer, parts, lm, teacher_lm, reflection_lm),
        "dev_before": before["dev"],
        "dev_after": after["dev"],
        "test_before": before["test"],
        "test_after": after["test"],
        "compile_seconds": seconds,
        "cost": meter.summary(),
        "demos": {key: len(predictor.demos) for key, predictor in compiled.named_predictors()},
        "machine": machine(),
    }
    say(_report(result))
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        compiled.save(str(out))
        numbers = write_json(out.with_name(out.stem + ".optimize.json"), result)
        result["out"] = str(out)
        say(f"saved {out} and {numbers}; load it with Memory(path, programs={str(out.parent)!r})")
    return {**result, "compiled": compiled}


def run_seeds(
    task: Task,
    optimizer: str,
    splits: dict[str, list[Any]],
    *,
    lm: Any,
    teacher_lm: Any = None,
    reflection_lm: Any = None,
    seeds: list[int],
    labeled_demos: int = 8,
    threads: int = 1,
    out: str | Path,
) -> dict[str, Any]:
    """Compile once per seed on splits["train"], score each on test (dev when there is no test)
    next to the uncompiled program, print the seed table; save the first seed's program to `out`
    and every number to NAME.optimize.json beside it."""
    heldout = "test" if splits.get("test") else "dev"
    print(f"{task.name}: {optimizer}, seeds {seeds}, scored on {len(splits[heldout])} {heldout} examples")
    measured = compile_seeds(
        task.make_program,
        optimizer,
        splits["train"],
        splits.get("dev") or [],
        splits[heldout],
        metric=task.metric,
        feedback=task.feedback,
        lm=lm,
        teacher_lm=teacher_lm,
        reflection_lm=reflection_lm,
        seeds=seeds,
        labeled_demos=labeled_demos,
        threads=threads,
    )
    result = {
        **_compiled_what(task.name, optimizer, splits, lm, teacher_lm, reflection_lm),
        "scored_on": heldout,
        "seeds": seeds,
        "summary": measured.summary,
        "cost": measured.cost,
        "compile_seconds": measured.seconds,
        "saved_seed": seeds[0],
        "machine": machine(),
    }
    print(describe(measured.summary))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    measured.programs[seeds[0]].save(str(out))
    numbers = write_json(out.with_name(out.stem + ".optimize.json"), result)
    print(f"saved seed {seeds[0]}'s program to {out}, the numbers to {numbers}")
    return {**result, "out": str(out), "compiled": measured.programs}


def _compiled_what(
    name: str, optimizer: str, splits: dict[str, list[Any]], lm: Any, teacher_lm: Any, reflection_lm: Any
) -> dict[str, Any]:
    """What a compile's numbers are about: the program, the optimizer, the LMs, the split sizes."""
    return {
        "program": name,
        "optimizer": optimizer,
        "lm": _name(lm),
        "teacher_lm": _name(teacher_lm),
        "reflection_lm": _name(reflection_lm),
        "sizes": {part: len(items) for part, items in splits.items()},
    }


def _name(lm: Any) -> str | None:
    return None if lm is None else str(getattr(lm, "model", type(lm).__name__))


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"dev {_score(result['dev_before'])} -> {_score(result['dev_after'])}, "
        f"test {_score(result['test_before'])} -> {_score(result['test_after'])}; "
        f"compile {result['compile_seconds']:.1f} s; demos {result['demos']}",
        table(
            ["role", "LM calls", "prompt tokens", "completion tokens"],
            [
                [role, counts["lm_calls"], counts["prompt_tokens"], counts["completion_tokens"]]
                for role, counts in result["cost"].items()
            ],
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("program", choices=TASK_NAMES)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap")
    parser.add_argument("--lm", required=True, help="model string of the model the program runs on")
    parser.add_argument(
        "--teacher-lm", default=None, help="a stronger model: bootstraps demos, proposes instructions"
    )
    parser.add_argument(
        "--reflection-lm", default=None, help="GEPA's reflection model (default: the teacher)"
    )
    parser.add_argument("--train", default=None, help="training data (default: the program's eval set)")
    parser.add_argument("--val", default=None, help="a separate dev file (default: the dev split of --train)")
    parser.add_argument("--test", default=None, help="a separate test file (with --val; default: none)")
    parser.add_argument("--embedder", default="local", help="for extract (matching) and answer (contexts)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N examples of each split")
    parser.add_argument("--labeled-demos", type=int, default=8, help="labeled demos per predictor (max)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the split's seed (and the compile's, with one)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="compile N times (seeds 0..N-1 shuffle the train order and seed the optimizer) and print "
        "the table against the uncompiled program: mean [min, max] and a paired 95%% interval "
        "(5 or more for a claim); the first seed's program is saved",
    )
    parser.add_argument(
        "--out", required=True, help="where to save the compiled program, e.g. programs/NAME.json"
    )
    args = parser.parse_args(argv)
    from dspy_memory.util.lm import make_lm

    task = get_task(args.program, embedder=args.embedder)
    examples = task.examples(args.train or task.default_data, args.embedder)
    if args.val:
        splits = {
            "train": examples,
            "dev": task.examples(args.val, args.embedder),
            "test": task.examples(args.test, args.embedder) if args.test else [],
        }
    else:
        splits = split_examples(examples, seed=args.seed)
    splits = {part: items[: args.limit] for part, items in splits.items()}
    if Path(args.out).name != task.file:
        print(f"note: Memory(programs=...) looks for {task.file}; save it under that name to have it loaded")
    if args.seeds > 1:
        return run_seeds(
            task,
            args.optimizer,
            splits,
            lm=make_lm(args.lm),
            teacher_lm=make_lm(args.teacher_lm) if args.teacher_lm else None,
            reflection_lm=make_lm(args.reflection_lm) if args.reflection_lm else None,
            seeds=list(range(args.seeds)),
            labeled_demos=args.labeled_demos,
            threads=args.threads,
            out=args.out,
        )
    return run(
        args.program,
        args.optimizer,
        splits,
        lm=make_lm(args.lm),
        teacher_lm=make_lm(args.teacher_lm) if args.teacher_lm else None,
        reflection_lm=make_lm(args.reflection_lm) if args.reflection_lm else None,
        labeled_demos=args.labeled_demos,
        threads=args.threads,
        seed=args.seed,
        out=args.out,
        embedder=args.embedder,
    )


if __name__ == "__main__":
    main()
