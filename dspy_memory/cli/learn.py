"""`dspy-memory optimize write --from-feedback` (docs/cli.md, docs/optimization.md): compile the
write program on the file's own feedback, check it on the newest, install it only if it does not
regress. Unlike the other `optimize` runs it needs no checkout: the examples are in the file.
Exit status: 0 installed, 1 not installed (the gate), 2 bad usage or too little feedback."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from dspy_memory.cli.commands import cli_lm, make_cli_lm, open_memory, print_json, scope_of
from dspy_memory.learn.from_feedback import WRITE_PROGRAMS
from dspy_memory.learn.optimizers import OPTIMIZERS
from dspy_memory.learn.stats import describe

PROG = "dspy-memory optimize"


def feedback_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Compile the write program on the file's feedback (the older part), check it on "
        "the newest part next to the program in use, over seeds, and install it where "
        "Memory(programs=OUT) loads it only if it does not score lower there.",
    )
    p.add_argument("program", choices=sorted(WRITE_PROGRAMS), help="write (fused) or write_compact")
    p.add_argument(
        "--from-feedback", action="store_true", required=True, help="learn from the file's feedback"
    )
    p.add_argument("--db", default=os.environ.get("DSPY_MEMORY_PATH", "memory.db"), help="memory file")
    p.add_argument("--embedder", default=None, help="embedder spec (default: the file's own)")
    p.add_argument("--user", "--user-id", dest="user", default=None, help="user_id of the scope")
    p.add_argument("--agent", "--agent-id", dest="agent", default=None, help="agent_id of the scope")
    p.add_argument("--run", "--run-id", dest="run", default=None, help="run_id of the scope")
    p.add_argument("--all-scopes", action="store_true", help="the feedback of every scope of the file")
    p.add_argument("--lm", default=None, help="the model the program runs on (default: $DSPY_MEMORY_LM)")
    p.add_argument(
        "--teacher-lm", default=None, help="a stronger model: bootstraps demos, proposes instructions"
    )
    p.add_argument("--reflection-lm", default=None, help="GEPA's reflection model (default: the teacher)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap")
    p.add_argument("--seeds", type=int, default=5, help="compiles, each with its own seed (default 5)")
    p.add_argument(
        "--held-out", type=float, default=0.25, help="share of the newest feedback to check on (default 0.25)"
    )
    p.add_argument("--out", default="programs", help="where to install it (default programs/)")
    p.add_argument("--force", action="store_true", help="install it even if it scores lower")
    p.add_argument(
        "--share-across-users",
        action="store_true",
        help="in a file with several users: accept that its demos quote one user's words in every user's writes",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def run_from_feedback(argv: list[str]) -> int:
    args = feedback_parser().parse_args(argv)
    lm = make_cli_lm(args)
    if lm is None:
        print(f"{PROG}: give the model the program runs on: --lm MODEL or $DSPY_MEMORY_LM", file=sys.stderr)
        return 2
    teacher = cli_lm(args.teacher_lm) if args.teacher_lm else None
    reflection = cli_lm(args.reflection_lm) if args.reflection_lm else None
    # The optimizers print their progress: stderr, so stdout holds the report (and --json parses).
    with (
        open_memory(args, programs=args.out if os.path.isdir(args.out) else None) as memory,
        contextlib.redirect_stdout(sys.stderr),
    ):
        report = memory.learn_from_feedback(
            lm=lm,
            teacher_lm=teacher,
            reflection_lm=reflection,
            optimizer=args.optimizer,
            program=args.program,
            seeds=args.seeds,
            held_out=args.held_out,
            out=args.out,
            force=args.force,
            share_across_users=args.share_across_users,
            all_scopes=args.all_scopes,
            **scope_of(args),
        )
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        examples = report.examples
        print(
            f"{report.records} feedback records, {sum(examples.values())} examples: {examples['train']} to "
            f"train on, {examples['dev']} to select on, {examples['held_out']} held out (the newest)"
        )
        for why, count in report.skipped.items():
            print(f"  {count} without an example: {why}")
        print(describe(report.summary, baseline="in use"))
        print(
            f"seed {report.seeds[0]}'s program on the held-out feedback: {report.compiled_score:.1f}; {report.reason}"
        )
        if report.installed:
            print(f"installed {report.path}; Memory(path, programs={args.out!r}) loads it")
    return 0 if report.installed else 1
