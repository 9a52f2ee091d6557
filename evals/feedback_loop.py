"""A simulated deployment that learns from its own feedback, week by week.

    python -m evals.feedback_loop [--seeds 5] [--weeks 6] [--per-week 24] [--compile-after 2,4]

Each week, scripted users each send one message from the reconcile set (evals/data/reconcile.jsonl:
a person says something new next to what the memory already holds). The memory writes it with
the fused write program run by the learner LM (evals/learner.py: it copies demonstrations and
knows no task). The scripted users know what was right (the case's expected operations), look
at what the memory did, and correct its mistakes through the public API, as people would:

- a memory made that should not have been (a duplicate, a wrong change): `feedback(id, "wrong")`;
- a memory that should have been invalidated or updated but still stands: `feedback(id, "outdated")`;
- a memory that should have been forgotten: the user deletes it (`delete`; no example survives);
- a right outcome that made a memory: `feedback(id, "useful")`, half of the time;
- a missing fact (the message kept only as its raw turn) can't be pointed at: counted, not said.

A message "needed a correction" when what the memory did differs from what was right. After the
weeks in --compile-after, `memory.learn_from_feedback()` compiles the write program from all the
feedback so far (BootstrapFewShot, the learner as student, the newest quarter held out) and
installs it if it passes the gate. Two twins get the same messages: `static` never compiles, and
`uncorrected` compiles the same way on the same runs with labels that ignore what the users said
(each run labelled with what it did): the ablation of the mechanism, learning from corrections.
Every run is seeded (which messages, and the optimizer); the report is the correction rate per
week in each, over seeds (mean [min, max]), and for the weeks after the first compile the paired
95% intervals of the differences. Whatever comes out is the result.

Each message has its own run_id under one user ("sim"), so no message sees another's memories
and one user's feedback trains the program (scopes are walls: docs/optimization.md).
Writes evals/results/feedback_loop.json, .md and .png; --record also docs/results/feedback_loop.json
and its table in docs/benchmarks.md (python -m evals.doc_tables).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from dspy_memory.learn.stats import summary
from evals.report import RESULTS_DIR, command_line, machine, save, stage, table

USER = "sim"
USEFUL_SHARE = 0.5


def _setup_lm(case: dict[str, Any]) -> Any:
    """A scripted LM that stores the case's existing memories as they are (the memory's past)."""
    from dspy_memory.testing import scripted_lm

    by_text = {memory["content"]: memory for memory in case["existing_memories"]}

    def responder(call: Any) -> dict[str, Any]:
        turns = call.inputs.get("turns") or []
        ops = []
        for turn in turns:
            memory = by_text.get(turn.get("text"))
            if memory is not None:
                fields = {key: memory.get(key) for key in ("content", "subject", "predicate", "valid_at")}
                ops.append({"action": "ADD", **{key: value for key, value in fields.items() if value}})
        return {"ops": ops}

    return scripted_lm(responder, model="scripted/setup")


def _applied(result: Any) -> Counter[tuple[str, str | None]]:
    """What the write did, as (action, the memory acted on; None for ADD)."""
    acted: Counter[tuple[str, str | None]] = Counter()
    for op in result.ops:
        if op.action == "ADD":
            acted[("ADD", None)] += 1
        elif op.action == "INVALIDATE":
            acted[("INVALIDATE", op.replaced_id)] += 1
        else:
            acted[(op.action, op.memory_id)] += 1
    return acted


def one_message(
    memory: Any, case: dict[str, Any], *, run_id: str, lm: Any, rng: random.Random
) -> dict[str, Any]:
    """Seed the case's past, write its message with `lm`, and give the feedback a user would."""
    import dspy

    scope = {"user_id": USER, "run_id": run_id}
    ids: dict[int, str] = {}
    with dspy.context(lm=_setup_lm(case)):
        for known in case["existing_memories"]:
            made = memory.add(known["content"], at=known.get("valid_at") or case["observed_at"][:10], **scope)
            ids[known["alias"]] = next(op.memory_id for op in made.ops if op.action == "ADD")
    turns = [
        {"role": "user", "name": turn["speaker"], "content": turn["text"], "at": turn["time"]}
        for turn in case["turns"]
    ]
    with dspy.context(lm=lm):
        result = memory.add(turns, **scope)
    right = Counter((op["action"], ids.get(op.get("target"))) for op in case["expected_ops"])
    right = Counter(
        {(action, None if action == "ADD" else target): n for (action, target), n in right.items()}
    )
    done = _applied(result)
    said: Counter[str] = Counter()
    if done == right:
        made = [op.memory_id for op in result.ops if op.action in ("ADD", "UPDATE", "INVALIDATE")]
        if made and rng.random() < USEFUL_SHARE:
            memory.feedback(made[0], "useful", **scope)
            said["useful"] += 1
        return {"correct": True, "said": said}
    wrong_made = [
        op.memory_id
        for op in result.ops
        if op.action in ("ADD", "UPDATE", "INVALIDATE")
        and (
            op.action,
            None if op.action == "ADD" else (op.replaced_id if op.action == "INVALIDATE" else op.memory_id),
        )
        not in right
    ]
    for memory_id in dict.fromkeys(wrong_made):
        memory.feedback(memory_id, "wrong", note="this should not have been stored", **scope)
        said["wrong"] += 1
    for (action, target), _ in (right - done).items():
        if target is None:
            said["missing fact (not said)"] += 1
        elif action in ("INVALIDATE", "UPDATE"):
            current = memory.get(target, recall=False, **scope)
            if current is not None and current.status == "current":
                memory.feedback(target, "outdated", note="this is not true any more", **scope)
                said["outdated"] += 1
        elif action == "DELETE":
            if memory.get(target, recall=False, **scope) is not None:
                memory.delete(target, **scope)
                said["deleted by hand"] += 1
    return {"correct": False, "said": said}


