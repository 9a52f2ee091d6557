"""The `dspy-memory` command line. Every command and option is documented in docs/cli.md (a
test checks). Exit status: 0 done, 1 not found or a check failed, 2 bad usage or input, 3 the
LM write failed (the input is kept as raw turns), 130 interrupted, 141 output pipe closed."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Sequence

from dspy_memory.cli.parser import build_parser

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_LM_FAILED = 3
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_PIPE_CLOSED = 128 + 13  # SIGPIPE, as shells report it

_DASHED = ("expires_in", "expires_at", "erase_runs_after", "erase_after")
# The API's errors name Python arguments; on the command line the same thing is a flag.
_FLAGS = (
    (re.compile(r"\ball_scopes=True\b"), "--all-scopes"),
    (re.compile(r"\buser_id=(?=[\s,.)/]|$)"), "--user"),
    (re.compile(r"\bagent_id=(?=[\s,.)/]|$)"), "--agent"),
    (re.compile(r"\brun_id=(?=[\s,.)/]|$)"), "--run"),
    (re.compile(r"\bagent_id=/run_id="), "--agent/--run"),
    (re.compile(r"\bsubject=, predicate="), "--subject, --predicate"),
    (re.compile(r"\bembedder=(['\"])(.*?)\1"), r"--embedder \2"),
    (re.compile(r"\bembedder= out\b"), "--embedder out"),
    (re.compile(r"\bas_of="), "--as-of "),
    (re.compile(r"\bknown_at="), "--known-at "),
    # add's expiry and retention's settings: the flag is the argument's name with dashes.
    *((re.compile(rf"\b{name}=(?=[\s,.)/]|$)"), f"--{name.replace('_', '-')}") for name in _DASHED),
    *((re.compile(rf"\b{name}="), f"--{name.replace('_', '-')} ") for name in _DASHED),
)


def as_flags(message: str) -> str:
    """An API error message in the command line's words."""
    for pattern, flag in _FLAGS:
        message = pattern.sub(flag, message)
    return message


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from dspy_memory.cli.commands import cli_actor
    from dspy_memory.errors import DSPyMemoryError
    from dspy_memory.governance.audit import acting_as

    try:
        with acting_as(cli_actor()):  # who the audit log names for what the command changes
            return args.func(args)
    except KeyboardInterrupt:
        print(f"\ndspy-memory {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`dspy-memory list | head`): stop quietly. Python would print a
        # second BrokenPipeError when it flushes stdout at exit, so point stdout at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    except (DSPyMemoryError, ValueError, TypeError, OSError) as exc:
        print(f"dspy-memory {args.command}: {as_flags(str(exc))}", file=sys.stderr)
        return EXIT_USAGE


__all__ = ["build_parser", "main"]
