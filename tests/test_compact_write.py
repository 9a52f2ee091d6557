"""The compact write program (write.mode="compact"): a prompt small local models can hold, the same
decisions through the same validator, clean failures, "auto" selection and compiled programs."""

from __future__ import annotations

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.config import WriteConfig
from dspy_memory.embed import HashEmbedder
from dspy_memory.ops import Op
from dspy_memory.programs import CompactOp, CompactWriter, FusedWriter
from dspy_memory.programs.strict import StrictChatAdapter, StrictJSONAdapter
from dspy_memory.testing import LMCall, scripted_lm
from dspy_memory.util.compiled import resolve_write_mode
from dspy_memory.util.lm import prompt_tokens
from evals.write_cost import fixed_case, fixed_case_prompts

from .scripted import alias_of

COMPACT_INPUTS = ["turns", "observed_at", "existing_memories"]
FUSED_INPUTS = ["turns", "observed_at", "context", "existing_memories"]
COMPACT_KEYS = {
    "action",
    "target",
    "content",
    "subject",
    "predicate",
    "object",
    "kind",
    "valid_at",
    "correction",
}


def writer_lm(decide, *, model="scripted/lm", seen=None):
    """An LM answering either write signature with decide(turns, existing_memories); `seen`
    collects the input fields of every call (which program asked)."""

    def responder(call: LMCall):
        if seen is not None:
            seen.append(call.input_fields)
        assert call.output_fields == ["ops"], call.signature
        ops = decide(call.inputs["turns"], call.inputs["existing_memories"])
        assert all(set(op) <= COMPACT_KEYS for op in ops), "answers use the compact format only"
        return {"ops": ops}

    return scripted_lm(responder, model=model)


# -- the prompt ----------------------------------------------------------------------------------


def test_compact_prompt_for_3_turns_and_5_memories_fits_1000_tokens_and_fused_does_not():
    case = fixed_case()["inputs"]
    assert (len(case["turns"]), len(case["existing_memories"])) == (3, 5)
    sizes = fixed_case_prompts()
    for adapter in ("chat", "ollama_json"):
        assert sizes["compact"][adapter] <= 1000, sizes
        assert sizes["fused"][adapter] > 2 * sizes["compact"][adapter], sizes
    # The count is of the prompt the write path renders: the budget's own function agrees.
    assert prompt_tokens(CompactWriter(), case) == sizes["compact"]["chat"]
    assert prompt_tokens(FusedWriter(), case) == sizes["fused"]["chat"]


def test_the_prompt_shows_every_turn_and_memory_and_the_format_before_the_schema():
    inputs = fixed_case()["inputs"]
    predictor = CompactWriter().write
    for adapter in (StrictChatAdapter(), StrictJSONAdapter()):
        messages = adapter.format(predictor.signature, predictor.demos, inputs)
        prompt = "\n".join(message["content"] for message in messages)
        for text in [turn.text for turn in inputs["turns"]] + [
            m.content for m in inputs["existing_memories"]
        ]:
            assert text in prompt
        assert prompt.index("INVALIDATE target") < prompt.index("JSON schema")


# -- same decisions, same results ------------------------------------------------------------------

STEPS = [
    (
        "2024-01-01",
        "Ada: I live in Boston and I like tea.",
        [("ADD", "Ada lives in Boston."), ("ADD", "Ada likes tea.")],
    ),
    (
        "2024-02-01",
        "Ada: I like green tea most of all.",
        [("UPDATE", "Ada likes tea, green tea most of all.")],
    ),
    ("2024-03-01", "Ada: I moved to Denver today.", [("INVALIDATE", "Ada lives in Denver.")]),
    ("2024-03-02", "Ada: I work at Acme.", [("ADD", "Ada works at Acme.")]),
    (
        "2024-03-03",
        "Ada: Sorry, I misspoke: I work at Initech, never at Acme.",
        [("INVALIDATE", "Ada works at Initech.")],
    ),
    ("2024-04-01", "Ada: Please forget that I like tea.", [("DELETE", None)]),
    ("2024-05-01", "Ada: I still live in Denver.", [("NOOP", "Ada lives in Denver.")]),
]


def fact(content, predicate, obj, kind="profile", **extra):
    return {
        "content": content,
        "subject": "Ada",
        "predicate": predicate,
        "object": obj,
        "kind": kind,
        **extra,
    }


