"""`dspy-memory audit`: read the hash-chained audit log, and `audit verify`: check its chain
(docs/cli.md, docs/governance.md "The audit log")."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dspy_memory.cli.commands import NOT_FOUND, print_json

ENCRYPTION_KEY_ENV = "DSPY_MEMORY_ENCRYPTION_KEY"


def add_audit_command(command: Any) -> None:
    p = command(
        "audit",
        "list the audit log's entries (newest first), or `audit verify`: check its hash chain "
        "(exit 1 naming the first changed, removed or reordered entry)",
        cmd_audit,
    )
    p.add_argument(
        "action", nargs="?", choices=("list", "verify"), default="list", help="list (default) or verify"
    )
    p.add_argument("--operation", default=None, help="only entries of this operation, e.g. erase_scope")
    p.add_argument("--since", default=None, help="only entries at or after this time")
    p.add_argument("--until", default=None, help="only entries at or before this time")
    p.add_argument("--limit", type=int, default=20, help="entries to show (default 20)")


def _open_store(db: str) -> Any:
    from dspy_memory.store.store import Store
    from dspy_memory.util.text import is_postgres_url

    if is_postgres_url(db):
        return Store(db)
    if not os.path.isfile(db):
        raise FileNotFoundError(db)
    key = os.environ.get(ENCRYPTION_KEY_ENV) or None
    return Store(db, encryption_key=key) if key else Store(db)


def cmd_audit(args: argparse.Namespace) -> int:
    from dspy_memory.governance.audit import verify_chain
    from dspy_memory.types import Scope
    from dspy_memory.util.timeutil import to_db

    try:
        store = _open_store(args.db)
    except FileNotFoundError:
        print(f"dspy-memory audit: no memory file at {args.db!r}", file=sys.stderr)
        return NOT_FOUND
    try:
        if args.action == "verify":
            return _show_verification(verify_chain(store.audit_log), as_json=args.json)
        if args.limit < 1:
            print("dspy-memory audit: --limit must be at least 1", file=sys.stderr)
            return 2
        ids = {"user_id": args.user, "agent_id": args.agent, "run_id": args.run}
        scope = Scope(**ids) if any(ids.values()) else None
        entries = store.audit_log.entries(
            scope=scope,
            operation=args.operation,
            since=to_db(args.since),
            until=to_db(args.until),
            limit=args.limit,
        )
    finally:
        store.close()
    if args.json:
        print_json([entry.model_dump(mode="json") for entry in entries])
        return 0
    for entry in entries:
        counts = ", ".join(f"{name} {count}" for name, count in entry.counts.items() if count)
        who = entry.actor or "-"
        request = f" request {entry.request_id}" if entry.request_id else ""
        print(
            f"{entry.id:>6}  {entry.at:%Y-%m-%d %H:%M:%S}  {entry.operation:<16} {who} ({entry.role}){request}"
            f"  pid {entry.pid}@{entry.host}  {counts}"
        )
    if not entries:
        print("no entries")
    return 0


def _show_verification(report: Any, *, as_json: bool) -> int:
    if as_json:
        print_json(report.model_dump(mode="json") | {"ok": report.ok})
    elif report.ok:
        head = f"; head: entry {report.head_id} {report.head_hash}" if report.head_id else ""
        print(f"ok: {report.entries} entries, the chain holds{head}")
    else:
        for problem in report.problems:
            print(f"entry {problem.id}: {problem.kind}: {problem.detail}")
        first = report.problems[0]
        print(f"the audit log does not verify: entry {first.id} was {first.kind}", file=sys.stderr)
    return 0 if report.ok else 1