ARMS = {"static": "never", "learning": "from corrections", "uncorrected": "ignoring corrections"}


def _compile(memory: Any, learn: str, *, lm: Any, seed: int, programs: Path) -> Any:
    if learn == "from corrections":
        return memory.learn_from_feedback(lm=lm, seeds=[seed], out=programs, user_id=USER)
    # The ablation: the same compile on the same runs, labels ignoring what the users said.
    from dspy_memory.learn.from_feedback import optimize_from_feedback
    from dspy_memory.types import Scope

    return optimize_from_feedback(
        memory.store,
        memory.store.feedback.list(Scope(user_id=USER), limit=None),
        scope=None,
        lm=lm,
        seeds=[seed],
        out=programs,
        in_use=memory._writer.program_for("fused"),
        corrected=False,
    )


def deployment(
    cases: list[list[dict[str, Any]]], *, seed: int, learn: str, compile_after: set[int], folder: Path
) -> dict[str, Any]:
    """One deployment over the weeks' cases; `learn` (ARMS): whether it compiles from its feedback
    after those weeks, and whether the labels take what users said."""
    from dspy_memory import Memory
    from dspy_memory.errors import InsufficientFeedbackError
    from evals.learner import learner_lm

    lm, rng = learner_lm(), random.Random(seed)
    programs, path = folder / "programs", folder / "memory.db"
    weeks, compiles, said = [], [], Counter()
    for week, week_cases in enumerate(cases, start=1):
        with Memory(
            path, embedder="test", write={"mode": "fused"}, programs=programs if programs.exists() else None
        ) as memory:
            outcomes = [
                one_message(memory, case, run_id=f"w{week}-{index}", lm=lm, rng=rng)
                for index, case in enumerate(week_cases)
            ]
            for outcome in outcomes:
                said.update(outcome["said"])
            weeks.append([0.0 if outcome["correct"] else 1.0 for outcome in outcomes])
            if learn != "never" and week in compile_after:
                try:
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        report = _compile(memory, learn, lm=lm, seed=seed, programs=programs)
                    compiles.append(
                        {
                            "week": week,
                            **report.model_dump(
                                include={"examples", "in_use_score", "compiled_score", "installed", "skipped"}
                            ),
                        }
                    )
                except InsufficientFeedbackError as exc:
                    compiles.append({"week": week, "error": str(exc)})
    messages = [[case["id"] for case in week_cases] for week_cases in cases]
    return {
        "seed": seed,
        "learn": learn,
        "messages": messages,
        "weeks": weeks,
        "compiles": compiles,
        "said": dict(said),
    }


PAIRS = (("learning", "static"), ("uncorrected", "static"), ("learning", "uncorrected"))