def decide(turns, existing):
    """The decisions of STEPS, in the compact format (every key is one the compact program reads)."""
    text = turns[-1]["text"]
    if "Boston and" in text:
        return [
            {"action": "ADD", **fact("Ada lives in Boston.", "lives_in", "Boston", valid_at="2024-01-01")},
            {"action": "ADD", **fact("Ada likes tea.", "likes", "tea", kind="preference")},
        ]
    if "green tea" in text:
        tea = fact("Ada likes tea, green tea most of all.", "likes", "tea", kind="preference")
        return [{"action": "UPDATE", "target": alias_of(existing, "tea"), **tea}]
    if "moved to Denver" in text:
        denver = fact("Ada lives in Denver.", "lives_in", "Denver", valid_at="2024-03-01")
        return [
            {"action": "INVALIDATE", "target": alias_of(existing, "Boston"), "correction": False, **denver}
        ]
    if "misspoke" in text:
        initech = fact("Ada works at Initech.", "works_at", "Initech")
        return [{"action": "INVALIDATE", "target": alias_of(existing, "Acme"), "correction": True, **initech}]
    if "work at Acme" in text:
        return [{"action": "ADD", **fact("Ada works at Acme.", "works_at", "Acme")}]
    if "forget" in text:
        return [{"action": "DELETE", "target": alias_of(existing, "tea")}]
    return [{"action": "NOOP", "target": alias_of(existing, "Denver")}]


def run_steps(path, mode):
    """STEPS written in `mode`: per step the applied operations, and at the end every memory about
    Ada (current and past, in world-time order) and each one's events."""
    seen: list[list[str]] = []
    with Memory(
        path, embedder=HashEmbedder(64), lm=writer_lm(decide, seen=seen), write={"mode": mode}
    ) as memory:
        applied = []
        for at, text, _ in STEPS:
            result = memory.add(text, user_id="ada", at=at)
            assert result.mode == mode and result.error is None and not result.rejected, result
            applied.append([(op.action, op.content, op.correction) for op in result.ops])
        timeline = memory.timeline(subject="Ada", user_id="ada")
        state = [
            (m.content, m.kind, m.predicate, m.status, m.valid_at, m.invalid_at, m.version) for m in timeline
        ]
        events = [[e.event for e in memory.history(m.id, user_id="ada")] for m in timeline]
    return applied, state, events, seen


def test_compact_ops_go_through_the_same_validator_with_the_same_results_as_fused(tmp_path):
    fused = run_steps(str(tmp_path / "fused.db"), "fused")
    compact = run_steps(str(tmp_path / "compact.db"), "compact")
    assert {tuple(fields) for fields in fused[3]} == {tuple(FUSED_INPUTS)}
    assert {tuple(fields) for fields in compact[3]} == {tuple(COMPACT_INPUTS)}
    applied, state, events, _ = compact
    assert [[(action, content) for action, content, _ in ops] for ops in applied] == [s[2] for s in STEPS]
    assert [correction for ops in applied for action, _, correction in ops if action == "INVALIDATE"] == [
        False,
        True,
    ]
    assert (applied, state, events) == fused[:3]
    # Boston gave way to Denver on the day of the move; Acme was a mistake (expired, so no longer
    # on the timeline) and Initech holds since Acme was said to; the tea preference was erased.
    assert [
        (content, status, str(valid_at)[:10], str(invalid_at)[:10])
        for content, _, _, status, valid_at, invalid_at, _ in state
    ] == [
        ("Ada lives in Boston.", "superseded", "2024-01-01", "2024-03-01"),
        ("Ada lives in Denver.", "current", "2024-03-01", "None"),
        ("Ada works at Initech.", "current", "2024-03-02", "None"),
    ]
    assert events == [["ADD", "INVALIDATE"], ["ADD"], ["ADD"]]


@pytest.mark.parametrize(
    "adapter",
    [dspy.ChatAdapter(), dspy.JSONAdapter(), StrictChatAdapter(), StrictJSONAdapter()],
    ids=lambda adapter: type(adapter).__name__,
)
def test_compact_program_reads_its_answer_with_every_adapter(adapter):
    inputs = fixed_case()["inputs"]
    answer = [
        {"action": "INVALIDATE", "target": "#4", "content": "Ada lives in Denver.", "subject": "Ada",
         "predicate": "lives_in", "object": "Denver", "kind": "profile", "valid_at": "2024-04-15"},
        {"action": "insert", "content": "Ada works at Denver Health.", "kind": "PROFILE", "subject": ""},
        {"action": "NOOP", "target": 3, "valid_at": None},
    ]  # fmt: skip
    lm = scripted_lm(lambda call: {"ops": answer})
    with dspy.context(lm=lm, adapter=adapter):
        ops = CompactWriter()(**inputs).ops
    assert ops == [
        Op(action="INVALIDATE", target=4, content="Ada lives in Denver.", subject="Ada", predicate="lives_in",
           object="Denver", kind="profile", valid_at="2024-04-15"),
        Op(action="ADD", content="Ada works at Denver Health.", kind="profile"),
        Op(action="NOOP", target=3),
    ]  # fmt: skip
    assert len(lm.engine.calls) == 1 and lm.engine.calls[0].input_fields == COMPACT_INPUTS


