"""The LM write path end to end, with scripted LMs: facts that change over time, corrections,
refinements, confirmations, forgetting, and what `add` reports."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .scripted import alias_of, fused_lm

pytestmark = pytest.mark.backends

HOMES = [("Boston", "2024-01-10"), ("Denver", "2024-03-08"), ("Austin", "2024-09-01")]


def moves(turns, existing):
    """Ada says where she lives; a new city invalidates the old one (the world changed)."""
    text = turns[-1]["text"]
    city, day = next((city, day) for city, day in HOMES if city in text)
    op = {
        "content": f"Ada lives in {city}.",
        "subject": "Ada",
        "predicate": "lives in",
        "object": city,
        "valid_at": day,
        "kind": "profile",
    }
    home = alias_of(existing, "Ada lives in")
    if home is None:
        return [{"action": "ADD", **op}]
    return [{"action": "INVALIDATE", "target": home, "reason": "Ada moved", **op}]


@pytest.fixture
def homes(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        for city, day in HOMES:
            result = memory.add(
                {"role": "user", "name": "Ada", "content": f"Ada here: I live in {city} now."},
                user_id="ada",
                at=day,
            )
            assert result.error is None and result.rejected == []
            assert result.usage.lm_calls == 1
        yield memory


def test_home_city_over_three_sessions_answers_as_of_each_date(homes):
    for as_of, city in [("2024-02-01", "Boston"), ("2024-05-01", "Denver"), ("2024-10-01", "Austin")]:
        [top] = homes.search("where does Ada live", user_id="ada", as_of=as_of, k=1)
        assert top.content == f"Ada lives in {city}."
        assert top.memory.status == "current"
    current = homes.search("where does Ada live", user_id="ada")
    assert [hit.content for hit in current] == ["Ada lives in Austin."]
    # Nothing was deleted: all three are still stored, two of them superseded.
    everything = homes.timeline(subject="Ada", predicate="lives_in", user_id="ada")
    assert [(m.object, m.status) for m in everything] == [
        ("Boston", "superseded"),
        ("Denver", "superseded"),
        ("Austin", "current"),
    ]
    boston, denver, austin = everything
    assert boston.invalid_at == denver.valid_at and denver.invalid_at == austin.valid_at
    assert boston.superseded_by == denver.id and denver.superseded_by == austin.id


def test_history_shows_both_transitions(homes):
    boston, denver, _ = homes.timeline(subject="ada", predicate="Lives In", user_id="ada")
    first = homes.history(boston.id, user_id="ada")
    assert [(e.event, e.old_content, e.new_content) for e in first] == [
        ("ADD", None, "Ada lives in Boston."),
        ("INVALIDATE", "Ada lives in Boston.", "Ada lives in Denver."),
    ]
    assert first[1].reason == "Ada moved" and first[1].actor == "lm"
    second = homes.history(denver.id, user_id="ada")
    assert [(e.event, e.new_content) for e in second] == [
        ("ADD", "Ada lives in Denver."),
        ("INVALIDATE", "Ada lives in Austin."),
    ]


def test_graph_lists_current_and_past_edges_with_dates(homes):
    graph = homes.graph("ADA", user_id="ada")
    assert sorted(entity.name for entity in graph.entities) == ["Ada", "Austin", "Boston", "Denver"]
    assert [(edge.predicate, edge.object, edge.valid_at.date().isoformat()) for edge in graph.memories] == [
        ("lives_in", "Boston", "2024-01-10"),
        ("lives_in", "Denver", "2024-03-08"),
        ("lives_in", "Austin", "2024-09-01"),
    ]
    assert homes.graph("Austin", user_id="ada").memories[0].subject == "Ada"
    assert homes.graph("Nobody", user_id="ada").memories == []


def test_known_at_answers_what_was_believed_before_the_last_move(homes):
    austin = homes.timeline(subject="Ada", user_id="ada")[-1]
    before = austin.created_at.timestamp() - 0.001
    [believed] = homes.search("where does Ada live", user_id="ada", known_at=before, k=1)
    assert believed.content == "Ada lives in Denver." and believed.memory.status == "current"


def flips(turns, existing):
    text = turns[-1]["text"]
    if "love sushi" in text:
        return [
            {
                "action": "ADD",
                "content": "Ada loves sushi.",
                "kind": "preference",
                "subject": "Ada",
                "predicate": "likes",
                "object": "sushi",
                "valid_at": "2024-01-05",
            }
        ]
    target = alias_of(existing, "sushi")
    return [
        {
            "action": "INVALIDATE",
            "target": target,
            "content": "Ada no longer likes sushi; she prefers ramen.",
            "kind": "preference",
            "subject": "Ada",
            "predicate": "likes",
            "object": "ramen",
            "valid_at": "2024-06-01",
            "reason": "taste changed",
        }
    ]


def test_a_preference_flip_keeps_the_old_preference_in_the_past(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(flips)) as memory:
        memory.add("Ada: I love sushi, it is my favourite food.", user_id="ada", at="2024-01-05")
        memory.add("Ada: honestly sushi is not for me anymore, ramen is.", user_id="ada", at="2024-06-01")
        now = [hit.content for hit in memory.search("what food does Ada like, sushi?", user_id="ada")]
        assert now == ["Ada no longer likes sushi; she prefers ramen."]
        then = [hit.content for hit in memory.search("sushi", user_id="ada", as_of="2024-03-01")]
        assert then == ["Ada loves sushi."]
        assert [m.kind for m in memory.timeline(subject="Ada", predicate="likes", user_id="ada")] == [
            "preference",
            "preference",
        ]


def city_claims(turns, existing):
    text = turns[-1]["text"]
    if "meant Denver" in text:  # a correction: Boston was never true
        return [
            {
                "action": "INVALIDATE",
                "target": alias_of(existing, "Boston"),
                "correction": True,
                "content": "Ada lives in Denver.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Denver",
                "reason": "misstated",
            }
        ]
    if "moved to Denver" in text:  # a change: Boston was true until the move
        return [
            {
                "action": "INVALIDATE",
                "target": alias_of(existing, "Boston"),
                "content": "Ada lives in Denver.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Denver",
                "valid_at": "2024-03-01",
            }
        ]
    return [
        {
            "action": "ADD",
            "content": "Ada lives in Boston.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Boston",
            "valid_at": "2024-01-01",
        }
    ]


@pytest.mark.parametrize(
    "second", ["Ada: sorry, I meant Denver, not Boston.", "Ada: I moved to Denver, Boston is over."]
)
def test_a_correction_expires_while_a_change_invalidates(db_path, second):
    correction = "meant" in second
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(city_claims)) as memory:
        memory.add("Ada: I live in Boston.", user_id="ada", at="2024-01-01")
        [boston] = memory.get_all(user_id="ada")
        believed_before = memory.get(boston.id, user_id="ada").created_at
        result = memory.add(second, user_id="ada", at="2024-03-01")
        [op] = result.ops
        assert (op.action, op.replaced_id, op.correction) == ("INVALIDATE", boston.id, correction)
        old = memory.get(boston.id, user_id="ada")
        past = [
            hit.content for hit in memory.search("Ada lives Boston Denver", user_id="ada", as_of="2024-02-01")
        ]
        if correction:
            # Never true: gone from every world time, but what we believed then is still on record.
            assert old.status == "expired" and old.invalid_at is None and old.superseded_by == op.memory_id
            assert past == ["Ada lives in Denver."]
            believed = memory.search("Ada lives Boston", user_id="ada", known_at=believed_before)
            assert [hit.content for hit in believed] == ["Ada lives in Boston."]
            assert memory.history(boston.id, user_id="ada")[-1].metadata["correction"] is True
        else:
            assert old.status == "superseded" and old.invalid_at.date().isoformat() == "2024-03-01"
            assert past == ["Ada lives in Boston."]
        now = [hit.content for hit in memory.search("Ada lives Boston Denver", user_id="ada")]
        assert now == ["Ada lives in Denver."]


def people(turns, existing):
    text = turns[-1]["text"]
    if "Madrid" in text:
        # A careless LM points Bob's move at Ada's memory; validation must not let it through.
        return [
            {
                "action": "INVALIDATE",
                "target": alias_of(existing, "Ada lives"),
                "content": "Bob lives in Madrid.",
                "subject": "Bob",
                "predicate": "lives_in",
                "object": "Madrid",
                "valid_at": "2024-05-01",
            }
        ]
    return [
        {
            "action": "ADD",
            "content": "Ada lives in Paris.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Paris",
        },
        {
            "action": "ADD",
            "content": "Bob lives in Rome.",
            "subject": "Bob",
            "predicate": "lives_in",
            "object": "Rome",
        },
    ]


def test_same_predicate_for_different_people_never_conflicts(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(people)) as memory:
        memory.add(
            [{"role": "user", "name": "Ada", "content": "I live in Paris, and my friend Bob lives in Rome."}],
            user_id="ada",
            at="2024-01-01",
        )
        result = memory.add(
            "Ada: Bob lives in Madrid now, Ada lives where she did.", user_id="ada", at="2024-05-01"
        )
        assert [op.action for op in result.ops] == ["ADD"]
        assert "about someone else" in result.rejected[0].reason
        ada = memory.timeline(subject="Ada", predicate="lives_in", user_id="ada")
        bob = memory.timeline(subject="Bob", predicate="lives_in", user_id="ada")
        assert [(m.object, m.status) for m in ada] == [("Paris", "current")]
        assert [(m.object, m.status) for m in bob] == [("Rome", "current"), ("Madrid", "current")]
