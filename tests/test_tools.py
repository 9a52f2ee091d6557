"""The agent memory tools as a model meets them (dspy_memory/agent/tools.py): answers bounded by
the tool settings with a marker saying what was cut, arguments whose schema carries their
bounds, the core blocks an agent may start, and tools that survive pickling."""

from __future__ import annotations

import asyncio
import copy
import pickle
import re
import subprocess
import sys
from pathlib import Path

import dspy
import pytest
from pydantic import SecretStr

from dspy_memory import Memory, MemoryConfig
from dspy_memory.agent.tools import TOOL_NAMES
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[1]
BIG = "Ada's travel log: " + "x" * 1_200_000
CUT = re.compile(r"… \[truncated: ([\d,]+) more characters")


def tools_of(memory: Memory, **options) -> dict:
    return {tool.name: tool for tool in memory.tools(user_id="ada", **options)}


def every_tool(memory: Memory) -> dict:
    return tools_of(memory, allow_forget=True, allow_feedback=True)


def test_a_huge_memory_is_recalled_cut_to_the_limits_with_a_marker_that_counts_what_was_cut(memory):
    limits = memory.config.tools
    memory.add(BIG, user_id="ada", infer=False)
    answer = tools_of(memory)["recall"](query="Ada's travel log")
    assert len(answer) <= limits.max_output_chars
    header, line = answer.splitlines()
    assert header == "1 memories (current):" and len(line) <= limits.max_item_chars
    shown = line.split(" | ", 1)[1].split("… [truncated")[0]
    assert BIG.startswith(shown) and len(shown) > limits.max_item_chars // 2
    assert len(shown) + int(CUT.search(line).group(1).replace(",", "")) == len(BIG)
    # Only the answer is cut: the memory keeps every character.
    assert [len(m.content) for m in memory.get_all(user_id="ada")] == [len(BIG)]


def test_the_limits_are_settings_and_a_long_answer_is_cut_between_lines(db_path):
    settings = {"max_item_chars": 300, "max_output_chars": 1000}
    with Memory(db_path, embedder=HashEmbedder(64), tools=settings) as memory:
        for n in range(25):
            memory.add(f"Note {n} about the garden: " + "leaf " * 100, user_id="ada", infer=False)
        answer = tools_of(memory)["recall"](query="garden note", k=20)
        lines = answer.splitlines()
        assert len(answer) <= 1000 and all(len(line) <= 300 for line in lines)
        assert lines[0] == "20 memories (current):"
        left = re.fullmatch(r"… \[truncated: (\d+) more lines \([\d,]+ characters\); (.*)\]", lines[-1])
        assert left and "smaller k" in left.group(2)
        assert len(lines) - 2 + int(left.group(1)) == 20  # shown + cut = every hit


def test_every_tool_answer_is_bounded_even_for_huge_arguments(memory):
    limits = memory.config.tools
    tools = every_tool(memory)
    saved = tools["remember"](content="Ada keeps a diary. " + "y" * 120_000)
    assert len(saved) <= limits.max_output_chars and CUT.search(saved)
    memory_id = saved.split("[", 1)[1].split("]", 1)[0]
    revised = tools["revise"](
        memory_id=memory_id, content="Ada keeps a diary. " + "z" * 50_000, reason="longer"
    )
    assert len(revised) <= limits.max_output_chars and CUT.search(revised)
    history = tools["memory_history"](memory_id=memory_id)
    assert len(history) <= limits.max_output_chars and CUT.search(history)
    huge = "w" * 1_000_000
    for name, tool in tools.items():
        for argument in tool.args:
            if tool.args[argument].get("type") == "string":
                given = {arg: 1 if arg == "k" else None if arg == "as_of" else memory_id for arg in tool.args}
                given[argument] = huge
                answer = tool(**given)
                assert len(answer) <= limits.max_output_chars, (name, argument, len(answer))
                if answer.startswith("error: "):
                    assert "\n" not in answer and len(answer) <= limits.max_item_chars


def test_recall_k_carries_its_bounds_in_the_schema_and_out_of_range_is_an_error_line(memory):
    memory.add("Ada likes tea.", user_id="ada", infer=False)
    recall = tools_of(memory)["recall"]
    assert recall.args["k"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "default": 5,
        "description": recall.arg_desc["k"],
    }
    for k in (0, -3, 21, 10**9, "many", 2.5):
        for answer in (recall(query="tea", k=k), recall.func(query="tea", k=k)):
            assert answer.startswith("error: ") and "\n" not in answer and "k" in answer, answer
    assert asyncio.run(recall.acall(query="tea", k=21)).startswith("error: Arg k is invalid")
    assert recall(query="tea", k=20).startswith("1 memories")
    assert recall.func(query="tea", k=1).startswith("1 memories")


def test_each_argument_has_one_description_used_by_the_schema(memory):
    for tool in every_tool(memory).values():
        assert set(tool.arg_desc) == set(tool.args) and tool.has_kwargs is False
        for name, schema in tool.args.items():
            assert schema["description"] == tool.arg_desc[name] and schema["description"]