def test_the_ollama_schema_of_the_compact_answer_lets_fields_be_empty():
    from dspy_memory.programs import CompactWriteMemories
    from dspy_memory.util.ollama import response_format

    schema = response_format(CompactWriteMemories, "schema")["json_schema"]["schema"]
    [op] = schema["$defs"].values()
    assert op["properties"]["target"]["type"] == ["integer", "null"]
    assert op["properties"]["action"]["enum"] == ["ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"]
    assert set(op["properties"]) == COMPACT_KEYS


# -- failures --------------------------------------------------------------------------------------

TRUNCATED = '[[ ## ops ## ]]\n[{"action": "ADD", "content": "Ada lives in Lis'
BAD_ANSWERS = {
    "prose": "Sure! Ada lives in Denver, I will remember that.",
    "truncated": TRUNCATED,
    "truncated-json": '{"ops": [{"action": "ADD", "content": "Ada lives in Lis',
    "unknown-action": '[[ ## ops ## ]]\n[{"action": "PONDER", "content": "x"}]\n\n[[ ## completed ## ]]',
    "alias-not-a-number": '[[ ## ops ## ]]\n[{"action": "NOOP", "target": "bob"}]\n\n[[ ## completed ## ]]',
    "not-a-list": '[[ ## ops ## ]]\n{"action": "ADD", "content": "x"}\n\n[[ ## completed ## ]]',
}


@pytest.mark.parametrize("kind", sorted(BAD_ANSWERS))
def test_a_malformed_or_truncated_compact_answer_keeps_the_input_as_a_raw_turn(db_path, kind):
    lm = scripted_lm(lambda call: BAD_ANSWERS[kind])
    text = "Ada: I live in Lisbon now."
    with Memory(
        db_path, embedder=HashEmbedder(64), lm=lm, write={"mode": "compact", "max_attempts": 2}
    ) as memory:
        result = memory.add(text, user_id="ada")
        [episode] = memory.store.episodes.get_many([result.episodes[0].id])
        assert result.mode == "compact" and "failed 2 times" in result.error
        assert episode.status == "failed" and episode.error == result.error
        assert [(m.kind, m.content) for m in memory.get_all(user_id="ada")] == [("turn", text)]
        assert memory.stats()["writes"]["failed"] == 1
    assert all(call.input_fields == COMPACT_INPUTS for call in lm.engine.calls)


def test_refused_compact_operations_are_recorded_and_the_rest_applied(db_path):
    def careless(turns, existing):
        if "tea" in turns[-1]["text"]:
            return [{"action": "ADD", "content": "Ada likes tea.", "subject": "Ada", "predicate": "likes"}]
        return [
            {"action": "ADD", "content": "Ada lives in Lisbon.", "subject": "Ada", "predicate": "lives_in"},
            {"action": "UPDATE", "target": 99, "content": "Ada lives in Rome."},
            {"action": "DELETE", "target": alias_of(existing, "tea")},
        ]

    with Memory(
        db_path, embedder=HashEmbedder(64), lm=writer_lm(careless), write={"mode": "compact"}
    ) as memory:
        memory.add("Ada: I like tea.", user_id="ada")
        result = memory.add("Ada: I live in Lisbon now.", user_id="ada")
        assert [(op.action, op.content) for op in result.ops] == [("ADD", "Ada lives in Lisbon.")]
        assert [r.reason for r in result.rejected] == [
            "unknown alias 99: not one of the memories shown",
            "DELETE without an explicit request to forget in the input",
        ]
        assert result.episodes[0].status == "done"


# -- choosing the program ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "model", "resolved"),
    [
        ("auto", "ollama_chat/llama3.2", "compact"),
        ("auto", "ollama/qwen2.5:0.5b", "compact"),
        ("auto", "openai/gpt-4o-mini", "fused"),
        ("auto", "anthropic/claude-3-5-haiku", "fused"),
        ("auto", "ollama_chat", "fused"),  # not a model string
        ("auto", "ollamax/llama3.2", "fused"),
        ("fused", "ollama_chat/llama3.2", "fused"),
        ("two_step", "ollama_chat/llama3.2", "two_step"),
        ("compact", "openai/gpt-4o-mini", "compact"),
    ],
)
def test_resolve_write_mode(mode, model, resolved):
    assert resolve_write_mode(mode, model) == resolved


def test_auto_is_the_default():
    assert WriteConfig().mode == "auto"


