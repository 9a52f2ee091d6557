"""What each `dspy-memory` command does: open the file, call the API, print."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from dspy_memory.cli.progress import progress_bar
from dspy_memory.util.text import day

if TYPE_CHECKING:
    from dspy_memory.scopes import OwnerArgs, ScopeArgs

# Exit statuses (documented in dspy_memory/cli/__init__.py and docs/cli.md).
NOT_FOUND, USAGE, LM_FAILED = 1, 2, 3


def lm_model(args: argparse.Namespace) -> str | None:
    return getattr(args, "lm", None) or os.environ.get("DSPY_MEMORY_LM") or None


def make_cli_lm(args: argparse.Namespace) -> Any:
    """The LM named by --lm or DSPY_MEMORY_LM (with DSPY_MEMORY_LM_API_BASE and, for Ollama,
    DSPY_MEMORY_LM_NUM_CTX), or None. An Ollama model is checked now, so an LM that is not
    running fails in seconds with what to run, not on every write."""
    model = lm_model(args)
    return cli_lm(model) if model else None


def cli_lm(model: str) -> Any:
    """`model` built as the command line builds LMs ($DSPY_MEMORY_LM_API_BASE, Ollama's
    $DSPY_MEMORY_LM_NUM_CTX), an Ollama model checked now."""
    from dspy_memory.config import MemoryConfig
    from dspy_memory.util.lm import checked_lm

    config = MemoryConfig.from_env()
    return checked_lm(model, config.lm_api_base, num_ctx=config.lm_num_ctx)


def open_memory(args: argparse.Namespace, *, lm: Any = None, **settings: Any) -> Any:
    from dspy_memory.memory import Memory

    return Memory(args.db, embedder=args.embedder, lm=lm, **settings)


def cli_actor() -> str:
    """Who the audit log names for a command: $DSPY_MEMORY_ACTOR, else the login running it."""
    import getpass

    try:
        login = getpass.getuser()
    except Exception:  # no login name (a container's numeric user): the process id is logged anyway
        login = "unknown"
    return os.environ.get("DSPY_MEMORY_ACTOR") or f"cli:{login}"


def scope_of(args: argparse.Namespace) -> ScopeArgs:
    return {"user_id": args.user, "agent_id": args.agent, "run_id": args.run}


def owner_of(args: argparse.Namespace) -> OwnerArgs:
    """The scope of a by-id command: --user/--agent/--run, or --all-scopes (docs/scopes.md)."""
    return {**scope_of(args), "all_scopes": args.all_scopes}


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def counted(counts: dict[str, int]) -> str:
    """{"memories": 1, "episodes": 0, ...} as "1 memories, ..." (rows that were removed)."""
    return ", ".join(f"{count} {table}" for table, count in counts.items() if count) or "nothing"


def lm_failed(args: argparse.Namespace, error: str | None) -> int:
    """Say that the LM write failed, that the input is safe, and what retries it."""
    again = " again" if args.command == "reprocess" else ""
    print(
        f"dspy-memory {args.command}: the LM write failed{again} ({error}); the input is kept as raw "
        f"turns and stays searchable. Retry with: dspy-memory reprocess --db {args.db} "
        f"--lm {lm_model(args) or 'MODEL'}",
        file=sys.stderr,
    )
    return LM_FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    from dspy_memory.demo import run_demo

    run_demo(args.db_demo, embedder=args.embedder, lm=make_cli_lm(args))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    lm = None if args.raw else make_cli_lm(args)
    with open_memory(args, lm=lm) as memory:
        infer = False if args.raw else None
        expiry = {"expires_in": args.expires_in, "expires_at": args.expires_at}
        result = memory.add(args.text, **scope_of(args), at=args.at, infer=infer, **expiry)
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        for op in result.ops:
            print(f"{op.action:<10} {op.memory_id}  {op.content or ''}")
        if not result.ops:
            for record in result.memories:
                print(f"{record.id}  {record.content}")
        for rejected in result.rejected:
            print(f"refused    #{rejected.index} {rejected.action}: {rejected.reason}", file=sys.stderr)
        expires_at = result.episodes[0].expires_at if result.episodes else None
        if expires_at is not None:
            print(f"expires at {expires_at:%Y-%m-%d %H:%M:%S %Z}: never read after, erased by maintain")
    return lm_failed(args, result.error) if result.error else 0


def cmd_search(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        hits = memory.search(
            args.query,
            **scope_of(args),
            k=args.k,
            recipe=args.recipe,
            as_of=args.as_of,
            known_at=args.known_at,
        )
    if args.json:
        print_json([hit.model_dump(mode="json") for hit in hits])
        return 0
    for hit in hits:
        print(
            f"{hit.score:.3f}  {day(hit.memory.valid_at, '-')}  [{hit.memory.status}]  {hit.id}  {hit.content}"
        )
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        record = memory.get(args.memory_id, **owner_of(args))
    if record is None:
        print(f"dspy-memory get: no memory with id {args.memory_id} in this scope", file=sys.stderr)
        return NOT_FOUND
    if args.json:
        print_json(record.model_dump(mode="json"))
    else:
        print(f"{record.id}  v{record.version} [{record.status}]  {record.content}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        records = memory.get_all(**scope_of(args), limit=args.limit, offset=args.offset, as_of=args.as_of)
    if args.json:
        print_json([record.model_dump(mode="json") for record in records])
        return 0
    for record in records:
        print(f"{day(record.valid_at, '-')}  {record.id}  {record.content}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        events = memory.history(args.memory_id, **owner_of(args))
    if not events:
        print(f"dspy-memory history: no history for id {args.memory_id} in this scope", file=sys.stderr)
        return NOT_FOUND
    if args.json:
        print_json([event.model_dump(mode="json") for event in events])
        return 0
    for event in events:
        change = (
            f"{event.old_content!r} -> {event.new_content!r}"
            if event.old_content
            else repr(event.new_content)
        )
        print(
            f"{event.created_at:%Y-%m-%d %H:%M:%S}  v{event.version}  {event.event:<10} {change}  {event.reason or ''}"
        )
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        record = memory.update(args.memory_id, args.content, reason=args.reason, **owner_of(args))
    if args.json:
        print_json(record.model_dump(mode="json"))
    else:
        print(f"{record.id}  v{record.version}  {record.content}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        result = memory.delete(args.memory_id, **owner_of(args))
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        print(f"deleted {args.memory_id}: {counted(result.counts)} removed")
    return 0


def cmd_delete_scope(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        result = memory.delete_scope(**scope_of(args))
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        print(f"erased the scope: {counted(result.counts)} removed")
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    scope = {"all_scopes": True} if args.all_scopes else scope_of(args)
    with open_memory(args, lm=make_cli_lm(args)) as memory, progress_bar(args, "maintain") as bar:
        report = memory.maintain(consolidate=args.consolidate, dry_run=args.dry_run, on_progress=bar, **scope)
    if args.json:
        print_json(report.model_dump(mode="json"))
        return 0
    would = "would be " if report.dry_run else ""
    print(
        f"maintained {report.scopes} scope(s) in {report.duration_s:.2f}s: {report.examined} memories examined, "
        f"{report.decayed} forgotten ({report.kept} of them kept by settings); {would}archived {report.archived}, "
        f"restored {report.restored}, merged {report.merged} into {report.merges}, "
        f"summarized {report.summarized} into {report.summaries}"
    )
    if any(report.erased.values()):
        print(f"retention {'would erase' if report.dry_run else 'erased'}: {counted(report.erased)}")
    for rejection in report.refused:
        print(f"  refused {rejection.action or '?'}: {rejection.reason}", file=sys.stderr)
    for error in report.errors:
        print(f"  LM error: {error}", file=sys.stderr)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        record = memory.restore(args.memory_id, **owner_of(args))
    print_json(record.model_dump(mode="json")) if args.json else print(
        f"restored {record.id}: {record.content}"
    )
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        record = memory.pin(args.memory_id, not args.unpin, **owner_of(args))
    if args.json:
        print_json(record.model_dump(mode="json"))
    else:
        print(f"{'pinned' if record.pinned else 'unpinned'} {record.id}: {record.content}")
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        records = memory.timeline(subject=args.subject, predicate=args.predicate, **scope_of(args))
        raw_only = not records and memory.stats()["current_memories"] > 0
    if args.json:
        print_json([record.model_dump(mode="json") for record in records])
    for record in [] if args.json else records:
        until = day(record.invalid_at, "")
        print(f"{day(record.valid_at, '-')} .. {until:<10}  [{record.status}]  {record.content}")
    if raw_only:
        print(
            "dspy-memory timeline: nothing about that subject/predicate here. Timelines are made of "
            "facts the LM writes (subject, predicate, object); raw turns stored without an LM have "
            "none: see them with `dspy-memory list`, or add with --lm MODEL.",
            file=sys.stderr,
        )
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        context = memory.context(args.query, **scope_of(args), budget_tokens=args.budget, as_of=args.as_of)
    if args.json:
        print_json(context.model_dump(mode="json"))
        return 0
    print(context.text)
    print(
        f"\n({context.tokens}/{context.budget_tokens} tokens, {context.tokenizer}; "
        f"{len(context.included)} items in, {len(context.dropped)} left out)",
        file=sys.stderr,
    )
    return 0


def cmd_reprocess(args: argparse.Namespace) -> int:
    with open_memory(args, lm=make_cli_lm(args)) as memory, progress_bar(args, "reprocess") as on_progress:
        results = memory.reprocess(limit=args.limit, on_progress=on_progress)
    failed = [result for result in results if result.error]
    if args.json:
        print_json([result.model_dump(mode="json") for result in results])
    else:
        episodes = sum(len(result.episodes) for result in results)
        print(
            f"reprocessed {episodes} episodes in {len(results)} batches; {len(failed)} batches failed again"
        )
    return lm_failed(args, failed[0].error) if failed else 0


def cmd_check(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        report = memory.check()
    if args.json:
        print_json({"ok": report.ok, **report.model_dump()})
    else:
        print("ok: the file keeps every invariant" if report.ok else "BROKEN: see below")
        for field, value in report.model_dump().items():
            print(f"  {field}: {value}")
    return 0 if report.ok else NOT_FOUND


def cmd_stats(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        stats = memory.stats()
    if args.json:
        print_json(stats)
        return 0
    writes = stats.get("writes", {})
    print(f"{stats['path']}  ({stats['driver']}; embedder {stats['embedder']}, {stats['dim']} dimensions)")
    print(
        f"current memories: {stats['current_memories']} ({stats['archived_memories']} archived, "
        f"{stats['pinned_memories']} pinned, {stats['expiring_memories']} expiring, "
        f"{stats['memories_past_expiry']} past expiry)"
    )
    lifecycle = stats["lifecycle"]
    if lifecycle["decaying_memories"]:
        print(
            f"retention of {lifecycle['decaying_memories']} active memories: median {lifecycle['retention_median']}, "
            f"p10 {lifecycle['retention_p10']}; {lifecycle['below_threshold']} below the archive threshold"
        )
    print("rows: " + ", ".join(f"{table} {count}" for table, count in stats["tables"].items()))
    if writes.get("runs"):
        print(
            f"LM writes: {writes['runs']} runs ({writes.get('failed', 0)} failed), {writes['lm_calls']} LM calls, "
            f"{writes['prompt_tokens']} prompt + {writes['completion_tokens']} completion tokens"
        )
    return 0


EVALS = {
    "chaos": "evals.chaos",
    "consolidate": "evals.consolidate",
    "extraction": "evals.extraction",
    "lifecycle": "evals.lifecycle",
    "longmemeval": "evals.longmemeval",
    "qa": "evals.qa",
    "retrieval": "evals.locomo_retrieval",
    "temporal": "evals.temporal",
    "reconcile": "evals.reconcile",
    "write-cost": "evals.write_cost",
}


def run_eval_module(module_name: str, argv: list[str], prog: str) -> int:
    import importlib
    from pathlib import Path

    # The evals sit next to the package in a checkout (found from an editable install) or in
    # the current directory; console scripts put neither on sys.path.
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (root / "evals" / "__init__.py").is_file() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
            break
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "evals":
            print(
                "the evals live in the dspy-memory repository, next to the package: run this from a "
                "checkout (git clone https://github.com/dspy-memory/dspy-memory && cd dspy-memory)",
                file=sys.stderr,
            )
            return 2
        raise
    # argparse names a parser after sys.argv[0]: let its usage line show the command typed.
    program, sys.argv[0] = sys.argv[0], prog
    try:
        module.main(argv)
    finally:
        sys.argv[0] = program
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    return run_eval_module(EVALS[args.name], args.rest, f"dspy-memory eval {args.name}")


def cmd_optimize(args: argparse.Namespace) -> int:
    if "--from-feedback" in args.rest:  # the file's own feedback: no checkout needed
        from dspy_memory.cli.learn import run_from_feedback

        return run_from_feedback(args.rest)
    return run_eval_module("evals.optimize", args.rest, "dspy-memory optimize")
