"""`dspy-memory feedback list` and `feedback show` (docs/cli.md; what feedback is:
docs/feedback.md): the labelled examples kept in the file, and for one of them what the write
program saw and did."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dspy_memory.cli.commands import NOT_FOUND, USAGE, open_memory, owner_of, print_json, scope_of
from dspy_memory.types import FEEDBACK_SOURCES, FeedbackRecord, Scope

NOTE_WIDTH = 60


def add_feedback_command(command: Any) -> None:
    p = command(
        "feedback",
        "list the feedback kept in the file (corrections, verdicts, restores, refused operations, "
        "requests to forget), or show one with what the write program saw and did",
        cmd_feedback,
    )
    p.add_argument("action", choices=("list", "show"), help="list, or show one record")
    p.add_argument("feedback_id", nargs="?", default=None, help="show: the record's id (as list prints it)")
    p.add_argument(
        "--source", default=None, choices=FEEDBACK_SOURCES, help="list: only records of this source"
    )
    p.add_argument("--memory", default=None, help="list: only records about this memory id")
    p.add_argument("--limit", type=int, default=20, help="list: records to show, newest first (default 20)")
    p.add_argument(
        "--all-scopes", action="store_true", help="every scope of the file (without it, give the scope)"
    )


def cmd_feedback(args: argparse.Namespace) -> int:
    if (args.action == "show") != (args.feedback_id is not None):
        print("dspy-memory feedback: `show` takes one feedback id, `list` none", file=sys.stderr)
        return USAGE
    with open_memory(args) as memory:
        if args.action == "list":
            records = memory.feedback_records(
                source=args.source, memory_id=args.memory, limit=args.limit, **owner_of(args)
            )
            return _print_list(records, as_json=args.json)
        record = memory.get_feedback(args.feedback_id, **owner_of(args))
        if record is None:
            print(
                f"dspy-memory feedback: no feedback with id {args.feedback_id} in this scope", file=sys.stderr
            )
            return NOT_FOUND
        shown = _what_it_is_about(memory, record, None if args.all_scopes else Scope.of(**scope_of(args)))
    if args.json:
        print_json(shown)
    else:
        _print_shown(shown)
    return 0


def _print_list(records: list[FeedbackRecord], *, as_json: bool) -> int:
    if as_json:
        print_json([record.model_dump(mode="json") for record in records])
        return 0
    for record in records:
        note = (record.note or "").replace("\n", " ")
        note = note if len(note) <= NOTE_WIDTH else note[: NOTE_WIDTH - 1] + "…"
        memory = (record.memory_id or "-")[:8]
        line = (
            f"{record.created_at:%Y-%m-%d %H:%M:%S}  {record.id}  {record.source:<10} "
            f"{record.verdict or '-':<10} {memory:<8}  {note}"
        )
        print(line.rstrip())
    if not records:
        print("no feedback")
    return 0


def _what_it_is_about(memory: Any, record: FeedbackRecord, scope: Scope | None) -> dict[str, Any]:
    """The record, the memory version it judges, and the write run that made it (or that
    proposed the refused op): its episodes, candidates and proposed ops by id, with the text of
    each memory version still in the file (erased ones are gone)."""
    store = memory.store

    def version(memory_id: str | None, number: int | None) -> dict[str, Any] | None:
        if memory_id is None or number is None:
            return None
        found = store.get_memory(memory_id, scope=scope, version=number)
        return {"memory_id": memory_id, "version": number, "content": found.content if found else None}

    shown: dict[str, Any] = {
        "feedback": record.model_dump(mode="json"),
        "memory": version(record.memory_id, record.memory_version),
        "run": None,
    }
    run = store.runs.get(record.write_run_id, scope=scope) if record.write_run_id else None
    if run is not None:
        shown["run"] = {
            "uid": run.uid,
            "mode": run.mode,
            "lm": run.lm,
            "started_at": run.started_at,
            "error": run.error,
            "episode_ids": run.episode_ids,
            "candidates": [
                {"alias": c.alias, **(version(c.memory_id, c.version) or {})} for c in run.candidates
            ],
            "ops": [op._asdict() for op in run.ops],
        }
    return shown


def _print_shown(shown: dict[str, Any]) -> None:
    record, about, run = shown["feedback"], shown["memory"], shown["run"]
    verdict = f" {record['verdict']}" if record["verdict"] else ""
    print(f"{record['id']}  {record['created_at']}  {record['source']}{verdict}  by {record['actor']}")
    if about is not None:
        print(f"  memory {about['memory_id']} v{about['version']}: {_text(about['content'])}")
    if record["note"]:
        print(f"  note: {record['note']}")
    print(f"  expected: {record['expected']}")
    if record["write_run_id"] is None:
        print("  made by no write-program run (by hand, or a raw turn)")
        return
    if run is None:
        print(f"  write run {record['write_run_id']}: not in this scope, or erased")
        return
    op = f", operation {record['op_index']}" if record["op_index"] is not None else ""
    print(f"  write run {run['uid']}{op} ({run['mode']}, {run['lm'] or 'no LM'}, {run['started_at']})")
    print(f"    episodes: {', '.join(run['episode_ids'])}")
    for candidate in run["candidates"]:
        print(
            f"    shown as {candidate['alias']}: {candidate['memory_id']} v{candidate['version']}: {_text(candidate['content'])}"
        )
    for op in run["ops"]:
        proposed = f"{op['action'] or 'not an operation'}" + (
            f" of {op['target']}" if op["target"] is not None else ""
        )
        if op["refused"] and not op["applied"]:
            outcome = f"refused ({op['refused']})"
        elif op["applied"]:
            made = f" {op['memory_id']} v{op['version']}" if op["memory_id"] else ""
            changed = f", refused as proposed ({op['refused']})" if op["refused"] else ""
            outcome = f"applied as {op['applied']}{made}{changed}"
        else:
            outcome = "not applied (the run failed)"
        print(f"    op {op['op_index']}: {proposed}: {outcome}")


def _text(content: str | None) -> str:
    return content if content is not None else "(erased)"
