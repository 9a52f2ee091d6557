"""`dspy-memory retention set` and `retention show` (docs/cli.md; what a policy does:
docs/governance.md#retention): store a scope's retention policy, read the one that applies to a
scope, or list every policy stored in the file."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dspy_memory.cli.commands import USAGE, open_memory, print_json, scope_of

if TYPE_CHECKING:
    from dspy_memory.retention_settings import RetentionSettings
    from dspy_memory.scopes import ScopeArgs

# The flags of `set`, by the RetentionSettings field each one sets.
SETTING_FLAGS = {
    "erase_after": "--erase-after",
    "erase_runs_after": "--erase-runs-after",
    "kinds": "--kinds",
    "pinned": "--pinned",
    "blocks": "--blocks",
}
UNITS = (("d", 86400), ("h", 3600), ("m", 60))


def add_retention_command(command: Any) -> None:
    p = command(
        "retention",
        "set a scope's retention policy (what maintain erases, and when), show the one that "
        "applies to a scope, or list every policy stored in the file",
        cmd_retention,
    )
    p.add_argument(
        "action", choices=("set", "show"), help="set a scope's policy, or show one (no scope: list them all)"
    )
    p.add_argument(
        "--erase-after",
        default=None,
        metavar="INTERVAL",
        help="set: erase memories and their input this long after they were written, e.g. 90d",
    )
    p.add_argument(
        "--erase-runs-after",
        default=None,
        metavar="INTERVAL",
        help="set: the same for what belongs to a run, from the run's last message, e.g. 24h",
    )
    p.add_argument(
        "--kinds", default=None, help="set: erase only these memory kinds, comma-separated, e.g. turn,fact"
    )
    p.add_argument(
        "--pinned",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set: erase pinned memories too (--no-pinned: keep them, the default)",
    )
    p.add_argument(
        "--blocks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set: erase core blocks too, the profile among them (--no-blocks: keep them, the default)",
    )
    p.add_argument(
        "--reset", action="store_true", help="set: forget the scope's stored policy first (alone: remove it)"
    )


def cmd_retention(args: argparse.Namespace) -> int:
    changes = _changes(args)
    scope = scope_of(args)
    if args.action == "show" and (changes or args.reset):
        print(
            "dspy-memory retention: `show` changes nothing; give settings to `retention set`", file=sys.stderr
        )
        return USAGE
    if args.action == "set" and not (changes or args.reset):
        flags = ", ".join(SETTING_FLAGS.values())
        print(f"dspy-memory retention: `set` needs one of {flags}, or --reset", file=sys.stderr)
        return USAGE
    listing = args.action == "show" and not any(scope.values())  # every stored policy
    with open_memory(args) as memory:
        if listing:
            policies = memory.retention_policies()
        else:
            # `show` with a scope reads the policy that applies to it (its own, its user's, its
            # agent's, or the default), so what is printed is what maintain will follow.
            policies = [(scope, memory.retention(**scope, reset=args.reset, **changes))]
    if args.json:
        shown = [{"scope": where, "policy": policy.model_dump(mode="json")} for where, policy in policies]
        print_json(shown if listing else shown[0])
        return 0
    for where, policy in policies:
        print(f"{_scope_text(where)}  {_policy_text(policy)}")
    if not policies:
        print("no retention policy stored (maintain erases only what expires by itself)")
    return 0


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line, as `Memory.retention` takes them."""
    changes: dict[str, Any] = {
        name: getattr(args, name) for name in SETTING_FLAGS if getattr(args, name) is not None
    }
    if "kinds" in changes:
        changes["kinds"] = [kind.strip() for kind in changes["kinds"].split(",") if kind.strip()]
    return changes


def _scope_text(scope: ScopeArgs) -> str:
    ids = (("user", scope.get("user_id")), ("agent", scope.get("agent_id")), ("run", scope.get("run_id")))
    return " ".join(f"{name}={value}" for name, value in ids if value is not None)


def _policy_text(policy: RetentionSettings) -> str:
    kinds = "all" if policy.kinds is None else ",".join(policy.kinds) or "none"
    # What a run keeps is shown as maintain applies it: without erase_runs_after, erase_after.
    return (
        f"erase_after={_interval(policy.limit_for(False))} erase_runs_after={_interval(policy.limit_for(True))} "
        f"kinds={kinds} pinned={'erased' if policy.pinned else 'kept'} "
        f"blocks={'erased' if policy.blocks else 'kept'}"
    )


def _interval(value: timedelta | None) -> str:
    """A duration in the largest unit that states it exactly, as --erase-after takes it."""
    if value is None:
        return "never"
    seconds = value.total_seconds()
    for unit, size in UNITS:
        if seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"
