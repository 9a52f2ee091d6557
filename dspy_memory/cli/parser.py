"""The command line's commands and options (each one documented in docs/cli.md)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from dspy_memory.cli import commands as c
from dspy_memory.cli import service
from dspy_memory.cli.progress import add_quiet_option

DEFAULT_DB = "memory.db"
LM_HELP = (
    "DSPy model string of the LM that writes memories, e.g. ollama_chat/llama3.2 (default: $DSPY_MEMORY_LM)"
)
ID_HELP = "the memory's id, or a unique prefix of at least 8 characters (as search and the agent tools show)"


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
            p.add_argument("--user", "--user-id", dest="user", default=None, help="user_id of the scope")
            p.add_argument("--agent", "--agent-id", dest="agent", default=None, help="agent_id of the scope")
            p.add_argument("--run", "--run-id", dest="run", default=None, help="run_id of the scope")
        return p

    def by_id(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
        p = command(name, help_text, func)
        p.add_argument("memory_id", help=ID_HELP)
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
    demo.set_defaults(func=c.cmd_demo)
    demo.add_argument(
        "--db", dest="db_demo", default=None, help="keep the memory file here (default: temporary)"
    )
    demo.add_argument("--embedder", default=None, help="embedder spec (default: local MiniLM)")
    demo.add_argument("--lm", default=None, help=LM_HELP)

    p = command("add", "remember a text (facts extracted by the LM, if one is set)", c.cmd_add)
    p.add_argument("text", help="what to remember")
    p.add_argument("--at", default=None, help="when it happened (ISO-8601; default now)")
    p.add_argument("--lm", default=None, help=LM_HELP)
    p.add_argument("--raw", action="store_true", help="store the text as a raw turn, without an LM")
    p.add_argument(
        "--expires-in", default=None, help="erase it this long from now, e.g. 24h, 30d (or seconds)"
    )
    p.add_argument("--expires-at", default=None, help="erase it at this time (ISO-8601)")

    p = command("search", "search memories of a scope", c.cmd_search)
    p.add_argument("query", help="what to look for, in words")
    p.add_argument("-k", type=int, default=10, help="how many hits (default 10)")
    p.add_argument("--recipe", default="hybrid", help="hybrid (default), dense, keyword, graph or rerank")
    p.add_argument("--as-of", default=None, help="what was true at this world time (ISO-8601)")
    p.add_argument("--known-at", default=None, help="what the system believed at this time (ISO-8601)")

    by_id("get", "show one memory", c.cmd_get)

    p = command("list", "list memories of a scope, newest first", c.cmd_list)
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--offset", type=int, default=0, help="skip this many first (default 0)")
    p.add_argument("--as-of", default=None, help="the memories true at this world time (ISO-8601)")

    by_id("history", "show how a memory changed", c.cmd_history)

    p = by_id("update", "correct a memory's text (keeps the old version)", c.cmd_update)
    p.add_argument("content", help="the corrected text")
    p.add_argument("--reason", default=None, help="why, kept in the memory's history")

    by_id("delete", "forget one memory for good", c.cmd_delete)

    p = command("timeline", "show how facts about a subject changed", c.cmd_timeline)
    p.add_argument("--subject", default=None, help="entity name, e.g. Ada")
    p.add_argument("--predicate", default=None, help="relation, e.g. lives_in")

    p = command("context", "print prompt-ready memory for a query, within a token budget", c.cmd_context)
    p.add_argument("query", help="what the prompt is about")
    p.add_argument("--budget", type=int, default=1500, help="token budget (default 1500)")
    p.add_argument("--as-of", default=None, help="as things were at this world time (ISO-8601)")

    p = command(
        "reprocess",
        "run the write program again on failed and pending episodes",
        c.cmd_reprocess,
        scoped=False,
    )
    p.add_argument("--lm", default=None, help=LM_HELP)
    p.add_argument("--limit", type=int, default=1000, help="at most this many episodes (default 1000)")
    add_quiet_option(p)

    command("delete-scope", "erase everything stored for a scope (the GDPR path)", c.cmd_delete_scope)

    p = command(
        "maintain",
        "apply the forgetting curve: archive forgotten memories (restorable), consolidate with --lm",
        c.cmd_maintain,
    )
    p.add_argument("--all-scopes", action="store_true", help="maintain every scope in the file")
    p.add_argument(
        "--consolidate",
        action="store_true",
        help="also merge near-duplicate memories with the LM (needs --lm)",
    )
    p.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    p.add_argument("--lm", default=None, help=LM_HELP + "; summarizes with strategy 'summarize'")
    add_quiet_option(p)

    p = command(
        "serve",
        "run the memory service: REST API with API keys (docs/server.md)",
        service.cmd_serve,
        scoped=False,
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--lm", default=None, help=LM_HELP)
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve without API keys on a non-loopback host (requests name their own scope)",
    )
    p.add_argument(
        "--maintenance-every", default=None, help="run maintain() for every scope this often, e.g. 1d"
    )
    p.add_argument(
        "--config",
        default=None,
        help="TOML settings (default: $DSPY_MEMORY_CONFIG, then DSPY_MEMORY_* variables)",
    )
    p.add_argument(
        "--rate", type=float, default=50.0, help="requests a second per API key (default 50; 0: no limit)"
    )
    p.add_argument("--burst", type=int, default=100, help="requests a key may send at once (default 100)")

    p = command("mcp", "serve the agent memory tools over MCP (stdio, or HTTP with --http)", service.cmd_mcp)
    p.add_argument(
        "--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio"
    )
    p.add_argument("--host", default="127.0.0.1", help="--http: interface (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="--http: port (default 8765)")
    p.add_argument("--allow", default=None, help="only these tools, comma-separated (e.g. recall,remember)")
    p.add_argument(
        "--allow-forget", action="store_true", help="also publish forget, which deletes memories for good"
    )
    p.add_argument(
        "--allow-feedback",
        action="store_true",
        help="also publish memory_feedback: the client's verdicts on memories kept as feedback",
    )
    p.add_argument("--lm", default=None, help=LM_HELP)

    p = command("keys", "create, list or revoke API keys of the service", service.cmd_keys)
    p.add_argument("action", choices=["create", "list", "revoke"], help="what to do")
    p.add_argument("key_id", nargs="?", default=None, help="revoke: the key's id (as `keys list` shows)")
    p.add_argument("--admin", action="store_true", help="create: an admin key (any scope, manages keys)")
    p.add_argument("--name", default=None, help="create: a label for the key")

    by_id("restore", "make an archived memory active again", c.cmd_restore)
    p = by_id("pin", "pin a memory so it never decays (--unpin: undo)", c.cmd_pin)
    p.add_argument("--unpin", action="store_true", help="unpin it: it decays like any other")

    p = sub.add_parser(
        "eval",
        help="run an evaluation (from a checkout); options after the name go to it",
        description="Run an evaluation from evals/ (in a checkout of the repository). Everything after "
        "the name is passed on; `dspy-memory eval NAME --help` lists it.",
    )
    p.set_defaults(func=c.cmd_eval)
    p.add_argument("name", choices=sorted(c.EVALS), help="which evaluation: " + ", ".join(sorted(c.EVALS)))
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the evaluation's own options (see NAME --help)")

    p = sub.add_parser(
        "optimize",
        help="compile a memory program with a DSPy optimizer: on its eval set (from a checkout), or the "
        "write program on the file's own feedback (--from-feedback)",
        description="Compile a memory program against its eval set: `dspy-memory optimize reconcile "
        "--optimizer bootstrap --lm MODEL --out programs/reconcile.json` (from a checkout; see --help), "
        "or the write program on the file's feedback: `dspy-memory optimize write --from-feedback --db F "
        "--user U --lm MODEL` (see `optimize write --from-feedback --help`).",
    )
    p.set_defaults(func=c.cmd_optimize)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the optimizer's options (see optimize --help)")
    command("stats", "show what the memory file holds", c.cmd_stats, scoped=False)
    command(
        "check", "check the file against its invariants (exit 1 if one is broken)", c.cmd_check, scoped=False
    )
    from dspy_memory.cli.audit import add_audit_command
    from dspy_memory.cli.exchange import add_exchange_commands
    from dspy_memory.cli.feedback import add_feedback_command
    from dspy_memory.cli.files import add_file_commands
    from dspy_memory.cli.ingest import add_ingest_command
    from dspy_memory.cli.migrate import add_migrate_command
    from dspy_memory.cli.retention import add_retention_command
    from dspy_memory.doctor import add_doctor_command

    add_ingest_command(command)
    add_exchange_commands(command)
    add_audit_command(command)
    add_feedback_command(command)
    add_retention_command(command)
    add_file_commands(sub)
    add_migrate_command(sub)
    add_doctor_command(sub)
    return parser
