"""Scopes are walls (docs/scopes.md): two users share an agent id, and no call that leaves out
user_id reaches either of them in strict mode (the default); by-id calls need the owning scope
or an explicit all_scopes=True."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import MemoryNotFoundError, ScopeError
from dspy_memory.store.backend import NO_USER
from dspy_memory.types import Scope

from .scripted import fused_lm

pytestmark = [pytest.mark.backends, pytest.mark.encrypted]

RECIPES = ("hybrid", "dense", "keyword")


def seed(memory: Memory) -> dict[str, str]:
    """Ada and Bob both talk to agent "travel"; the agent also keeps one user-less note."""
    ids = {}
    for owner, text in (
        ("ada", "Ada prefers aisle seats on long flights."),
        ("bob", "Bob prefers window seats on long flights."),
        (None, "Agent note: seats on long flights sell out early."),
    ):
        [record] = memory.add(text, user_id=owner, agent_id="travel", infer=False).memories
        ids[owner or "none"] = record.id
    return ids


@pytest.fixture
def shared(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        yield memory, seed(memory)


@pytest.fixture
def wildcard(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), scope_mode="wildcard") as memory:
        yield memory, seed(memory)


def owners(records) -> set[str | None]:
    return {record.user_id for record in records}


# -- reads that leave out user_id ------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_search_without_user_sees_only_user_less_memories(shared, recipe):
    memory, _ = shared
    hits = memory.search("seats on long flights", agent_id="travel", recipe=recipe)
    assert owners(hit.memory for hit in hits) == {None}
    hits = memory.search("seats on long flights", user_id="ada", recipe=recipe)
    assert owners(hit.memory for hit in hits) == {"ada"}  # a user's memories from every agent


def test_get_all_and_context_without_user_see_only_user_less_memories(shared):
    memory, _ = shared
    assert owners(memory.get_all(agent_id="travel")) == {None}
    text = memory.context("seats on long flights", agent_id="travel", budget_tokens=500).text
    assert "Agent note" in text and "Ada" not in text and "Bob" not in text


def test_tools_bound_to_an_agent_do_not_recall_its_users(shared):
    memory, _ = shared
    recall = {tool.name: tool for tool in memory.tools(agent_id="travel")}["recall"]
    answer = recall(query="seats on long flights")
    assert "Agent note" in answer and "Ada" not in answer and "Bob" not in answer


def test_tools_are_exact_even_in_wildcard_mode(wildcard):
    memory, _ = wildcard
    recall = {tool.name: tool for tool in memory.tools(agent_id="travel")}["recall"]
    answer = recall(query="seats on long flights")
    assert "Agent note" in answer and "Ada" not in answer and "Bob" not in answer


def test_wildcard_mode_keeps_omitted_ids_as_wildcards(wildcard):
    memory, ids = wildcard
    for recipe in RECIPES:
        hits = memory.search("seats on long flights", agent_id="travel", recipe=recipe)
        assert owners(hit.memory for hit in hits) == {"ada", "bob", None}
    assert owners(memory.get_all(agent_id="travel")) == {"ada", "bob", None}
    assert memory.get(ids["ada"]).user_id == "ada"
    assert [event.event for event in memory.history(ids["bob"])] == ["ADD"]


def test_blocks_and_delete_scope_without_user_stay_user_less(shared):
    memory, ids = shared
    memory.blocks.set("human", "Name: Ada", user_id="ada", agent_id="travel")
    memory.blocks.set("persona", "A travel agent", agent_id="travel")
    assert [block.label for block in memory.blocks.list(agent_id="travel")] == ["persona"]
    memory.delete_scope(agent_id="travel")
    assert memory.get(ids["ada"], user_id="ada").content.startswith("Ada prefers")
    assert memory.get(ids["bob"], user_id="bob") is not None
    assert memory.get(ids["none"], agent_id="travel") is None
    assert [block.label for block in memory.blocks.list(user_id="ada")] == ["human"]


# -- by id -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "history", "update", "delete"])
def test_by_id_without_a_scope_is_refused_in_strict_mode(shared, method):
    memory, ids = shared
    args = (ids["ada"], "Ada prefers window seats.") if method == "update" else (ids["ada"],)
    with pytest.raises(
        ScopeError, match=rf"{method}\(\) needs the scope that owns the memory.*all_scopes=True"
    ):
        getattr(memory, method)(*args)
    assert memory.get(ids["ada"], user_id="ada").version == 1  # nothing changed


def test_by_id_with_the_owning_scope_or_all_scopes(shared):
    memory, ids = shared
    assert memory.get(ids["ada"], user_id="bob") is None
    assert memory.get(ids["ada"], agent_id="travel") is None  # no user named: user-less only
    assert memory.history(ids["ada"], user_id="bob") == []
    with pytest.raises(MemoryNotFoundError):
        memory.update(ids["ada"], "Ada prefers window seats.", user_id="bob")
    with pytest.raises(MemoryNotFoundError):
        memory.delete(ids["ada"], agent_id="travel")
    assert memory.get(ids["ada"], user_id="ada", agent_id="travel").user_id == "ada"
    assert memory.get(ids["none"], agent_id="travel").user_id is None

    assert memory.get(ids["bob"], all_scopes=True).user_id == "bob"
    updated = memory.update(ids["bob"], "Bob prefers aisle seats.", all_scopes=True)
    assert updated.version == 2 and updated.user_id == "bob"
    assert [event.event for event in memory.history(ids["bob"], all_scopes=True)] == ["ADD", "UPDATE"]
    memory.delete(ids["bob"], all_scopes=True)
    assert memory.get(ids["bob"], all_scopes=True) is None


def test_all_scopes_with_a_scope_is_refused(shared):
    memory, ids = shared
    with pytest.raises(ScopeError, match="all_scopes"):
        memory.get(ids["ada"], user_id="ada", all_scopes=True)


def test_wildcard_mode_by_id_without_a_scope(wildcard):
    memory, ids = wildcard
    memory.update(ids["ada"], "Ada prefers window seats.")
    assert memory.get(ids["ada"]).version == 2
    memory.delete(ids["ada"])
    assert memory.get(ids["ada"]) is None


# -- the write path --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["strict", "wildcard"])
def test_an_lm_add_without_user_is_shown_only_user_less_memories(db_path, mode):
    shown: list[list[str]] = []

    def decide(turns, existing):
        text = turns[-1]["text"]
        if "changed" not in text:
            return [{"action": "ADD", "content": text.split(": ", 1)[-1], "kind": "preference"}]
        shown.append([memory["content"] for memory in existing])
        return [
            {"action": "UPDATE", "target": memory["alias"], "content": memory["content"] + " Confirmed."}
            for memory in existing
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide), scope_mode=mode) as memory:
        memory.add("Ada: Ada prefers aisle seats on flights.", user_id="ada", agent_id="travel")
        memory.add("Bob: Bob prefers aisle seats on flights.", user_id="bob", agent_id="travel")
        memory.add("Note: the team prefers aisle seats on flights.", agent_id="travel")
        memory.add("Note: seat preferences changed: aisle seats on flights.", agent_id="travel")
        assert shown == [["the team prefers aisle seats on flights."]]
        for user in ("ada", "bob"):
            [record] = memory.get_all(user_id=user)
            assert record.version == 1 and "Confirmed" not in record.content


# -- the store ---------------------------------------------------------------------------------


def test_scope_any_user_is_explicit_and_not_dumped():
    assert Scope.of(None, "travel").any_user is False
    assert Scope.of(None, "travel", any_user=True).any_user is True
    assert Scope.of("ada", "travel").model_dump() == {"user_id": "ada", "agent_id": "travel", "run_id": None}


def test_vector_partition_counts_include_the_user_less_partition(shared):
    memory, _ = shared
    with memory.store.snapshot() as conn:
        assert memory.store.vectors.sizes(conn, NO_USER)[1] == 1
        assert memory.store.vectors.sizes(conn, "ada")[1] == 1
        assert memory.store.vectors.sizes(conn, None) == (3, 3)


# -- the command line --------------------------------------------------------------------------


def test_cli_by_id_needs_a_scope_or_all_scopes(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    base = ["--db", db, "--embedder", "test"]
    assert main(["add", "I moved to Denver.", "--user", "ada", "--agent", "travel", *base]) == 0
    memory_id = capsys.readouterr().out.split()[0]
    for command in (
        ["get", memory_id],
        ["history", memory_id],
        ["update", memory_id, "Boulder"],
        ["delete", memory_id],
    ):
        assert main([*command, *base]) == 2
        assert "needs the scope that owns the memory" in capsys.readouterr().err
        assert main([*command, "--agent", "travel", *base]) in (1, 2)  # user-less only: not found
        capsys.readouterr()
    assert main(["get", memory_id, "--all-scopes", "--json", *base]) == 0
    assert '"user_id": "ada"' in capsys.readouterr().out
    assert main(["update", memory_id, "I moved to Boulder.", "--user", "ada", *base]) == 0
    assert main(["delete", memory_id, "--all-scopes", *base]) == 0
    capsys.readouterr()
    assert main(["get", memory_id, "--user", "ada", *base]) == 1
