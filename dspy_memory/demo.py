"""`dspy-memory demo`: a tour of raw-mode memory on a shipped conversation. No LM, no network."""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from dspy_memory.memory import Memory
from dspy_memory.timeutil import utcnow
from dspy_memory.types import Hit


def load_demo_conversation() -> dict[str, Any]:
    text = resources.files("dspy_memory").joinpath("data/demo_conversation.json").read_text("utf-8")
    return json.loads(text)


def _date(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else "-"


def _show_hits(hits: list[Hit], out: TextIO, limit: int = 3) -> None:
    if not hits:
        print("   (nothing found)", file=out)
    for hit in hits[:limit]:
        memory = hit.memory
        print(
            f"   {hit.score:.3f}  valid from {_date(memory.valid_at)}  [{memory.status}]  {memory.content}",
            file=out,
        )
        for source in hit.provenance:
            who = source.name or source.role or source.source
            print(
                f"          from a {source.source} by {who}, said {source.occurred_at:%Y-%m-%d %H:%M}, "
                f"episode {source.episode_id[:8]}",
                file=out,
            )


def run_demo(db: str | None = None, *, embedder: Any = None, out: TextIO | None = None) -> dict[str, Any]:
    """Run the tour and print it; returns a summary (used by the tests)."""
    import sys

    out = out or sys.stdout
    conversation = load_demo_conversation()
    user = conversation["user_id"]
    with tempfile.TemporaryDirectory() as tmp:
        path = db or str(Path(tmp) / "demo.db")
        with Memory(path, embedder=embedder) as memory:
            print(f"dspy-memory demo: raw mode (no LM), embedder {memory.embedder.name}", file=out)
            print(f"memory file: {path}\n", file=out)

            start = time.perf_counter()
            added = 0
            for session in conversation["sessions"]:
                result = memory.add(session["messages"], user_id=user, at=session["at"])
                added += len(result.memories)
            dates = [session["at"][:10] for session in conversation["sessions"]]
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
                hit for hit in memory.search("Ada's cat Miso", user_id=user, k=5) if "cat Miso" in hit.content
            )
            before_correction = utcnow()
            corrected = memory.update(
                cat.id,
                cat.content.replace("Miso", "Mochi"),
                reason="Ada: my cat is called Mochi, not Miso",
            )
            print("\n4. A correction: Ada's cat is called Mochi. update() keeps the old version:", file=out)
            for event in memory.history(cat.id):
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
            return {
                "added": added,
                "now": [hit.content for hit in now_hits],
                "as_of": [hit.content for hit in past_hits],
                "corrected": corrected.content,
                "believed": [hit.content for hit in believed],
                "current": [hit.content for hit in current],
                "history": [event.event for event in memory.history(cat.id)],
            }
