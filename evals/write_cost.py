"""What the write path costs: prompt tokens for a fixed input, and LM calls and tokens per message,
for the fused, two-step and compact write programs.

First the prompt each program sends for one fixed input, 3 turns and 5 existing memories (from
the demo conversation), rendered as the write path renders it and counted as its prompt budget
counts it: with DSPy's chat format (cloud LMs) and with the JSON format local Ollama models are
called with. Then it runs the shipped demo conversation (4 sessions, 19 messages) through `Memory.add` in each write
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

MODES = ("fused", "two_step", "compact")
# The LM a fixed-case prompt is rendered for, by adapter: any cloud LM gets the chat format; a
# local Ollama model the JSON format (see dspy_memory/util/lm.py adapter_for). Nothing is called.
ADAPTER_LMS = {"chat": "openai/any-model", "ollama_json": "ollama_chat/llama3.2"}


def fixed_case() -> dict[str, Any]:
    """The write programs' inputs for 3 turns (the start of the demo's second session) and the 5
    memories the demo's first session leaves (as write_inputs builds them), plus the facts the
    turns hold (what two-step's second call reads)."""
    from dspy_memory.demo import load_demo_conversation
    from dspy_memory.programs.write import write_inputs
    from dspy_memory.types import Episode, MemoryRecord, Scope
    from dspy_memory.util.text import content_hash
    from dspy_memory.util.timeutil import to_datetime

    first, second = load_demo_conversation()["sessions"][:2]
    known = [fact for message in first["messages"] for fact in message.get("facts", [])][:5]
    memories = {
        alias: MemoryRecord(
            id=f"memory-{alias}",
            content=fact["content"],
            content_hash=content_hash(fact["content"]),
            created_at=first["at"],
            subject=fact.get("subject"),
            predicate=fact.get("predicate"),
            valid_at=fact.get("valid_at"),
        )
        for alias, fact in enumerate(known, start=1)
    }
    said = to_datetime(second["at"])
    messages = second["messages"][:3]
    episodes = [
        Episode(
            id=f"episode-{index}",
            source="message",
            role=message["role"],
            name=message.get("name"),
            content=message["content"],
            occurred_at=said,
            ingested_at=said,
        )
        for index, message in enumerate(messages)
    ]
    inputs = write_inputs(episodes, memories, scope=Scope.of("ada"), observed_at=said)
    return {"inputs": inputs, "facts": [fact for message in messages for fact in message.get("facts", [])]}


def fixed_case_prompts() -> dict[str, dict[str, Any]]:
    """Prompt tokens each program sends for `fixed_case()`, per adapter: {mode: {"calls": n,
    adapter: tokens}} (two-step: both calls, the second with the facts the first finds)."""
    from dspy_memory.ops import Fact
    from dspy_memory.util.compiled import make_write_program
    from dspy_memory.util.lm import make_lm, prompt_tokens

    case = fixed_case()
    inputs = case["inputs"]
    reconcile_inputs = {
        "new_facts": [Fact(**fact) for fact in case["facts"]],
        "existing_memories": inputs["existing_memories"],
        "observed_at": inputs["observed_at"],
    }
    sizes: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        program = make_write_program(mode)
        sizes[mode] = {"calls": 2 if mode == "two_step" else 1}
        for adapter, model in ADAPTER_LMS.items():
            lm = make_lm(model)
            tokens = prompt_tokens(program, inputs, lm)
            if mode == "two_step":
                tokens += prompt_tokens(program.reconciler, reconcile_inputs, lm)
            sizes[mode][adapter] = tokens
    return sizes


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
    from dspy_memory.util.tokens import tokenizer_name

    results = {
        "machine": machine(),
        "tokenizer": tokenizer_name(),
        "lm": args.lm or "scripted oracle",
        "fixed_case": fixed_case_prompts(),
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            lm = args.lm or oracle_write_lm(demo_facts())
            results["modes"][mode] = run_mode(
                mode, embedder=args.embedder, lm=lm, path=str(Path(tmp) / f"{mode}.db")
            )

    print(f"Prompt tokens for 3 turns + 5 memories (tokens: {results['tokenizer']})\n")
    print(
        table(
            ["mode", "LM calls", "prompt tokens (chat format)", "prompt tokens (Ollama JSON format)"],
            [
                [mode, size["calls"], size["chat"], size["ollama_json"]]
                for mode, size in results["fixed_case"].items()
            ],
        )
    )
    print(f"\nWrite cost on the demo conversation (LM: {results['lm']}, tokens: {results['tokenizer']})\n")
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
