"""`dspy-memory migrate --from SRC --to DST`: copy a whole store to another backend and show
how each table compares (store/transfer.py; docs/cli.md), with a progress bar of rows on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dspy_memory.cli.commands import NOT_FOUND, print_json
from dspy_memory.cli.progress import add_quiet_option, progress_bar


def add_migrate_command(sub: Any) -> None:
    p = sub.add_parser(
        "migrate",
        help="copy a whole store between SQLite and PostgreSQL, verified table by table",
        description="Copy every row of a store (a SQLite file or a postgresql:// URL) into an empty one, "
        "verify row counts and checksums per table, and print them. Run it again to finish an "
        "interrupted copy.",
    )
    p.set_defaults(func=cmd_migrate)
    p.add_argument(
        "--from", dest="source", required=True, help="the store to copy: a file or a postgresql:// URL"
    )
    p.add_argument(
        "--to",
        dest="destination",
        required=True,
        help="where to copy it: a new file or an empty PostgreSQL schema",
    )
    p.add_argument(
        "--batch-size", type=int, default=1000, help="rows per destination transaction (default 1000)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet_option(p)


def cmd_migrate(args: argparse.Namespace) -> int:
    from dspy_memory.store.transfer import MigrationError, migrate_store

    try:
        with progress_bar(args, "migrate") as bar:
            lines = None if bar is None else above_the_bar
            report = migrate_store(
                args.source, args.destination, batch_size=args.batch_size, progress=lines, on_progress=bar
            )
    except MigrationError as exc:
        if exc.report is None:
            raise
        show(exc.report, as_json=args.json)
        print(f"dspy-memory migrate: {exc}", file=sys.stderr)
        return NOT_FOUND
    show(report, as_json=args.json)
    return 0


def above_the_bar(line: str) -> None:
    """A table's line, printed where the bar was and the bar drawn again below it (a plain
    print would leave the bar's half-drawn line in the middle of stderr)."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def show(report: Any, *, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    print(f"{'table':<20}{'source':>10}{'destination':>13}{'copied':>10}  checksum")
    for check in report.checks:
        if check.source_checksum is None:
            verdict = "rows only" if check.ok else "ROWS DIFFER"
        else:
            verdict = f"{check.source_checksum[:12]} {'ok' if check.ok else 'DIFFERS'}"
        print(
            f"{check.table:<20}{check.source_rows:>10}{check.destination_rows:>13}{check.copied:>10}  {verdict}"
        )
    done = "every table matches" if report.ok else f"differs: {', '.join(report.mismatched)}"
    resumed = " (an interrupted copy, finished)" if report.resumed else ""
    print(f"{report.copied} rows copied from {report.source} to {report.destination}{resumed}; {done}")
