"""Memory in a planner/executor loop (the tool-card pattern).

    python examples/planner_executor.py [--embedder test]

The planner reads the memory card and asks it what is known; the executor runs tools and logs
every step through `log_step`. The second run sees that a tool failed the first time and
avoids it. No LM is needed: the planner here is a few lines of rules.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.agent.tool_card import MemoryTool


def weather_api(city: str) -> str:
    if city == "Springfield":
        return "error: ambiguous city name"
    return f"sunny, 24C in {city}"


def geocoded_weather(city: str) -> str:
    return f"sunny, 24C in {city} (Springfield, IL)"


TOOLS = {"Weather_API": weather_api, "Geocoded_Weather": geocoded_weather}


def plan(task: str, card: MemoryTool) -> list[str]:
    """Pick tools, skipping those that failed on this kind of task before."""
    known = card.execute(task)
    failed = {
        fact["metadata"].get("tool") for fact in known["facts"] if fact["metadata"].get("success") is False
    }
    return [name for name in TOOLS if name not in failed][:1]


def run(task: str, city: str, card: MemoryTool, run_id: str) -> str:
    for name in plan(task, card):
        result = TOOLS[name](city)
        card.log_step(name, {"city": city}, result, run_id=run_id)
        if not result.startswith("error"):
            return result
    return "no answer"


def main(embedder: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "planner.db", embedder=embedder) as memory:
        card = MemoryTool(memory, user_id="ada", agent_id="planner")
        print("card:", card.get_metadata()["tool_description"][:80], "...")
        first = run("weather in Springfield", "Springfield", card, run_id="run-1")
        memory.flush()  # log_step writes in the background
        second = run("weather in Springfield", "Springfield", card, run_id="run-2")
        memory.flush()
        print("run 1:", first)
        print("run 2:", second)
        steps = card.execute("Springfield weather")["facts"]
        for fact in steps:
            print(f"  logged in {fact['run_id']}: {fact['content']}")
        return {"first": first, "second": second, "steps": [(f["run_id"], f["content"]) for f in steps]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default=None, help="embedder spec (default: local MiniLM)")
    main(parser.parse_args().embedder)
