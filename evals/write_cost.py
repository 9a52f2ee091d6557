"""What the write path costs per message: LM calls and tokens, fused vs two-step.

Runs the shipped demo conversation (4 sessions, 19 messages) through `Memory.add` in each write
mode with a scripted LM that knows the right facts (`dspy_memory.testing.oracle_write_lm`).
The prompts are the real prompts and tokens are counted on them with cl100k_base, so prompt
tokens are what a real LM would be sent; completion tokens are those of the scripted answers
(a real model's answers are of similar length, without reasoning).

    python -m evals.write_cost [--embedder test|local] [--out F.json] [--plot F.png]

With --lm MODEL the same run uses a real LM instead (calls and tokens as that LM reports them).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.report import RESULTS_DIR, bar_chart, machine, table, write_json

MODES = ("fused", "two_step")


def run_mode(mode: str, *, embedder: Any, lm: Any, path: str) -> dict[str, Any]:
    from dspy_memory import Memory
    from dspy_memory.demo import demo_sessions

    user, sessions = demo_sessions()
    rows = []
    with Memory(path, embedder=embedder, lm=lm, write={"mode": mode}) as memory:
        for session in sessions:
            start = time.perf_counter()
            result = memory.add(session["messages"], user_id=user, at=session["at"])
            rows.append(
                {
                    "session": session["at"][:10],
                    "messages": len(result.episodes),
                    "ops": [op.action for op in result.ops],
                    "rejected": len(result.rejected),
                    "error": result.error,
                    "lm_calls": result.usage.lm_calls,
                    "prompt_tokens": result.usage.prompt_tokens,
                    "completion_tokens": result.usage.completion_tokens,
                    "seconds": time.perf_counter() - start,
                }
            )
        changed = [m.content for m in memory.timeline(subject="Ada", user_id=user) if m.superseded_by]
    messages = sum(row["messages"] for row in rows)
    totals = {
        key: sum(row[key] for row in rows) for key in ("lm_calls", "prompt_tokens", "completion_tokens")
    }
    return {
        "mode": mode,
        "sessions": rows,
        "messages": messages,
        "totals": totals,
        "per_message": {key: value / messages for key, value in totals.items()},
        "per_session": {key: value / len(rows) for key, value in totals.items()},
        "invalidated": changed,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embedder", default="test", help="embedder spec (default: test; candidates by words)"
    )
    parser.add_argument(
        "--lm", default=None, help="a real LM (DSPy model string) instead of the scripted one"
    )
    parser.add_argument("--out", default=str(RESULTS_DIR / "write_cost.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "write_cost.png"))
    args = parser.parse_args(argv)

    from dspy_memory.demo import demo_facts
    from dspy_memory.testing import oracle_write_lm
    from dspy_memory.tokens import tokenizer_name

    results = {
        "machine": machine(),
        "tokenizer": tokenizer_name(),
        "lm": args.lm or "scripted oracle",
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            lm = args.lm or oracle_write_lm(demo_facts())
            results["modes"][mode] = run_mode(
                mode, embedder=args.embedder, lm=lm, path=str(Path(tmp) / f"{mode}.db")
            )

    print(f"Write cost on the demo conversation (LM: {results['lm']}, tokens: {results['tokenizer']})\n")
    rows = []
    for mode, result in results["modes"].items():
        for row in result["sessions"]:
            rows.append(
                [
                    mode,
                    row["session"],
                    row["messages"],
                    len(row["ops"]),
                    row["lm_calls"],
                    row["prompt_tokens"],
                    row["completion_tokens"],
                ]
            )
    print(
        table(["mode", "session", "messages", "ops", "LM calls", "prompt tokens", "completion tokens"], rows)
    )
    print()
    summary = [
        [
            mode,
            r["messages"],
            r["totals"]["lm_calls"],
            f"{r['per_session']['lm_calls']:.2f}",
            f"{r['per_message']['prompt_tokens']:.0f}",
            f"{r['per_message']['completion_tokens']:.0f}",
            len(r["invalidated"]),
        ]
        for mode, r in results["modes"].items()
    ]
    print(
        table(
            [
                "mode",
                "messages",
                "LM calls",
                "calls/session",
                "prompt tok/message",
                "completion tok/message",
                "facts invalidated",
            ],
            summary,
        )
    )
    write_json(args.out, results)
    bar_chart(
        args.plot,
        [mode for mode in results["modes"]],
        {
            "prompt tokens / message": [r["per_message"]["prompt_tokens"] for r in results["modes"].values()],
            "completion tokens / message": [
                r["per_message"]["completion_tokens"] for r in results["modes"].values()
            ],
        },
        title="Write path cost per message (demo conversation)",
        ylabel="tokens",
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return results


if __name__ == "__main__":
    main()
