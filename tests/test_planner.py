"""The planner/executor tool card: metadata, structured bundles, the logging sink."""

from __future__ import annotations

import copy
import json

from dspy_memory.agent.tool_card import MemoryTool
from dspy_memory.types import Scope


def test_card_metadata_is_complete(memory):
    card = MemoryTool(memory, user_id="ada")
    meta = card.get_metadata()
    assert set(meta) == {"tool_name", "tool_description", "input_types", "output_type", "demo_commands"}
    assert meta["input_types"] == {"query": "str - what to look up, e.g. 'Where does the user live?'"}
    assert all("tool.execute(" in demo["command"] for demo in meta["demo_commands"])


def test_execute_returns_facts_with_time_provenance_and_confidence(memory):
    memory.add(
        {"role": "user", "name": "Ada", "content": "I live in Boston."},
        user_id="ada",
        run_id="r1",
        at="2024-01-10",
    )
    memory.add(
        {"role": "user", "name": "Ada", "content": "I live in Denver."},
        user_id="ada",
        run_id="r2",
        at="2024-03-10",
    )
    memory.add("Bob lives in Rome.", user_id="bob")
    card = MemoryTool(memory, user_id="ada")
    bundle = card.execute("Where does Ada live?")
    json.dumps(bundle)  # JSON-ready
    assert bundle["as_of"] is None and {fact["run_id"] for fact in bundle["facts"]} == {"r1", "r2"}
    fact = bundle["facts"][0]
    assert set(fact) == {
        "id",
        "content",
        "status",
        "valid_at",
        "invalid_at",
        "confidence",
        "kind",
        "run_id",
        "metadata",
        "sources",
    }
    assert fact["sources"][0]["speaker"] == "Ada" and fact["sources"][0]["run_id"] == fact["run_id"]
    assert all("Rome" not in f["content"] for f in bundle["facts"])
    past = card.execute("Where does Ada live? as of 2024-02-01")
    assert past["as_of"] == "2024-02-01" and past["query"] == "Where does Ada live?"
    assert [f["content"] for f in past["facts"]] == ["Ada: I live in Boston."]


def test_log_step_records_executor_steps_per_run(memory):
    card = MemoryTool(memory, user_id="ada")
    card.log_step("Web_Search_Tool", {"query": "Denver weather"}, {"result": "sunny"}, run_id="run-7")
    card.log_step("Python_Tool", {"code": "1/0"}, "Error: division by zero", run_id="run-7")
    card.log_step("Calculator", {"x": 1}, "2", run_id="run-8", remember=False)
    memory.flush()
    steps = memory.store.episodes.list(Scope(user_id="ada", run_id="run-7"))
    assert [(e.name, e.source, e.metadata["success"]) for e in steps] == [
        ("Web_Search_Tool", "tool_step", True),
        ("Python_Tool", "tool_step", False),
    ]
    [top, *_] = memory.search("Denver weather", user_id="ada")
    assert top.memory.run_id == "run-7" and "Web_Search_Tool" in top.content
    assert memory.search("Calculator", user_id="ada", run_id="run-8") == []  # logged only
    assert copy.deepcopy(card) is card
