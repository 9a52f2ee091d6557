"""Every DSPy optimizer on the memory programs, offline, with a student that can only learn from
the demonstrations in its prompt (the learner LM, evals/learner.py).

    python -m evals.optimize_offline [--programs reconcile,write,query] [--optimizers ...]

It measures what each optimizer's choice of prompt is worth to that student on the test split
(template families, or scenarios, the optimizer never saw), and what the compile costs in LM
calls, tokens and seconds. It does not measure what an optimizer does for a real model: the
learner ignores instructions, so an optimizer that only rewrites them (GEPA) cannot move its
score, and it imitates one demonstration, so the score is a floor on what demonstrations can
teach, not a forecast.

Reconcile and write rows also score the test conversations of the LoCoMo reconcile slice
(evals/reconcile_locomo.py; real dialogue, when the LoCoMo file is on this machine): whether what
the templates taught carries to conversations nobody wrote for this set.

Teachers: `none` (the student bootstraps its own demos; labeled demos come from the train
split), or `rules`, a rule-based teacher: the reconcile oracle's rules for operations (NOOP for a
fact known word for word, INVALIDATE a changed one-valued relation, ADD otherwise) and, for
search plans, as_of in the middle of the period the question names. GEPA runs without a teacher
(it has none); its reflection LM is the learner, which hands the instruction back unchanged.
Writes evals/results/optimize_offline.json and .png.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import time
from pathlib import Path
from typing import Any

from evals.learner import learner_lm, period
from evals.optimize import OPTIMIZERS, evaluate, run
from evals.report import RESULTS_DIR, machine, save, table
from evals.tasks import get_task, split_examples

PROGRAMS = ("reconcile", "write", "query")


def plan_rules(call: Any) -> dict[str, Any] | None:
    """Search for the question; as_of in the middle of the period it names, if any."""
    if "plan" not in call.output_fields:
        return None
    question = str(call.inputs.get("question", ""))
    named = period(question, None)
    as_of = None if named is None else (named[0] + (named[1] - named[0]) / 2).isoformat()
    return {"plan": {"queries": [question], "as_of": as_of}}


def teacher(program: str, name: str) -> Any:
    if name == "none":
        return None
    if program == "query":
        return learner_lm("rules/teacher", rules=plan_rules)
    from evals.reconcile import load_cases, oracle_responder

    oracle = oracle_responder(load_cases())
    return learner_lm(
        "rules/teacher", rules=lambda call: oracle(call) if "ops" in call.output_fields else None
    )


def locomo_test(program: str) -> list[Any]:
    """The test conversations of the LoCoMo reconcile slice (evals/reconcile_locomo.py) as
    examples, when the LoCoMo file is on this machine: real dialogue, no template at all."""
    from evals.locomo import DEFAULT_DATA

    if program not in ("reconcile", "write") or not Path(DEFAULT_DATA).exists():
        return []
    from evals.reconcile import as_examples
    from evals.reconcile_locomo import load_locomo_cases

    return as_examples([case for case in load_locomo_cases() if case["split"] == "test"], program)


def runs(programs: list[str], optimizers: list[str], *, seed: int) -> list[dict[str, Any]]:
    rows = []
    for program in programs:
        task = get_task(program, embedder=None)
        splits = split_examples(task.examples(task.default_data, None), seed=seed)
        real = locomo_test(program)
        real_before = evaluate(task.make_program(), real, learner_lm(), metric=task.metric) if real else None
        for optimizer in optimizers:
            for teacher_name in ("none",) if optimizer == "gepa" else ("none", "rules"):
                start = time.perf_counter()
                # The optimizers print every trial and progress bar; the table is the report.
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    result = run(
                        program,
                        optimizer,
                        splits,
                        lm=learner_lm(),
                        teacher_lm=teacher(program, teacher_name),
                        seed=seed,
                        quiet=True,
                    )
                total = result["cost"]["total"]
                real_after = (
                    evaluate(result["compiled"], real, learner_lm(), metric=task.metric) if real else None
                )
                rows.append(
                    {
                        **{key: value for key, value in result.items() if key != "compiled"},
                        "locomo_test_before": real_before,
                        "locomo_test_after": real_after,
                        "teacher": teacher_name,
                        "lm_calls": total["lm_calls"],
                        "tokens": total["prompt_tokens"] + total["completion_tokens"],
                        "wall_seconds": time.perf_counter() - start,
                    }
                )
                print(
                    f"{program} {optimizer} teacher={teacher_name}: test {result['test_before']:.1f} -> "
                    f"{result['test_after']:.1f}",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "optimize_offline.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "optimize_offline.png"))
    args = parser.parse_args(argv)
    logging.getLogger("dspy").setLevel(logging.ERROR)
    rows = runs(args.programs.split(","), args.optimizers.split(","), seed=args.seed)
    sizes = {row["program"]: "/".join(str(n) for n in row["sizes"].values()) for row in rows}
    heading = "Offline optimization with the learner LM; scores 0-100; train/dev/test examples: " + ", ".join(
        f"{program} {split}" for program, split in sizes.items()
    )
    shown = table(
        [
            "program",
            "optimizer",
            "teacher",
            "test before",
            "test after",
            "dev before",
            "dev after",
            "LoCoMo before",
            "LoCoMo after",
            "LM calls",
            "tokens",
            "wall s",
        ],
        [
            [
                row["program"],
                row["optimizer"],
                row["teacher"],
                row["test_before"],
                row["test_after"],
                row["dev_before"],
                row["dev_after"],
                "-" if row["locomo_test_before"] is None else row["locomo_test_before"],
                "-" if row["locomo_test_after"] is None else row["locomo_test_after"],
                row["lm_calls"],
                row["tokens"],
                row["wall_seconds"],
            ]
            for row in rows
        ],
    )
    print(f"\n{heading}\n\n{shown}")
    results = {"rows": rows, "machine": machine(), "seed": args.seed}
    groups = [f"{row['program']}\n{row['optimizer']}/{row['teacher']}" for row in rows]
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=groups,
        series={
            "test before": [row["test_before"] for row in rows],
            "test after": [row["test_after"] for row in rows],
        },
        title="Offline optimization with the learner LM: test score before and after",
        ylabel="test score (0-100)",
        text=f"{heading}\n\n{shown}",
    )
    return results


if __name__ == "__main__":
    main()
