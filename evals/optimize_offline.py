"""Every DSPy optimizer on the memory programs, offline, over seeds, against the uncompiled
program, with the ablations that remove what a gain would be credited to.

    python -m evals.optimize_offline --seeds 5 [--programs reconcile,write,query,consolidate]
        [--optimizers bootstrap,mipro,gepa,simba] [--record]

The student is the learner LM (evals/learner.py): it copies the nearest demonstration in its
prompt, re-bound to the current input, and knows nothing of any task. Each compile runs once per
seed: the seed shuffles the train order and is the optimizer's own seed. Every run is scored per
test example (template families, or scenarios, the compile never saw) next to the uncompiled
program on the same examples; the table gives the compiled mean [min, max] over seeds, the mean
difference and its paired bootstrap 95% interval (examples and seeds resampled), and a verdict:
a gain or a loss only when the interval excludes 0.

Teachers: `none` (the student bootstraps its own demos; labeled demos come from train) or
`rules` (evals/teachers.py: rules that know the task, as a stronger model would). GEPA runs
without one; its reflection LM is the learner, which hands the instruction back unchanged.

Ablations, per program, per seed, scored the same way:
- `bootstrap, labels shuffled`: BootstrapFewShot's demos with their outputs traded among them
  (what is left is the labels' prior, not which label goes with which input);
- `irrelevant demos`: 8 demos with made-up inputs and real train labels (evals/ablations.py).
And for reconcile, the leak check: BootstrapFewShot on two pools of equal size, shuffled
identically, that differ only in whether half of them are other cases of the test cases' own
template families (evaluated on the rest of those families).

It measures what an optimizer's choice of demonstrations is worth to a student that can only
copy them; not what an optimizer does for a real model (the learner ignores instructions, so an
instruction-only optimizer cannot move it). Writes evals/results/optimize_offline.json, .md and
.png; --record also writes docs/results/optimize_offline.json and the tables in docs/evals.md
(python -m evals.doc_tables).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import random
from pathlib import Path
from typing import Any

from dspy_memory.learn.seeded import compile_seeds, shuffled
from dspy_memory.learn.stats import summary
from evals.ablations import irrelevant_demos, shuffled_labels, with_demos
from evals.learner import learner_lm
from evals.optimize import OPTIMIZERS, per_example
from evals.report import RESULTS_DIR, command_line, machine, save, stage, table
from evals.tasks import get_task, split_examples
from evals.teachers import teacher

PROGRAMS = ("reconcile", "write", "query", "consolidate")
TEACHERS = {
    "bootstrap": ("none", "rules"),
    "mipro": ("none", "rules"),
    "gepa": ("none",),
    "simba": ("none", "rules"),
}
RECORDED = Path(__file__).resolve().parent.parent / "docs" / "results" / "optimize_offline.json"
ABLATION_DEMOS = 8


def _quietly(function: Any, *args: Any, **kwargs: Any) -> Any:
    # The optimizers print every trial and progress bar; the table is the report.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return function(*args, **kwargs)


def compile_over_seeds(
    task: Any,
    optimizer: str,
    teacher_name: str,
    splits: dict[str, list[Any]],
    heldout: list[Any],
    seeds: list[int],
) -> Any:
    """`task`'s program compiled once per seed (learn/seeded.py), scored on `heldout`."""
    return _quietly(
        compile_seeds,
        task.make_program,
        optimizer,
        splits["train"],
        splits["dev"],
        heldout,
        metric=task.metric,
        feedback=task.feedback,
        lm=learner_lm(),
        teacher_lm=teacher(task.name, teacher_name),
        seeds=seeds,
    )


def _scored(task: Any, program: Any, examples: list[Any]) -> list[float]:
    return _quietly(per_example, program, examples, learner_lm(), metric=task.metric)