def test_core_memory_append_starts_the_human_and_persona_blocks_as_letta_agents_have(memory):
    tools = tools_of(memory)
    assert (
        tools["core_memory_append"](label="human", text="Name: Ada") == "block human is now 9/2000 characters"
    )
    assert tools["core_memory_append"](label="persona", text="I am terse.").startswith("block persona is now")
    human = memory.blocks.get("human", user_id="ada")
    assert (human.value, human.char_limit) == ("Name: Ada", 2000)
    assert [(v.version, v.actor) for v in memory.blocks.history("human", user_id="ada")] == [(1, "agent")]
    assert tools["core_memory_append"](label="human", text="Lives in Denver").startswith("block human is now")
    assert memory.blocks.get("human", user_id="ada").value == "Name: Ada\nLives in Denver"
    refused = tools["core_memory_append"](label="diary", text="x")
    assert (
        refused.startswith("error: no block 'diary'") and "human, persona" in refused and "\n" not in refused
    )
    assert memory.blocks.get("diary", user_id="ada") is None
    assert memory.blocks.get("human", user_id="bob") is None  # started in the tools' scope only


def test_the_blocks_an_agent_may_start_are_a_setting(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), tools={"default_blocks": {"diary": 300}}) as memory:
        tools = tools_of(memory)
        assert (
            tools["core_memory_append"](label="diary", text="Day 1") == "block diary is now 5/300 characters"
        )
        assert tools["core_memory_append"](label="human", text="Ada").startswith("error: no block 'human'")
    with pytest.raises(ValueError, match="default_blocks"):
        MemoryConfig(tools={"default_blocks": {"bad label!": 10}})
    with pytest.raises(ValueError, match="max_item_chars"):
        MemoryConfig(tools={"max_item_chars": 5000, "max_output_chars": 1000})


def test_tools_pickle_to_tools_on_the_same_memory_in_the_same_process(memory):
    tools = memory.tools(user_id="ada")
    loaded = {tool.name: tool for tool in pickle.loads(pickle.dumps(tools))}
    assert list(loaded) == [tool.name for tool in tools]
    memory.add("Ada likes tea.", user_id="ada", infer=False)
    assert "Ada likes tea." in loaded["recall"](query="tea")
    assert "saved" in loaded["remember"](content="Ada likes green tea.")
    assert len(memory.get_all(user_id="ada")) == 2
    assert loaded["recall"](query="tea", k=0).startswith("error: ")  # still one line
    assert loaded["recall"].args == tools[0].args
    assert pickle.loads(pickle.dumps(tools[0])).func.binding.memory is memory
    assert copy.deepcopy(tools[0]).func.binding.memory is memory  # what optimizers do


def test_a_pickled_tool_reopens_its_memory_file_in_another_process(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        memory.add("Ada's cat is called Miso.", user_id="ada", infer=False)
        memory.add("Bob's cat is called Rex.", user_id="bob", infer=False)
        blob = pickle.dumps(memory.tools(user_id="ada", allow=["recall", "remember"]))
    code = (
        "import pickle, sys\n"
        "recall, remember = pickle.loads(sys.stdin.buffer.read())\n"
        "print(remember(content='Ada also has a dog.'))\n"
        "print(recall(query='cat called'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=blob, capture_output=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "Ada's cat is called Miso." in out and "Rex" not in out  # the scope came along
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        assert "Ada also has a dog." in [m.content for m in memory.get_all(user_id="ada")]


def test_a_tool_pickled_with_a_relative_path_reopens_that_file_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Memory("relative.db", embedder=HashEmbedder(64)) as memory:
        memory.add("Ada's cat is called Miso.", user_id="ada", infer=False)
        blob = pickle.dumps(memory.tools(user_id="ada", allow=["recall"]))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    (recall,) = pickle.loads(blob)  # its Memory is closed: re-opened from its configuration
    assert "Ada's cat is called Miso." in recall(query="cat")
    assert not (tmp_path / "elsewhere" / "relative.db").exists()
    recall.func.binding.memory.close()


def test_tools_bound_to_an_in_memory_store_load_only_where_it_lives():
    with Memory(":memory:", embedder=HashEmbedder(64)) as memory:
        blob = pickle.dumps(memory.tools(user_id="ada"))
        assert pickle.loads(blob)[0].func.binding.memory is memory
    with pytest.raises(InvalidInputError, match="in-memory store"):
        pickle.loads(blob)


def test_a_pickled_tool_holds_no_encryption_key(memory):
    # The key is read again where the tool is loaded ($DSPY_MEMORY_ENCRYPTION_KEY), never stored
    # in a pickle that `program.save(save_program=True)` may leave on disk.
    memory.config = memory.config.model_copy(update={"encryption_key": SecretStr("hunter2-passphrase")})
    assert b"hunter2" not in pickle.dumps(memory.tools(user_id="ada"))


def test_a_react_program_saved_whole_by_dspy_loads_with_working_tools(memory, tmp_path):
    agent = dspy.ReAct("question -> answer", tools=memory.tools(user_id="ada"))
    agent.save(str(tmp_path / "agent"), save_program=True)
    loaded = dspy.load(str(tmp_path / "agent"), allow_pickle=True)
    assert set(TOOL_NAMES) - {"forget", "memory_feedback"} <= set(loaded.tools)
    loaded.tools["remember"](content="Ada flies to Lisbon on 2024-05-02.")
    assert [m.content for m in memory.get_all(user_id="ada")] == ["Ada flies to Lisbon on 2024-05-02."]
