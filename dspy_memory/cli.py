"""The `dspy-memory` command line. Every subcommand is documented in docs/cli.md (a test checks)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from dspy_memory.text import day

DEFAULT_DB = "memory.db"


def _lm(args: argparse.Namespace) -> Any:
    """The LM named by --lm or DSPY_MEMORY_LM (with DSPY_MEMORY_LM_API_BASE and, for Ollama,
    DSPY_MEMORY_LM_NUM_CTX), or None."""
    from dspy_memory.config import MemoryConfig
    from dspy_memory.lm import make_lm

    model = getattr(args, "lm", None) or os.environ.get("DSPY_MEMORY_LM")
    if not model:
        return None
    config = MemoryConfig.from_env()
    return make_lm(model, config.lm_api_base, num_ctx=config.lm_num_ctx)


def _memory(args: argparse.Namespace) -> Any:
    from dspy_memory.memory import Memory

    return Memory(args.db, embedder=args.embedder, lm=_lm(args))


def _scope(args: argparse.Namespace) -> dict[str, str | None]:
    return {"user_id": args.user, "agent_id": args.agent, "run_id": args.run}


def _owner(args: argparse.Namespace) -> dict[str, Any]:
    """The scope of a by-id command: --user/--agent/--run, or --all-scopes (docs/scopes.md)."""
    return {**_scope(args), "all_scopes": args.all_scopes}


def _print(value: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(value, indent=2, default=str, ensure_ascii=False))
    else:
        print(value)


def cmd_demo(args: argparse.Namespace) -> int:
    from dspy_memory.demo import run_demo

    run_demo(args.db_demo, embedder=args.embedder, lm=_lm(args))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        result = memory.add(args.text, **_scope(args), at=args.at, infer=False if args.raw else None)
        if args.json:
            _print(result.model_dump(mode="json"), True)
            return 0
        for op in result.ops:
            print(f"{op.action:<10} {op.memory_id}  {op.content or ''}")
        if not result.ops:
            for record in result.memories:
                print(f"{record.id}  {record.content}")
        for rejected in result.rejected:
            print(f"refused    #{rejected.index} {rejected.action}: {rejected.reason}", file=sys.stderr)
        if result.error:
            print(f"write program failed (kept as raw turns): {result.error}", file=sys.stderr)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        hits = memory.search(
            args.query, **_scope(args), k=args.k, recipe=args.recipe, as_of=args.as_of, known_at=args.known_at
        )
        if args.json:
            _print([hit.model_dump(mode="json") for hit in hits], True)
        for hit in [] if args.json else hits:
            valid = day(hit.memory.valid_at, "-")
            print(f"{hit.score:.3f}  {valid}  [{hit.memory.status}]  {hit.id}  {hit.content}")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        record = memory.get(args.memory_id, **_owner(args))
        if record is None:
            print(f"no memory with id {args.memory_id}", file=sys.stderr)
            return 1
        _print(
            record.model_dump(mode="json")
            if args.json
            else f"v{record.version} [{record.status}] {record.content}",
            args.json,
        )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        records = memory.get_all(**_scope(args), limit=args.limit, offset=args.offset, as_of=args.as_of)
        if args.json:
            _print([record.model_dump(mode="json") for record in records], True)
        for record in [] if args.json else records:
            valid = day(record.valid_at, "-")
            print(f"{valid}  {record.id}  {record.content}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        events = memory.history(args.memory_id, **_owner(args))
        if not events:
            print(f"no history for id {args.memory_id} in this scope", file=sys.stderr)
            return 1
        if args.json:
            _print([event.model_dump(mode="json") for event in events], True)
        for event in [] if args.json else events:
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
    with _memory(args) as memory:
        record = memory.update(args.memory_id, args.content, reason=args.reason, **_owner(args))
        _print(
            record.model_dump(mode="json") if args.json else f"v{record.version} {record.content}", args.json
        )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        result = memory.delete(args.memory_id, **_owner(args))
        _print(result.counts, args.json)
    return 0


def cmd_delete_scope(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        result = memory.delete_scope(**_scope(args))
        _print(result.counts, args.json)
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        records = memory.timeline(subject=args.subject, predicate=args.predicate, **_scope(args))
        if args.json:
            _print([record.model_dump(mode="json") for record in records], True)
        for record in [] if args.json else records:
            valid = day(record.valid_at, "-")
            until = day(record.invalid_at, "")
            print(f"{valid} .. {until:<10}  [{record.status}]  {record.content}")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        context = memory.context(args.query, **_scope(args), budget_tokens=args.budget, as_of=args.as_of)
    if args.json:
        _print(context.model_dump(mode="json"), True)
    else:
        print(context.text)
        print(
            f"\n({context.tokens}/{context.budget_tokens} tokens, {context.tokenizer}; "
            f"{len(context.included)} items in, {len(context.dropped)} left out)",
            file=sys.stderr,
        )
    return 0


def cmd_reprocess(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        results = memory.reprocess()
    if args.json:
        _print([result.model_dump(mode="json") for result in results], True)
    else:
        failed = sum(1 for result in results if result.error)
        episodes = sum(len(result.episodes) for result in results)
        print(f"reprocessed {episodes} episodes in {len(results)} batches; {failed} batches failed again")
    return 0


EVALS = {
    "chaos": "evals.chaos",
    "extraction": "evals.extraction",
    "longmemeval": "evals.longmemeval",
    "qa": "evals.qa",
    "retrieval": "evals.locomo_retrieval",
    "temporal": "evals.temporal",
    "reconcile": "evals.reconcile",
    "write-cost": "evals.write_cost",
}


def _run_eval_module(module_name: str, argv: list[str]) -> int:
    import importlib
    from pathlib import Path

    # The evals sit next to the package in a checkout (found from an editable install) or in
    # the current directory; console scripts put neither on sys.path.
    for root in (Path.cwd(), Path(__file__).resolve().parents[1]):
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
    module.main(argv)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    return _run_eval_module(EVALS[args.name], args.rest)


def cmd_optimize(args: argparse.Namespace) -> int:
    return _run_eval_module("evals.optimize", args.rest)


def cmd_check(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        report = memory.check()
    _print({"ok": report.ok, **report.model_dump()}, True)
    return 0 if report.ok else 1


def cmd_stats(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        _print(memory.stats(), True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dspy-memory", description="Long-term, time-aware memory for DSPy agents in one SQLite file."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, func: Any, *, scoped: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        p.add_argument(
            "--db",
            default=os.environ.get("DSPY_MEMORY_PATH", DEFAULT_DB),
            help="memory file (default: $DSPY_MEMORY_PATH or memory.db)",
        )
        p.add_argument(
            "--embedder",
            default=None,
            help="embedder spec, e.g. local, ollama:nomic-embed-text (default: the file's own)",
        )
        p.add_argument("--json", action="store_true", help="print JSON")
        if scoped:
            p.add_argument("--user", default=None, help="user_id of the scope")
            p.add_argument("--agent", default=None, help="agent_id of the scope")
            p.add_argument("--run", default=None, help="run_id of the scope")
        return p

    def by_id(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
        p = command(name, help_text, func)
        p.add_argument("memory_id")
        p.add_argument(
            "--all-scopes",
            action="store_true",
            help="reach the memory in any scope (without it, give the scope that owns it)",
        )
        return p

    demo = sub.add_parser(
        "demo",
        help="tour memory on a shipped conversation (raw mode offline; the LM path with --lm)",
        description="Tour memory on a shipped conversation: raw mode offline, or the LM write path "
        "when --lm or DSPY_MEMORY_LM names a model.",
    )
    demo.set_defaults(func=cmd_demo)
    demo.add_argument(
        "--db", dest="db_demo", default=None, help="keep the memory file here (default: temporary)"
    )
    demo.add_argument("--embedder", default=None, help="embedder spec (default: local MiniLM)")
    lm_help = "DSPy model string of the LM that writes memories (default: $DSPY_MEMORY_LM)"
    demo.add_argument("--lm", default=None, help=lm_help)

    p = command("add", "remember a text (facts extracted by the LM, if one is set)", cmd_add)
    p.add_argument("text")
    p.add_argument("--at", default=None, help="when it happened (ISO-8601; default now)")
    p.add_argument("--lm", default=None, help=lm_help)
    p.add_argument("--raw", action="store_true", help="store the text as a raw turn, without an LM")

    p = command("search", "search memories of a scope", cmd_search)
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--recipe", default="hybrid", help="hybrid, dense or keyword")
    p.add_argument("--as-of", default=None, help="what was true at this world time")
    p.add_argument("--known-at", default=None, help="what the system believed at this time")

    by_id("get", "show one memory", cmd_get)

    p = command("list", "list memories of a scope, newest first", cmd_list)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--as-of", default=None)

    by_id("history", "show how a memory changed", cmd_history)

    p = by_id("update", "correct a memory's text (keeps the old version)", cmd_update)
    p.add_argument("content")
    p.add_argument("--reason", default=None)

    by_id("delete", "forget one memory for good", cmd_delete)

    p = command("timeline", "show how facts about a subject changed", cmd_timeline)
    p.add_argument("--subject", default=None, help="entity name, e.g. Ada")
    p.add_argument("--predicate", default=None, help="relation, e.g. lives_in")

    p = command("context", "print prompt-ready memory for a query, within a token budget", cmd_context)
    p.add_argument("query")
    p.add_argument("--budget", type=int, default=1500, help="token budget (default 1500)")
    p.add_argument("--as-of", default=None, help="as things were at this world time")

    p = command(
        "reprocess", "run the write program again on failed and pending episodes", cmd_reprocess, scoped=False
    )
    p.add_argument("--lm", default=None, help=lm_help)

    command("delete-scope", "erase everything stored for a scope (the GDPR path)", cmd_delete_scope)

    p = sub.add_parser(
        "eval",
        help="run an evaluation (from a checkout); options after the name go to it",
        description="Run an evaluation from evals/ (in a checkout of the repository). Everything after "
        "the name is passed on; `dspy-memory eval NAME --help` lists it.",
    )
    p.set_defaults(func=cmd_eval)
    p.add_argument("name", choices=sorted(EVALS))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser(
        "optimize",
        help="compile a memory program with a DSPy optimizer (from a checkout)",
        description="Compile a memory program against its eval set: `dspy-memory optimize reconcile "
        "--optimizer bootstrap --lm MODEL --out programs/reconcile.json` (see --help).",
    )
    p.set_defaults(func=cmd_optimize)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    command("stats", "show what the memory file holds", cmd_stats, scoped=False)
    command(
        "check", "check the file against its invariants (exit 1 if one is broken)", cmd_check, scoped=False
    )
    from dspy_memory.doctor import add_doctor_command

    add_doctor_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from dspy_memory.errors import DSPyMemoryError

    try:
        return args.func(args)
    except (DSPyMemoryError, ValueError, TypeError, FileNotFoundError) as exc:
        print(f"dspy-memory {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
