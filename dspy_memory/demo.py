"""`dspy-memory demo`: a tour of memory on a shipped conversation.

Without an LM (the default) it shows raw mode: offline, no network. With one (DSPY_MEMORY_LM,
or `--lm`), the write program extracts facts, invalidates the ones that changed, and the demo
prints what each session cost and the timeline of every changed fact.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from dspy_memory.errors import WriteProgramError
from dspy_memory.memory import Memory
from dspy_memory.types import Hit
from dspy_memory.util.lm import resolve_lm
from dspy_memory.util.text import day
from dspy_memory.util.timeutil import utcnow

LM_HINT = (
    "To see the LM write path (facts, updates, invalidations, timelines), set an LM, e.g.\n"
    "  DSPY_MEMORY_LM=ollama_chat/llama3.2 dspy-memory demo      (local Ollama)\n"
    "  DSPY_MEMORY_LM=openai/gpt-4o-mini dspy-memory demo        (needs OPENAI_API_KEY)\n"
)


CONTEXT_BUDGET = 400


def load_demo_conversation() -> dict[str, Any]:
    text = resources.files("dspy_memory").joinpath("data/demo_conversation.json").read_text("utf-8")
    return json.loads(text)


def demo_sessions() -> tuple[str, list[dict[str, Any]]]:
    """(user id, sessions) with messages as `add` takes them (the annotated facts removed)."""
    conversation = load_demo_conversation()
    sessions = [
        {
            "at": session["at"],
            "messages": [{k: v for k, v in m.items() if k != "facts"} for m in session["messages"]],
        }
        for session in conversation["sessions"]
    ]
    return conversation["user_id"], sessions


def demo_facts() -> dict[str, list[dict[str, Any]]]:
    """Message text -> the facts a careful reader extracts from it (for scripted demo LMs)."""
    conversation = load_demo_conversation()
    return {m["content"]: m.get("facts", []) for s in conversation["sessions"] for m in s["messages"]}


def _show_hits(hits: list[Hit], out: TextIO, limit: int = 3) -> None:
    if not hits:
        print("   (nothing found)", file=out)
    for hit in hits[:limit]:
        memory = hit.memory
        print(
            f"   {hit.score:.3f}  valid from {day(memory.valid_at, '-')}  [{memory.status}]  {memory.content}",
            file=out,
        )
        for source in hit.provenance:
            who = source.name or source.role or source.source
            print(
                f"          from a {source.source} by {who}, said {source.occurred_at:%Y-%m-%d %H:%M}, "
                f"episode {source.episode_id[:8]}",
                file=out,
            )


def run_demo(
    db: str | None = None, *, embedder: Any = None, lm: Any = None, out: TextIO | None = None
) -> dict[str, Any]:
    """Run the tour and print it; returns a summary (used by the tests). With `lm` (a dspy.LM
    or a model string) the LM write path is shown instead of raw mode."""
    import sys

    out = out or sys.stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = db or str(Path(tmp) / "demo.db")
        if lm is not None:
            return _run_lm_demo(path, embedder=embedder, lm=lm, out=out, kept=db is not None)
        print(LM_HINT, file=out)
        return _run_raw_demo(path, embedder=embedder, out=out)


def _run_lm_demo(path: str, *, embedder: Any, lm: Any, out: TextIO, kept: bool = True) -> dict[str, Any]:
    user, sessions = demo_sessions()
    with Memory(path, embedder=embedder, lm=lm) as memory:
        model = getattr(resolve_lm(lm), "model", lm)
        print(f"dspy-memory demo: LM write path with {model}, embedder {memory.embedder.name}", file=out)
        print(f"memory file: {path}\n", file=out)
        print("1. Each session is one add(): episodes first, then one write-program run.", file=out)
        totals = {"episodes": 0, "lm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for session in sessions:
            result = memory.add(session["messages"], user_id=user, at=session["at"])
            usage = result.usage
            print(
                f"   {session['at'][:10]}: {len(result.episodes)} messages -> {len(result.ops)} operations, "
                f"{usage.lm_calls} LM call(s), {usage.prompt_tokens} prompt + {usage.completion_tokens} "
                "completion tokens",
                file=out,
            )
            for op in result.ops:
                print(f"      {op.action:<10} {op.content or ''}", file=out)
            for rejected in result.rejected:
                print(f"      refused    #{rejected.index} {rejected.action}: {rejected.reason}", file=out)
            if result.error:
                # A tour of an LM that does not answer would show an empty timeline as if all
                # was well: stop, and say where the chats are and how to retry.
                where = (
                    f"kept as raw turns in {path}; retry with: dspy-memory reprocess --db {path} --lm {model}"
                    if kept
                    else f"the demo's file was temporary: run it with --db PATH to keep the chats "
                    f"and retry with: dspy-memory reprocess --db PATH --lm {model}"
                )
                raise WriteProgramError(f"the LM write failed: {result.error} ({where})", usage=result.usage)
            totals["episodes"] += len(result.episodes)
            for key in ("lm_calls", "prompt_tokens", "completion_tokens"):
                totals[key] += getattr(usage, key)

        print("\n2. Facts that changed, as timelines (nothing was deleted):", file=out)
        changed = []
        for record in memory.timeline(subject="Ada", user_id=user):
            if record.superseded_by is None:
                continue
            newer = memory.get(record.superseded_by, user_id=user)
            until = day(record.invalid_at, "-") if record.status == "superseded" else "(corrected)"
            print(f"   {day(record.valid_at, '-')} .. {until}  {record.content}", file=out)
            print(
                f"   {day(newer.valid_at, '-') if newer else '-'} ..             {newer.content if newer else '-'}",
                file=out,
            )
            changed.append((record.content, newer.content if newer else None))

        question = "Where does Ada live and work?"
        now_hits = memory.search(question, user_id=user, k=3)
        then_hits = memory.search(question, user_id=user, k=3, as_of="2024-02-01")
        print(f'\n3. search("{question}") now:', file=out)
        _show_hits(now_hits, out)
        print('   and as_of="2024-02-01":', file=out)
        _show_hits(then_hits, out)

        per_episode = {key: round(value / max(totals["episodes"], 1), 1) for key, value in totals.items()}
        print(
            f"\n4. Cost: {totals['lm_calls']} LM calls, {totals['prompt_tokens']} prompt and "
            f"{totals['completion_tokens']} completion tokens for {totals['episodes']} messages "
            f"({per_episode['prompt_tokens']} prompt tokens per message).",
            file=out,
        )

        memory.blocks.set("persona", "You are Ada's running coach. Be brief and practical.", user_id=user)
        task = "Plan Ada's next race and where she should train."
        context = memory.context(task, user_id=user, budget_tokens=CONTEXT_BUDGET)
        print(
            f'\n5. memory.context("{task}", budget_tokens={CONTEXT_BUDGET}): {context.tokens} tokens '
            f"({context.tokenizer}), {len(context.included)} items in, {len(context.dropped)} left out\n",
            file=out,
        )
        print("\n".join(f"   {line}" for line in context.text.splitlines()), file=out)
        return {
            "mode": "lm",
            "context": context.text,
            "context_tokens": context.tokens,
            "totals": totals,
            "changed": changed,
            "now": [hit.content for hit in now_hits],
            "as_of": [hit.content for hit in then_hits],
        }


def _run_raw_demo(path: str, *, embedder: Any, out: TextIO) -> dict[str, Any]:
    user, sessions = demo_sessions()
    with Memory(path, embedder=embedder) as memory:
        print(f"dspy-memory demo: raw mode (no LM), embedder {memory.embedder.name}", file=out)
        print(f"memory file: {path}\n", file=out)

        start = time.perf_counter()
        added = 0
        for session in sessions:
            result = memory.add(session["messages"], user_id=user, at=session["at"], infer=False)
            added += len(result.memories)
        dates = [session["at"][:10] for session in sessions]
        print(
            f"1. Remembered {len(dates)} chats with Ada ({dates[0]} .. {dates[-1]}): "
            f"{added} messages, each persisted as an episode and stored as a searchable memory "
            f"({time.perf_counter() - start:.1f} s, model loading included).\n",
            file=out,
        )

        question = "Where did Ada move to?"
        now_hits = memory.search(question, user_id=user, k=5)
        print(f'2. search("{question}"): best matches with their time and provenance', file=out)
        _show_hits(now_hits, out)

        question = "Where does Ada live?"
        past_hits = memory.search(question, user_id=user, k=5, as_of="2024-02-01")
        print(f'\n3. Time travel: search("{question}", as_of="2024-02-01") sees only what was', file=out)
        print("   true then (in raw mode: what had been said by then; no Denver yet)", file=out)
        _show_hits(past_hits, out)

        cat = next(
            hit
            for hit in memory.search("Ada's cat Miso", user_id=user, k=5)
            if "cat Miso" in hit.content or "cat Mochi" in hit.content
        )
        if "cat Miso" in cat.content:
            before_correction = utcnow()
            memory.update(
                cat.id,
                cat.content.replace("Miso", "Mochi"),
                reason="Ada: my cat is called Mochi, not Miso",
                user_id=user,
            )
        else:  # a file kept from an earlier run (--db): the chats were one memory each, corrected then
            update = next(event for event in memory.history(cat.id, user_id=user) if event.event == "UPDATE")
            before_correction = update.created_at - timedelta(milliseconds=1)
        print("\n4. A correction: Ada's cat is called Mochi. update() keeps the old version:", file=out)
        for event in memory.history(cat.id, user_id=user):
            change = (
                f'"{event.old_content}" -> "{event.new_content}"'
                if event.old_content
                else f'"{event.new_content}"'
            )
            reason = f"  (reason: {event.reason})" if event.reason else ""
            print(f"   v{event.version} {event.event:<6} {change}{reason}", file=out)

        question = "What is Ada's cat called?"
        believed = [
            hit
            for hit in memory.search(question, user_id=user, k=10, known_at=before_correction)
            if hit.id == cat.id
        ]
        current = [hit for hit in memory.search(question, user_id=user, k=10) if hit.id == cat.id]
        print(
            f'\n5. search("{question}", known_at=<before the correction>) shows what we believed:',
            file=out,
        )
        _show_hits(believed, out, limit=1)
        print("   and now:", file=out)
        _show_hits(current, out, limit=1)

        stats = memory.stats()
        print(
            f"\n6. The file holds {stats['tables']['episodes']} episodes, "
            f"{stats['current_memories']} current memories ({stats['tables']['memories']} rows with "
            f"old versions) and {stats['tables']['memory_events']} history events.",
            file=out,
        )
        corrected = memory.get(cat.id, user_id=user)
        assert corrected is not None, "the cat's memory was found and corrected above"
        return {
            "mode": "raw",
            "added": added,
            "now": [hit.content for hit in now_hits],
            "as_of": [hit.content for hit in past_hits],
            "corrected": corrected.content,
            "believed": [hit.content for hit in believed],
            "current": [hit.content for hit in current],
            "history": [event.event for event in memory.history(cat.id, user_id=user)],
        }