def measure(name: str, optimizers: list[str], seeds: list[int], *, dev: bool = True) -> dict[str, Any]:
    """Every optimizer and teacher on `name`, once per seed, and the ablations (dev=False: test
    scores only)."""
    task = get_task(name, embedder=None)
    splits = split_examples(task.examples(task.default_data, None))
    uncompiled = task.make_program()
    parts = ("dev", "test") if dev else ("test",)
    baseline = {part: _scored(task, uncompiled, splits[part]) for part in parts}
    rows, bootstrapped = [], None  # bootstrapped: BootstrapFewShot's compile without a teacher
    for optimizer in optimizers:
        for teacher_name in TEACHERS[optimizer]:
            stage(f"{name}: {optimizer}, teacher {teacher_name}, seeds {seeds}")
            measured = compile_over_seeds(task, optimizer, teacher_name, splits, splits["test"], seeds)
            if (optimizer, teacher_name) == ("bootstrap", "none"):
                bootstrapped = measured
            runs = [
                {
                    "seed": seed,
                    "seconds": measured.seconds[seed],
                    "lm_calls": measured.cost[seed]["total"]["lm_calls"],
                    "tokens": measured.cost[seed]["total"]["prompt_tokens"]
                    + measured.cost[seed]["total"]["completion_tokens"],
                    "demos": sum(len(p.demos) for _, p in measured.programs[seed].named_predictors()),
                    "test": measured.scores[seed],
                    **({"dev": _scored(task, measured.programs[seed], splits["dev"])} if dev else {}),
                }
                for seed in seeds
            ]
            rows.append(_row(name, optimizer, teacher_name, baseline, runs))
    stage(f"{name}: ablations")
    ablations = {
        "irrelevant demos": {
            seed: with_demos(uncompiled, irrelevant_demos(splits["train"], count=ABLATION_DEMOS, seed=seed))
            for seed in seeds
        }
    }
    if bootstrapped is not None:
        ablations["bootstrap, labels shuffled"] = {
            seed: shuffled_labels(program, seed=seed) for seed, program in bootstrapped.programs.items()
        }
    compiled_runs = list(bootstrapped.scores.values()) if bootstrapped is not None else None
    ablation_rows = []
    for ablation, programs in ablations.items():
        tests = [_scored(task, program, splits["test"]) for program in programs.values()]
        ablation_rows.append(
            {
                "program": name,
                "ablation": ablation,
                "seeds": list(programs),
                "test": summary(baseline["test"], tests),
                # Paired by seed with BootstrapFewShot's own demos: what the ablated part was worth.
                "bootstrap_minus_ablation": summary(tests, compiled_runs) if compiled_runs else None,
            }
        )
    return {
        "program": name,
        "sizes": {part: len(items) for part, items in splits.items()},
        "rows": rows,
        "ablations": ablation_rows,
    }


