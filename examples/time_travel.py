"""Raw-mode memory in a few lines: remember chats, search them, travel in time, correct a fact.

    python examples/time_travel.py [--embedder test]

Runs offline with the local MiniLM model (or the deterministic test embedder).
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from dspy_memory import Memory


def main(embedder: str | None = None) -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "travel.db", embedder=embedder) as memory:
        memory.add(
            [
                {
                    "role": "user",
                    "name": "Sam",
                    "content": "I'm flying to Lisbon on 3 June for a conference.",
                },
                {"role": "user", "name": "Sam", "content": "I always book aisle seats."},
            ],
            user_id="sam",
            at="2024-05-10",
        )
        memory.add(
            [{"role": "user", "name": "Sam", "content": "Conference moved: I'm flying to Porto instead."}],
            user_id="sam",
            at="2024-05-20",
        )

        question = "Which city is Sam flying to for the conference?"
        now = memory.search(question, user_id="sam", k=2)
        before = memory.search(question, user_id="sam", k=2, as_of="2024-05-15")
        for label, hits in (("now", now), ("as of 2024-05-15", before)):
            print(label)
            for hit in hits:
                print(f"  {hit.score:.2f} {hit.memory.valid_at:%Y-%m-%d} {hit.content}")

        seat = memory.search("seat preference", user_id="sam", k=1)[0]
        believed_at = datetime.now(timezone.utc)
        memory.update(seat.id, "Sam: I always book window seats.", reason="Sam corrected it", user_id="sam")
        for event in memory.history(seat.id, user_id="sam"):
            print(f"  {event.event}: {event.new_content}")
        then = memory.search("seat preference", user_id="sam", k=1, known_at=believed_at)
        return {
            "now": [hit.content for hit in now],
            "before": [hit.content for hit in before],
            "then": [hit.content for hit in then],
            "current": [memory.get(seat.id, user_id="sam").content],
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default=None, help="embedder spec (default: local MiniLM)")
    main(parser.parse_args().embedder)
