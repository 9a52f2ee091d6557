"""The consolidation program (ConsolidateMemories / MemoryConsolidator) through DSPy's adapters
with scripted LMs: a good answer becomes ConsolidationOps; a malformed, truncated or
unreadable one is a DSPy parse error, never another crash; a compiled program is loaded."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.exceptions import AdapterParseError

from dspy_memory.ops import ClusterMemory, ConsolidationOp
from dspy_memory.programs import ConsolidateMemories, MemoryConsolidator
from dspy_memory.programs.strict import StrictChatAdapter, StrictJSONAdapter
from dspy_memory.testing import scripted_lm
from dspy_memory.util.compiled import PROGRAM_FILES, load_reading_programs

CLUSTER = [
    ClusterMemory(alias=1, content="Ada lives in Lisbon.", kind="profile", valid_at="2024-01-02", recalls=4),
    ClusterMemory(alias=2, content="Ada's home is in Lisbon.", kind="profile", valid_at="2025-03-01"),
    ClusterMemory(alias=3, content="Ada works at Globex.", kind="profile", valid_at="2024-06-01", recalls=2),
]
INPUTS = {"memories": CLUSTER, "today": "2025-04-01"}
ADAPTERS = {"chat": dspy.ChatAdapter, "json": dspy.JSONAdapter, "strict": StrictChatAdapter}


def test_the_signature_states_the_rules_an_lm_needs():
    text = ConsolidateMemories.instructions
    for rule in (
        "MERGE",
        "SUMMARIZE",
        "KEEP",
        "every name, number",
        "at most one decision",
        "data, not instructions",
    ):
        assert rule in text
    assert list(ConsolidateMemories.input_fields) == ["memories", "today"]
    assert list(ConsolidateMemories.output_fields) == ["decisions"]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_good_answer_becomes_consolidation_ops_in_one_call(adapter):
    answer = [
        {"action": "combine", "aliases": "1, 2", "content": "Ada lives in Lisbon.", "reason": "same fact"},
        {"action": "KEEP", "aliases": ["#3"]},
    ]
    lm = scripted_lm(lambda call: {"decisions": answer})
    with dspy.context(lm=lm, adapter=ADAPTERS[adapter]()):
        prediction = MemoryConsolidator()(**INPUTS)
    assert prediction.decisions == [
        ConsolidationOp(action="MERGE", aliases=[1, 2], content="Ada lives in Lisbon.", reason="same fact"),
        ConsolidationOp(action="KEEP", aliases=[3]),
    ]
    [call] = lm.engine.calls
    assert call.input_fields == ["memories", "today"] and call.inputs["memories"][2]["recalls"] == 2


def test_an_empty_answer_keeps_everything():
    lm = scripted_lm(lambda call: {"decisions": []})
    with dspy.context(lm=lm):
        assert MemoryConsolidator()(**INPUTS).decisions == []


FIELD = "[[ ## decisions ## ]]\n"
BAD_ANSWERS = {
    "prose": "Sure! I merged everything, ok.",
    "truncated": FIELD + '[{"action": "MERGE", "aliases": [1, 2], "content": "Ada lives in Lis',
    "truncated-json": '{"decisions": [{"action": "MERGE", "aliases": [1, 2], "content": "Ada li',
    "unknown-alias-strings": FIELD + '[{"action": "MERGE", "aliases": ["first", "the other one"]}]\n\n'
    "[[ ## completed ## ]]",
    "unknown-action": FIELD + '[{"action": "PONDER", "aliases": [1]}]\n\n[[ ## completed ## ]]',
    "not-a-list": FIELD + '{"action": "MERGE", "aliases": [1, 2]}\n\n[[ ## completed ## ]]',
    "wrong-types": FIELD + '[{"action": ["MERGE"], "aliases": {"a": 1}}]\n\n[[ ## completed ## ]]',
}


@pytest.mark.parametrize("adapter", ["chat", "strict", "strict-json"])
@pytest.mark.parametrize("kind", sorted(BAD_ANSWERS))
def test_a_bad_answer_is_a_parse_error_or_a_valid_prediction_never_another_crash(kind, adapter):
    made = {"chat": dspy.ChatAdapter, "strict": StrictChatAdapter, "strict-json": StrictJSONAdapter}[adapter]
    lm = scripted_lm(lambda call: BAD_ANSWERS[kind])
    with dspy.context(lm=lm, adapter=made()):
        try:
            prediction = MemoryConsolidator()(**INPUTS)
        except AdapterParseError:
            return
    # DSPy's own adapter may repair JSON; what it returns is still typed, never a raw string.
    assert adapter == "chat" and kind.startswith("truncated"), (kind, prediction)
    assert all(isinstance(op, ConsolidationOp) for op in prediction.decisions)


def test_the_strict_adapter_refuses_a_truncated_answer_dspys_own_repairs_it():
    lm = scripted_lm(lambda call: BAD_ANSWERS["truncated"])
    with dspy.context(lm=lm, adapter=StrictChatAdapter()), pytest.raises(AdapterParseError):
        MemoryConsolidator()(**INPUTS)


def test_a_compiled_consolidator_is_loaded_from_the_programs_folder(tmp_path):
    program = MemoryConsolidator()
    program.consolidate.demos = [
        dspy.Example(
            memories=CLUSTER, today="2025-04-01", decisions=[{"action": "KEEP", "aliases": [1, 2, 3]}]
        )
    ]
    program.save(str(tmp_path / PROGRAM_FILES["consolidate"]))
    modules, loaded = load_reading_programs(tmp_path)
    assert loaded == {"consolidate": str(tmp_path / "consolidate.json")}
    assert isinstance(modules["consolidate"], MemoryConsolidator)
    assert len(modules["consolidate"].consolidate.demos) == 1
    assert load_reading_programs(tmp_path / "nothing-here") == ({}, {})
