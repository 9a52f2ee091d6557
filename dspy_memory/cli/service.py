"""The service commands: `dspy-memory serve`, `mcp` and `keys` (docs/server.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dspy_memory.cli.commands import NOT_FOUND, USAGE, make_cli_lm, open_memory, print_json, scope_of

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def service_memory(args: argparse.Namespace) -> Any:
    """The Memory a service runs on: every setting from --config (TOML) or DSPY_MEMORY_CONFIG and
    DSPY_MEMORY_* variables (retrieval, write, lifecycle, lm, embedder, ...), then the flags."""
    from dspy_memory.config import MemoryConfig
    from dspy_memory.memory import Memory

    overrides: dict[str, Any] = {"path": args.db}
    if args.maintenance_every:
        overrides["maintenance_every"] = args.maintenance_every
    config = MemoryConfig.from_toml(args.config) if args.config else MemoryConfig.from_env()
    return Memory(config, embedder=args.embedder, lm=make_cli_lm(args), **overrides)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from dspy_memory.server.app import create_app

    memory = service_memory(args)
    if memory.keys.count_live() == 0 and args.host not in LOOPBACK and not args.insecure:
        memory.close()
        print(
            f"dspy-memory serve: no API key in {args.db}; a service on {args.host} would let anyone reach every "
            f"user's memories. Create one first (dspy-memory keys create --db {args.db} --user-id USER, or "
            "--admin), or pass --insecure.",
            file=sys.stderr,
        )
        return USAGE
    app = create_app(
        memory=memory, insecure=True, rate_per_second=args.rate, burst=args.burst, close_memory=True
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    finally:
        memory.close()  # if the app never started; closing twice is harmless
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from dspy_memory.server.mcp import run_mcp

    # Nothing may reach stdout before the server: in stdio mode it carries the protocol.
    allow = [name.strip() for name in args.allow.split(",") if name.strip()] if args.allow else None
    run_mcp(
        args.db,
        transport="streamable-http" if args.http else "stdio",
        host=args.host,
        port=args.port,
        allow=allow,
        allow_forget=args.allow_forget,
        allow_feedback=args.allow_feedback,
        embedder=args.embedder,
        lm=make_cli_lm(args),
        **{
            f"{name}_id": value
            for name, value in (("user", args.user), ("agent", args.agent), ("run", args.run))
        },
    )
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from dspy_memory.server.key_record import key_record
    from dspy_memory.types import Scope

    with open_memory(args) as memory:
        keys = memory.keys
        if args.action == "create":
            ids = scope_of(args)
            scope = Scope.of(**ids) if any(ids.values()) else None
            key, token = keys.create(scope, admin=args.admin, name=args.name)
            print_json({"key": token, **key_record(key)}) if args.json else print(token)
            print(f"key {key.id}: shown once, only its hash is stored", file=sys.stderr)
        elif args.action == "revoke":
            if not args.key_id or not keys.revoke(args.key_id):
                print(f"dspy-memory keys revoke: no live key {args.key_id!r}", file=sys.stderr)
                return NOT_FOUND
            print_json({"status": "revoked", "id": args.key_id}) if args.json else print(
                f"revoked {args.key_id}"
            )
        else:
            listed = keys.list()
            if args.json:
                print_json([key_record(key) for key in listed])
            for key in [] if args.json else listed:
                where = (
                    "admin"
                    if key.admin
                    else ", ".join(f"{k}={v}" for k, v in key.scope.model_dump().items() if v)
                )
                state = f"revoked {key.revoked_at}" if key.revoked_at else "live"
                print(f"{key.id}  {where}  {state}  {key.name or ''}")
    return 0
