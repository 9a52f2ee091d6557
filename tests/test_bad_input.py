"""Bad input, tried systematically (`bad_input_catalogue`): every entry point, fed wrong types,
odd text, extreme numbers and dates, either accepts the input (storing exactly what was given)
or refuses it with a `DSPyMemoryError`; a refusal leaves nothing behind, and the file stays
consistent and readable throughout. Each case's outcome is the one committed in
tests/data/bad_input_expected.json (`bad_input_expected`), per backend."""

from __future__ import annotations

import json

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError
from dspy_memory.read.retrieval import RECIPES

from .bad_input_catalogue import CASES, Env, run_catalogue
from .bad_input_expected import BACKENDS, COMMAND, EXPECTED, differences, expected
from .bad_values import GOOD_TEXT, METADATA_GOOD

pytestmark = pytest.mark.backends


def test_the_catalogue_is_large_and_covers_every_entry_point():
    assert len(CASES) >= 250
    assert len({case.name for case in CASES}) == len(CASES)
    for prefix in ("add ", "update ", "search ", "context ", "blocks.", "tool ", "get_all "):
        assert sum(case.name.startswith(prefix) for case in CASES) >= 10, prefix
    for backend in BACKENDS:  # every case has its expected outcome, and only the catalogue's cases
        assert set(expected(backend)) == {case.name for case in CASES}, backend


def test_a_changed_missing_or_extra_outcome_is_a_difference():
    wanted = {"a": "accepted", "b": "refused:InvalidInputError", "c": "accepted"}
    got = {"a": "refused:ScopeError", "b": "refused:InvalidInputError", "d": "accepted"}
    assert differences(got, wanted) == [
        "'a': expected accepted, got refused:ScopeError",
        "'d': a case with no expected outcome (got accepted)",
        "'c': expected accepted, but the catalogue has no such case",
    ]
    assert differences(wanted, wanted) == []


def test_bad_input_is_refused_clearly_and_nothing_is_half_stored(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        outcomes, problems = run_catalogue(memory)
        crashes = {name: outcome for name, outcome in outcomes.items() if outcome.startswith("crash")}
        assert not crashes, "\n".join(f"{name}: {outcome}" for name, outcome in crashes.items())
        assert not problems, "\n".join(problems)
        changed = differences(outcomes, expected(memory.store.backend_name))
        assert not changed, (
            f"{len(changed)} outcomes are not those in {EXPECTED.relative_to(EXPECTED.parents[2])} "
            f"(a deliberate change: `{COMMAND}`, then review the diff):\n" + "\n".join(changed)
        )
        # The file opens again and replays nothing it cannot read.
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        assert memory.search("tea", user_id="ada")


@pytest.mark.parametrize(
    "name",
    [
        "add text lone-high-surrogate",
        "add metadata nan",
        "add metadata int-key",
        "add at 1e20",
        "add at max-minus-1h",
        "search filters 2**70",
        "search hybrid query lone-high-surrogate",
        "context query split-pair",
        "blocks.set value lone-low-surrogate",
        "add user_id surrogate",
    ],
)
def test_the_reported_inputs_get_their_decision(db_path, name):
    """The bug report's examples, one by one: refused with InvalidInputError (a ValueError and
    a TypeError too), except search queries, which are searched with the bad character replaced."""
    case = next(case for case in CASES if case.name == name)
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        env = Env(memory)
        if " query " in name:
            case.call(env)
            return
        with pytest.raises(InvalidInputError) as info:
            case.call(env)
        assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def refuses_nul(add, memory):
    """PostgreSQL text cannot hold U+0000: refused as bad input, and nothing is stored."""
    with pytest.raises(InvalidInputError, match="U\\+0000"):
        add()
    assert memory.stats()["tables"]["episodes"] == 0 and memory.get_all(user_id="ada") == []


@pytest.mark.parametrize("label", [label for label in GOOD_TEXT if label != "huge"])
def test_accepted_text_is_stored_exactly_as_given(memory, label):
    text = GOOD_TEXT[label]
    if "\x00" in text and memory.store.backend_name == "postgres":
        refuses_nul(
            lambda: memory.add({"role": "user", "content": text, "name": "Ada"}, user_id="ada"), memory
        )
        return
    result = memory.add({"role": "user", "content": text, "name": "Ada"}, user_id="ada")
    (episode,) = memory.store.episodes.get_many([e.id for e in result.episodes])
    assert episode.content == text
    (record,) = result.memories
    assert memory.get(record.id, user_id="ada").content == f"Ada: {text}"
    updated = memory.update(record.id, text + "!", user_id="ada")
    assert memory.get(updated.id, user_id="ada").content == text + "!"
    assert memory.blocks.set("human", text, user_id="ada").value == text


@pytest.mark.parametrize("label", list(METADATA_GOOD))
def test_accepted_metadata_round_trips(memory, label):
    metadata = METADATA_GOOD[label]
    if "\\u0000" in json.dumps(metadata) and memory.store.backend_name == "postgres":
        refuses_nul(lambda: memory.add("metadata case", user_id="ada", metadata=metadata), memory)
        return
    result = memory.add("metadata case", user_id="ada", metadata=metadata)
    expected = json.loads(json.dumps(metadata))  # tuples read back as lists
    assert result.episodes[0].metadata == expected
    assert memory.get(result.memories[0].id, user_id="ada").metadata == expected


def test_a_query_with_a_lone_surrogate_is_searched_with_it_replaced(memory):
    memory.add("Ada's favourite tea is Earl Grey.", user_id="ada")
    for recipe in RECIPES:
        if recipe == "rerank":
            continue  # it needs an LM or a model: tests/test_rerank.py searches the same query
        hits = memory.search("favourite tea \ud83d", user_id="ada", recipe=recipe)
        assert hits and hits[0].content == "Ada's favourite tea is Earl Grey."