@pytest.mark.parametrize(
    ("model", "mode"), [("ollama_chat/llama3.2", "compact"), ("openai/gpt-4o-mini", "fused")]
)
def test_auto_runs_compact_for_a_local_ollama_model_and_fused_for_others(db_path, model, mode):
    seen: list[list[str]] = []
    lm = writer_lm(
        lambda turns, existing: [{"action": "ADD", "content": "Ada likes tea."}], model=model, seen=seen
    )
    with Memory(db_path, embedder=HashEmbedder(64), lm=lm) as memory:
        result = memory.add("Ada: I like tea.", user_id="ada")
        assert (result.mode, [op.content for op in result.ops]) == (mode, ["Ada likes tea."])
        queued = memory.add("Ada: I like coffee too.", user_id="ada", background=True)
        assert queued.queued and queued.mode == mode
        assert [r.mode for r in memory.flush()] == [mode]
    assert seen == [COMPACT_INPUTS if mode == "compact" else FUSED_INPUTS] * 2


# -- compiled programs -------------------------------------------------------------------------------


def compiled_compact(folder):
    """A compact program with one demonstration, saved where Memory(programs=folder) looks."""
    program = CompactWriter()
    program.write.demos = [
        dspy.Example(
            turns=[
                {"speaker": "Bob", "text": "I adopted a ferret called Nibbles.", "time": "2024-01-01 10:00"}
            ],
            observed_at="2024-01-01 (Monday)",
            existing_memories=[],
            ops=[CompactOp(action="ADD", content="Bob has a ferret named Nibbles.", subject="Bob")],
        )
    ]
    program.save(str(folder / "write_compact.json"))
    return program


def test_a_compiled_compact_program_round_trips_through_save_and_load(tmp_path):
    saved = compiled_compact(tmp_path)
    loaded = CompactWriter()
    loaded.load(str(tmp_path / "write_compact.json"))
    assert loaded.dump_state() == saved.dump_state()
    assert len(loaded.write.demos) == 1


@pytest.mark.parametrize(("mode", "model"), [("compact", "scripted/lm"), ("auto", "ollama_chat/llama3.2")])
def test_memory_loads_write_compact_json_and_sends_its_demos(tmp_path, mode, model):
    compiled_compact(tmp_path)
    prompts = []

    def responder(call):
        prompts.append(call.prompt)
        return {"ops": [{"action": "ADD", "content": "Ada likes tea."}]}

    lm = scripted_lm(responder, model=model)
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), lm=lm, write={"mode": mode}, programs=tmp_path
    ) as memory:
        assert memory.programs_in_use == {"write_compact": str(tmp_path / "write_compact.json")}
        assert memory.add("Ada: I like tea.", user_id="ada").mode == "compact"
    [prompt] = prompts
    assert "Bob has a ferret named Nibbles." in prompt


def test_a_fused_run_does_not_pick_up_the_compact_program(tmp_path):
    compiled_compact(tmp_path)
    prompts = []

    def responder(call):
        prompts.append(call.prompt)
        return {"ops": []}

    lm = scripted_lm(responder, model="openai/gpt-4o-mini")
    with Memory(
        tmp_path / "m.db", embedder=HashEmbedder(32), lm=lm, write={"mode": "auto"}, programs=tmp_path
    ) as memory:
        assert memory.add("Ada: I like tea.", user_id="ada").mode == "fused"
    assert "Nibbles" not in prompts[0]


def test_local_ollama_models_write_with_the_compact_program_by_default(db_path):
    import dspy_memory
    from dspy_memory.testing import call_for, oracle_responder

    from .fakes import chat_by_signature, ollama_server

    text = "Ada: I moved to Denver on March 1st."
    denver = {
        "content": "Ada lives in Denver.",
        "subject": "Ada",
        "predicate": "lives_in",
        "valid_at": "2024-03-01",
    }
    saved = dspy.cache  # DSPy's cache keys leave out the base URL: every call must reach this server
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    try:
        with ollama_server(chat=chat_by_signature(oracle_responder({text: [denver]}))) as (url, requests):
            models = dspy_memory.local(llm="llama3.2", embed=None, host=url, configure=False)
            with Memory(db_path, lm=models.lm, embedder=HashEmbedder(64)) as memory:
                result = memory.add(text, user_id="ada", at="2024-03-05")
    finally:
        dspy.cache = saved
    assert (result.mode, result.error, [op.content for op in result.ops]) == (
        "compact",
        None,
        [denver["content"]],
    )
    [body] = [request["body"] for request in requests if request["path"] == "/api/chat"]
    # Ollama constrains the answer to the compact operation's schema.
    [op_schema] = body["format"]["$defs"].values()
    assert set(op_schema["properties"]) == COMPACT_KEYS
    call = call_for(body["messages"])
    assert call.input_fields == COMPACT_INPUTS
