"""`dspy-memory export` and `dspy-memory import` (docs/cli.md; the format: docs/governance.md,
"Export and import")."""

from __future__ import annotations

import argparse
from typing import Any

from dspy_memory.cli.commands import open_memory, print_json, scope_of
from dspy_memory.cli.progress import add_quiet_option, progress_bar


def add_exchange_commands(command: Any) -> None:
    """Register the commands with the parser's `command` helper (--db, --embedder, --json and,
    for export, the scope options)."""
    p = command(
        "export",
        "write a scope's memories (every version, episodes, events, blocks, ...) to a JSONL file",
        cmd_export,
    )
    p.add_argument(
        "-o", "--output", required=True, help="the file to write; gzipped when it ends in .gz (ada.jsonl.gz)"
    )
    p.add_argument("--all-scopes", action="store_true", help="export the whole store instead of one scope")
    p.add_argument(
        "--embeddings", action="store_true", help="include the vectors (base64 float32; larger file)"
    )
    add_quiet_option(p)

    p = command(
        "import",
        "import an export file (checked whole first; atomic; importing again changes nothing)",
        cmd_import,
        scoped=False,
    )
    p.add_argument("file", help="the export file (.jsonl or .jsonl.gz)")
    p.add_argument(
        "--reembed",
        choices=("auto", "always", "never"),
        default="auto",
        help="compute vectors with this store's embedder: auto (default: when the file has none or "
        "another embedder's), always, never (refuse when they would be needed)",
    )
    add_quiet_option(p)


def cmd_export(args: argparse.Namespace) -> int:
    scope = {} if args.all_scopes else scope_of(args)
    with open_memory(args) as memory, progress_bar(args, "export") as on_progress:
        report = memory.export(
            args.output,
            include_embeddings=args.embeddings,
            all_scopes=args.all_scopes,
            on_progress=on_progress,
            **scope,
        )
    if args.json:
        print_json(report.to_dict())
        return 0
    records = ", ".join(f"{count} {kind}" for kind, count in report.counts.items()) or "no records"
    print(f"{report.path}: {records} ({report.bytes} bytes; sha256 of the records {report.sha256})")
    if report.expired:
        print(f"left out as expired: {_per_type(report.expired)}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    with open_memory(args) as memory, progress_bar(args, "import") as on_progress:
        report = memory.import_(args.file, reembed=args.reembed, on_progress=on_progress)
    if args.json:
        print_json(report.to_dict())
        return 0
    new = ", ".join(f"{count} {kind}" for kind, count in report.new.items() if count) or "nothing new"
    held = sum(report.present.values())
    vectors = f"; {report.reembedded} vectors computed with {report.embedder}" if report.reembedded else ""
    print(f"imported {new} from {report.path} ({held} records were here already{vectors})")
    if report.expired:
        print(f"left out as expired: {_per_type(report.expired)}")
    return 0


def _per_type(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in counts.items())