def report(results: dict[str, Any]) -> str:
    """The tables as printed (and as docs/benchmarks.md shows them, from the recorded JSON)."""

    def cell(value: dict[str, Any] | None) -> str:
        if value is None:
            return "-"
        low, high = value["interval"]
        return f"{value['difference']:+.1f} [{low:+.1f}, {high:+.1f}] {_verdict(value)}"

    rows = [
        [row["week"]]
        + [f"{sum(row[arm]) / len(row[arm]):.1f} [{min(row[arm]):.1f}, {max(row[arm]):.1f}]" for arm in ARMS]
        + [cell(row["differences"][f"{a} - {b}"]) for a, b in PAIRS]
        for row in results["weeks"]
    ]
    text = (
        f"Messages needing a correction, % per week ({len(results['seeds'])} seeds, {results['per_week']} messages "
        f"a week; the learning and uncorrected deployments compile after weeks {results['compile_after']}; "
        "differences: paired 95% intervals):\n\n"
        + table(
            ["week", *(f"{arm}, mean [min, max]" for arm in ARMS), *(f"{a} - {b}" for a, b in PAIRS)], rows
        )
    )
    runs = results["runs"]
    for arm in ("learning", "uncorrected"):
        installed = Counter(
            (compile["week"], bool(compile.get("installed")))
            for run in runs[arm]
            for compile in run["compiles"]
        )
        text += f"\n\n{arm} compiles: " + ", ".join(
            f"week {w} {'installed' if i else 'not installed'} x{n}"
            for (w, i), n in sorted(installed.items())
        )
    said = sum((Counter(run["said"]) for run in runs["learning"]), Counter())
    return (
        text
        + "\nWhat the learning deployment's users did: "
        + ", ".join(f"{what} {n}" for what, n in said.most_common())
    )


def _verdict(cell: dict[str, Any]) -> str:
    return {"gain": "(more)", "loss": "(fewer)"}.get(cell["verdict"], "(no difference shown)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--weeks", type=int, default=6)
    parser.add_argument("--per-week", type=int, default=24, help="messages (scripted users) per week")
    parser.add_argument("--compile-after", default="2,4", help="weeks after which the learning twin compiles")
    parser.add_argument("--out", default=str(RESULTS_DIR / "feedback_loop.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "feedback_loop.png"))
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write docs/results/feedback_loop.json and its table in the docs",
    )
    args = parser.parse_args(argv)
    from evals.reconcile import load_cases

    pool = load_cases()
    compile_after = {int(week) for week in args.compile_after.split(",") if week}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for seed in range(args.seeds):
        drawn = random.Random(seed).sample(pool, args.weeks * args.per_week)
        cases = [drawn[week * args.per_week : (week + 1) * args.per_week] for week in range(args.weeks)]
        for arm, learn in ARMS.items():
            stage(f"seed {seed}: the {arm} deployment, {args.weeks} weeks of {args.per_week} messages")
            with tempfile.TemporaryDirectory() as tmp:
                runs[arm].append(
                    deployment(cases, seed=seed, learn=learn, compile_after=compile_after, folder=Path(tmp))
                )
    first = min(compile_after) if compile_after else args.weeks
    per_week = []
    for week in range(args.weeks):
        outcomes = {arm: [run["weeks"][week] for run in runs[arm]] for arm in ARMS}
        per_week.append(
            {
                "week": week + 1,
                **{arm: [100 * sum(values) / len(values) for values in outcomes[arm]] for arm in ARMS},
                "differences": {
                    f"{a} - {b}": summary(outcomes[b], outcomes[a]) if week + 1 > first else None
                    for a, b in PAIRS
                },
            }
        )
    results = {
        "command": command_line("evals.feedback_loop", argv),
        "seeds": list(range(args.seeds)),
        "per_week": args.per_week,
        "compile_after": sorted(compile_after),
        "weeks": per_week,
        "runs": runs,
        "machine": machine(),
    }
    text = report(results)
    print(f"\n{text}")
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=[f"week {row['week']}" for row in per_week],
        series={arm: [sum(row[arm]) / len(row[arm]) for row in per_week] for arm in ARMS},
        title="Messages needing a correction per week, static and learning from feedback",
        ylabel="% of messages",
        text=text,
    )
    if args.record:
        from evals.doc_tables import record

        record("feedback_loop", results)
    return results


if __name__ == "__main__":
    # The write path logs every refused operation and raw turn; the table is the report. Only
    # when run as a script: main() called from a test must not silence the library's loggers.
    logging.getLogger("dspy").setLevel(logging.ERROR)
    logging.getLogger("dspy_memory").setLevel(logging.ERROR)
    main()