def _row(
    name: str, optimizer: str, teacher_name: str, baseline: dict[str, list[float]], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    cost = {
        key: sum(run.get(key, 0) for run in runs) / len(runs)
        for key in ("lm_calls", "tokens", "seconds", "demos")
    }
    return {
        "program": name,
        "optimizer": optimizer,
        "teacher": teacher_name,
        "seeds": [run["seed"] for run in runs],
        "test": summary(baseline["test"], [run["test"] for run in runs]),
        "dev": summary(baseline["dev"], [run["dev"] for run in runs]) if baseline.get("dev") else None,
        "per_compile": cost,
    }


def leak_check(seeds: list[int]) -> dict[str, Any]:
    """BootstrapFewShot on reconcile from two pools of one size, shuffled alike, that differ only
    in whether half of the pool is other cases of the evaluated cases' own template families.

    The test split's families are split case by case: every other case is evaluated, the rest
    are the siblings. The pool without siblings puts train cases where the other has them."""
    task = get_task("reconcile", embedder=None)
    splits = split_examples(task.examples(task.default_data, None))
    evaluated, siblings = [], []
    for family in sorted({example.group for example in splits["test"]}):
        cases = [example for example in splits["test"] if example.group == family]
        evaluated += cases[::2]
        siblings += cases[1::2]
    runs: dict[str, list[list[float]]] = {"with siblings": [], "without siblings": []}
    stage(f"reconcile: leak check, seeds {seeds}")
    for seed in seeds:
        train = shuffled(splits["train"], seed)
        filler, spare = train[: len(siblings)], train[len(siblings) : 2 * len(siblings)]
        slots = set(random.Random(seed).sample(range(2 * len(siblings)), len(siblings)))
        pools: dict[str, list[Any]] = {"with siblings": [], "without siblings": []}
        sibling_order, spare_order, filler_order = iter(shuffled(siblings, seed)), iter(spare), iter(filler)
        for index in range(2 * len(siblings)):
            if index in slots:
                pools["with siblings"].append(next(sibling_order))
                pools["without siblings"].append(next(spare_order))
            else:
                same = next(filler_order)
                pools["with siblings"].append(same)
                pools["without siblings"].append(same)
        for pool, items in pools.items():
            measured = compile_over_seeds(
                task, "bootstrap", "none", {"train": items, "dev": []}, evaluated, [seed]
            )
            runs[pool].append(measured.scores[seed])
    return {
        "pool": 2 * len(siblings),
        "siblings": len(siblings),
        "evaluated": len(evaluated),
        "with siblings": summary(_scored(task, task.make_program(), evaluated), runs["with siblings"]),
        "without siblings": summary(_scored(task, task.make_program(), evaluated), runs["without siblings"]),
        "difference": summary(runs["without siblings"], runs["with siblings"]),
    }


def _range(cell: dict[str, Any]) -> str:
    return f"{cell['mean']:.1f} [{cell['min']:.1f}, {cell['max']:.1f}]"


def _interval(cell: dict[str, Any]) -> str:
    low, high = cell["interval"]
    return f"{cell['difference']:+.1f} [{low:+.1f}, {high:+.1f}]"


def results_table(results: dict[str, Any]) -> str:
    """The main table: per program, optimizer and teacher, test scores over seeds."""
    return table(
        [
            "program",
            "optimizer",
            "teacher",
            "test n",
            "uncompiled",
            "compiled, mean [min, max]",
            "difference [95% interval]",
            "verdict",
            "dev compiled",
            "LM calls",
            "seconds",
        ],
        [
            [
                row["program"],
                row["optimizer"],
                row["teacher"],
                row["test"]["examples"],
                f"{row['test']['baseline']:.1f}",
                _range(row["test"]),
                _interval(row["test"]),
                row["test"]["verdict"],
                _range(row["dev"]) if row["dev"] else "-",
                f"{row['per_compile']['lm_calls']:.0f}" if row["per_compile"]["lm_calls"] else "-",
                f"{row['per_compile']['seconds']:.1f}" if row["per_compile"]["seconds"] else "-",
            ]
            for program in results["programs"]
            for row in program["rows"]
        ],
    )


def ablation_table(results: dict[str, Any]) -> str:
    """Per program: each ablation's test score, against the uncompiled program and against
    BootstrapFewShot's own demos (paired by seed)."""
    rows = []
    for program in results["programs"]:
        for row in program["ablations"]:
            against = row["bootstrap_minus_ablation"]
            rows.append(
                [
                    row["program"],
                    row["ablation"],
                    _range(row["test"]),
                    _interval(row["test"]),
                    row["test"]["verdict"],
                    _interval(against) if against else "-",
                    against["verdict"] if against else "-",
                ]
            )
    return table(
        [
            "program",
            "ablation",
            "test, mean [min, max]",
            "minus uncompiled [95%]",
            "verdict",
            "BootstrapFewShot minus ablation [95%]",
            "verdict",
        ],
        rows,
    )


def leak_table(leak: dict[str, Any]) -> str:
    return table(
        ["train pool", "uncompiled", "compiled, mean [min, max]", "difference [95% interval]", "verdict"],
        [
            [
                pool,
                f"{leak[pool]['baseline']:.1f}",
                _range(leak[pool]),
                _interval(leak[pool]),
                leak[pool]["verdict"],
            ]
            for pool in ("without siblings", "with siblings")
        ]
        + [["with - without", "-", "-", _interval(leak["difference"]), leak["difference"]["verdict"]]],
    )


def report(results: dict[str, Any]) -> str:
    seeds = ", ".join(map(str, results["seeds"]))
    sizes = "; ".join(
        f"{program['program']} " + "/".join(str(n) for n in program["sizes"].values())
        for program in results["programs"]
    )
    text = (
        f"Offline optimization with the learner LM, seeds {seeds}; scores 0-100 on the test split; "
        f"train/dev/test: {sizes}.\n\n{results_table(results)}"
    )
    text += (
        "\n\nAblations (the same seeds; BootstrapFewShot without a teacher is the compile they take "
        f"apart):\n\n{ablation_table(results)}"
    )
    if results.get("leak"):
        leak = results["leak"]
        text += (
            f"\n\nLeak check (reconcile, BootstrapFewShot, pools of {leak['pool']} cases, "
            f"{leak['evaluated']} evaluated cases):\n\n{leak_table(leak)}"
        )
    return text


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (at least 5 for a claim)")
    parser.add_argument("--no-leak-check", action="store_true")
    parser.add_argument("--out", default=str(RESULTS_DIR / "optimize_offline.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "optimize_offline.png"))
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"also write {RECORDED.relative_to(RECORDED.parents[2])} and the docs' tables",
    )
    args = parser.parse_args(argv)
    logging.getLogger("dspy").setLevel(logging.ERROR)
    seeds = list(range(args.seeds))
    programs = args.programs.split(",")
    results: dict[str, Any] = {
        "command": command_line("evals.optimize_offline", argv),
        "seeds": seeds,
        "programs": [measure(name, args.optimizers.split(","), seeds) for name in programs],
        "leak": None if args.no_leak_check or "reconcile" not in programs else leak_check(seeds),
        "machine": machine(),
    }
    text = report(results)
    print(f"\n{text}")
    rows = [row for program in results["programs"] for row in program["rows"]]
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=[f"{row['program']}\n{row['optimizer']}/{row['teacher']}" for row in rows],
        series={
            "uncompiled": [row["test"]["baseline"] for row in rows],
            "compiled (mean over seeds)": [row["test"]["mean"] for row in rows],
        },
        title="Offline optimization with the learner LM: test score, uncompiled and compiled",
        ylabel="test score (0-100)",
        text=text,
    )
    if args.record:
        from evals.doc_tables import record

        record("optimize_offline", results)
    return results


if __name__ == "__main__":
    main()
