"""`dspy-memory ingest FILE`: store a file of existing conversations (docs/ingest.md), with a
progress bar on stderr; Ctrl-C stops it (exit 130) and the same command goes on later."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dspy_memory.cli import EXIT_INTERRUPTED
from dspy_memory.cli.commands import lm_failed, make_cli_lm, open_memory, print_json, scope_of
from dspy_memory.cli.progress import add_quiet_option, progress_bar
from dspy_memory.util.progress import Progress

SHOWN_REFUSALS = 20  # on stderr; --json lists up to the report's MAX_REFUSALS


def add_ingest_command(command: Any) -> None:
    p = command(
        "ingest",
        "store a file of existing conversations: JSONL, OpenAI message lists, ChatGPT's "
        "conversations.json or LoCoMo (raw turns, or the LM's facts with --lm); run it again to resume",
        cmd_ingest,
    )
    p.add_argument("file", help="the conversation file")
    p.add_argument(
        "--format",
        choices=("auto", "jsonl", "openai", "chatgpt", "locomo"),
        default="auto",
        help="the file's format (default: auto, told from its first record)",
    )
    p.add_argument(
        "--lm",
        default=None,
        help="DSPy model string of the LM that extracts facts, e.g. ollama_chat/llama3.2 "
        "(default: $DSPY_MEMORY_LM; none: raw turns)",
    )
    p.add_argument("--raw", action="store_true", help="store raw turns even when $DSPY_MEMORY_LM is set")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="messages per batch (default: 256 embedded at once raw; write.max_batch per LM call)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="with an LM, conversations written at once (default 1: in file order; 1-64)",
    )
    p.add_argument(
        "--strict", action="store_true", help="stop at the first record that cannot be read (exit 2)"
    )
    add_quiet_option(p)


def cmd_ingest(args: argparse.Namespace) -> int:
    lm = None if args.raw else make_cli_lm(args)
    last: list[Progress] = []
    with open_memory(args, lm=lm) as memory, progress_bar(args, "ingest") as bar:

        def on_progress(progress: Progress) -> None:
            last[:] = [progress]
            if bar is not None:
                bar(progress)

        try:
            report = memory.ingest(
                args.file,
                **scope_of(args),
                format=args.format,
                infer=False if args.raw else None,
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                strict=args.strict,
                on_progress=on_progress,
            )
        except KeyboardInterrupt:
            counts = dict(last[0].counts) if last else {}
            if args.json:
                print_json({"source": args.file, **counts, "interrupted": True})
            done = ", ".join(f"{count} {name}" for name, count in counts.items())
            print(
                f"\ndspy-memory ingest: interrupted ({done or 'nothing read'}); what was stored stays. "
                "Run the same command again to go on.",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        print(
            f"{report.messages} messages in {report.conversations} conversations from {args.file} "
            f"({report.format}, {report.mode}) in {report.seconds:.1f}s: {report.stored} stored, "
            f"{report.already} already there, {report.resumed} resumed, {report.memories} memories"
        )
    for refusal in report.refused[:SHOWN_REFUSALS]:
        print(f"skipped {refusal['where']}: {refusal['reason']}", file=sys.stderr)
    if report.refused_count > SHOWN_REFUSALS:
        more = report.refused_count - SHOWN_REFUSALS
        print(f"... and {more} more records skipped (--json lists them)", file=sys.stderr)
    return lm_failed(args, "; ".join(report.errors)) if report.failed else 0
