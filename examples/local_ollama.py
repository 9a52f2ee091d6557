"""Everything local: Ollama writes and embeds the memories, SQLite keeps them.

    ollama pull llama3.2 && ollama pull nomic-embed-text
    python examples/local_ollama.py [--llm llama3.2] [--embed nomic-embed-text]

Needs a running Ollama (`ollama serve`; OLLAMA_HOST if it is not on localhost:11434). It fails
with a message saying what to start or pull when Ollama is not ready.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import dspy_memory
from dspy_memory import Memory

CHATS = [
    ("2024-01-10", "I live in Boston and work as a nurse at Boston General."),
    ("2024-03-15", "Big news: I moved to Denver last week, and I'm starting at Denver Health."),
]


def main(llm: str = "llama3.2", embed: str = "nomic-embed-text") -> dict[str, Any]:
    models = dspy_memory.local(llm=llm, embed=embed)  # checks Ollama and the models first
    with tempfile.TemporaryDirectory() as tmp:
        with Memory(Path(tmp) / "local.db", lm=models.lm, embedder=models.embedder) as memory:
            for day, text in CHATS:
                result = memory.add({"role": "user", "name": "Ada", "content": text}, user_id="ada", at=day)
                print(f"{day}: {result.usage.lm_calls} LM call, {result.usage.prompt_tokens} prompt tokens")
                for op in result.ops:
                    print(f"  {op.action:<10} {op.content or ''}")
            timeline = memory.timeline(subject="Ada", user_id="ada")
            print("\nWhat changed:")
            for record in timeline:
                until = f" until {record.invalid_at:%Y-%m-%d}" if record.invalid_at else ""
                print(f"  [{record.status}] {record.content} (since {record.valid_at:%Y-%m-%d}{until})")
            context = memory.context("Where does Ada live and work?", user_id="ada", budget_tokens=300)
            print(f"\nContext for an agent ({context.tokens} tokens):\n{context.text}")
            return {"timeline": [(r.content, r.status) for r in timeline], "context": context.text}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm", default="llama3.2")
    parser.add_argument("--embed", default="nomic-embed-text")
    args = parser.parse_args()
    main(args.llm, args.embed)
