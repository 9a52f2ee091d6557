"""The memory graph: `memory.graph(...)` around an entity, a memory or a whole scope, its exports
(node-link JSON, Graphviz DOT, networkx, PNG), and graph-expanded search (recipe "graph")."""

from __future__ import annotations

import json

import networkx
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError

from .scripted import alias_of, fused_lm

pytestmark = pytest.mark.backends

FACTS = {
    "Ada moved to Boston.": ("Ada lives in Boston.", "Ada", "lives_in", "Boston", "2024-01-10"),
    "Ada moved to Denver.": ("Ada lives in Denver.", "Ada", "lives_in", "Denver", "2024-03-08"),
    "Ada's sister is Beth.": ("Ada's sister is Beth.", "Ada", "sister", "Beth", "2024-03-09"),
    "Beth's home town": ('Beth calls "Lyon" home \\ since 2019.', "Beth", "home_town", "Lyon", "2024-03-10"),
}


def decide(turns, existing):
    ops = []
    for turn in turns:
        content, subject, predicate, obj, day = FACTS[turn["text"]]
        op = {"content": content, "subject": subject, "predicate": predicate, "object": obj, "valid_at": day}
        home = alias_of(existing, "Ada lives in") if predicate == "lives_in" else None
        ops.append(
            {"action": "INVALIDATE", "target": home, "reason": "moved", **op}
            if home
            else {"action": "ADD", **op}
        )
    return ops


@pytest.fixture
def family(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide)) as memory:
        for text, (*_, day) in FACTS.items():
            memory.add(text, user_id="ada", at=day)
        memory.add("Ada moved to Boston.", user_id="bob", at="2024-01-10")  # another user's graph
        yield memory


def by_content(graph):
    return {memory.content: memory for memory in graph.memories}


def test_an_entitys_graph_holds_its_memories_their_other_ends_and_replacements(family):
    graph = family.graph("ada", user_id="ada")
    assert sorted(entity.name for entity in graph.entities) == ["Ada", "Beth", "Boston", "Denver"]
    memories = by_content(graph)
    assert sorted(memories) == ["Ada lives in Boston.", "Ada lives in Denver.", "Ada's sister is Beth."]
    assert memories["Ada lives in Boston."].status == "superseded"
    ids = {entity.name: entity.id for entity in graph.entities}
    boston, denver = memories["Ada lives in Boston."].id, memories["Ada lives in Denver."].id
    links = {(link.source, link.target, link.type, link.label) for link in graph.links}
    assert (boston, ids["Ada"], "subject", "lives_in") in links
    assert (boston, ids["Boston"], "object", None) in links
    assert (boston, denver, "replaced_by", None) in links
    assert len(links) == 7  # three memories, a subject and an object each, one replacement


def test_depth_follows_the_other_ends_and_a_memory_id_starts_from_its_entities(family):
    one_hop = family.graph("Beth", user_id="ada")
    assert sorted(by_content(one_hop)) == ["Ada's sister is Beth.", 'Beth calls "Lyon" home \\ since 2019.']
    two_hops = family.graph("Beth", user_id="ada", depth=2)
    assert len(two_hops.memories) == 4
    sister = by_content(one_hop)["Ada's sister is Beth."]
    around = family.graph(memory_id=sister.id, user_id="ada")
    assert sorted(entity.name for entity in around.entities) == ["Ada", "Beth", "Boston", "Denver", "Lyon"]
    assert len(around.memories) == 4
    assert len(family.graph(user_id="ada").memories) == 4  # the whole scope
    assert len(family.graph(user_id="ada", limit=2).memories) == 2


def test_scopes_are_walls_for_the_graph(family):
    bobs = family.graph("Ada", user_id="bob")
    assert [memory.content for memory in bobs.memories] == ["Ada lives in Boston."]
    assert {memory.user_id for memory in bobs.memories} == {"bob"}
    assert {entity.user_id for entity in bobs.entities} == {"bob"}
    assert family.graph("Beth", user_id="bob").memories == []
    assert family.graph(user_id="carol").entities == []


def test_json_export_is_node_link_data_networkx_reads(family):
    graph = family.graph(user_id="ada")
    data = json.loads(json.dumps(graph.to_json()))
    assert {node["node_type"] for node in data["nodes"]} == {"entity", "memory"}
    assert len(data["nodes"]) == len(graph.entities) + len(graph.memories) == 9
    memory_node = next(node for node in data["nodes"] if node.get("content") == "Ada's sister is Beth.")
    assert memory_node["valid_at"].startswith("2024-03-09") and memory_node["status"] == "current"
    assert {tuple(sorted(link)) for link in data["links"]} == {("label", "source", "target", "type")}
    nx_graph = networkx.node_link_graph(data, edges="links")
    assert nx_graph.number_of_nodes() == 9 and nx_graph.number_of_edges() == len(graph.links) == 9
    assert networkx.is_weakly_connected(graph.to_networkx())


def test_dot_export_quotes_any_text_and_marks_old_versions(family):
    dot = family.graph(user_id="ada").to_dot()
    assert dot.startswith("digraph memory {")
    # Quotes and backslashes in a memory's text cannot end the label or start an escape.
    assert 'label="Beth calls \\"Lyon\\" home \\\\ since 2019.' in dot
    start = dot.index("Ada lives in Boston.")
    boston = dot[start : dot.index("]", start)]  # the node's attributes (its label has two lines)
    assert "shape=box" in boston and "style=dashed" in boston
    lines = dot.splitlines()
    assert any("label=lives_in" in line and "->" in line for line in lines)
    assert any("label=replaced_by" in line for line in lines)
    assert dot.count("->") == 9


def test_draw_writes_a_png(family, tmp_path):
    path = family.graph("Ada", user_id="ada").draw(tmp_path / "graph.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"entity": "Ada", "memory_id": "x"}, "not both"),
        ({"depth": 0}, "depth must be an integer from 1 to 3"),
        ({"depth": 4}, "depth must be an integer from 1 to 3"),
        ({"limit": 0}, "limit must be an integer"),
        ({"memory_id": 5}, "memory_id"),
    ],
)
def test_bad_graph_arguments_are_refused(family, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        family.graph(user_id="ada", **kwargs)


def test_graph_search_reaches_a_memory_through_a_shared_entity(db_path):
    """ "Where does Ada's sister live?": the sister fact is found by its words; the hometown fact
    shares none with the question and is reached through Beth, the entity both name."""
    facts = dict(FACTS)
    for index in range(40):  # other people's facts, so that words alone do not reach Lyon
        facts[f"note {index}"] = (
            f"Person{index} enjoys hobby{index}.",
            f"Person{index}",
            "enjoys",
            f"Hobby{index}",
            "2024-02-01",
        )

    def decide_all(turns, existing):
        return [
            {"action": "ADD", "content": c, "subject": s, "predicate": p, "object": o, "valid_at": d}
            for c, s, p, o, d in (facts[turn["text"]] for turn in turns)
        ]

    # A weight for two-hop questions (the default, tuned on LoCoMo, is lower; see docs/retrieval.md).
    # Hybrid without the graph stage, to compare with the graph recipe.
    retrieval = {"graph_weight": 1.0, "graph_in_hybrid": False}
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide_all), retrieval=retrieval) as memory:
        memory.add([{"role": "user", "content": text} for text in facts], user_id="ada", at="2024-03-10")
        question = "Where does Ada's sister live?"
        hybrid = [hit.content for hit in memory.search(question, user_id="ada", k=5)]
        hits = memory.search(question, user_id="ada", k=5, recipe="graph")
        assert "Ada's sister is Beth." in hybrid and not any("Lyon" in text for text in hybrid)
        lyon = next(hit for hit in hits if "Lyon" in hit.content)
        assert lyon.details.graph > 0 and lyon.details.keyword_rank is None
        assert all(hit.details.graph == 0 for hit in memory.search(question, user_id="ada", k=5))
        # "Ada" names three of the 44 memories, more than graph_max_share (5%): no link through her.
        assert not any("Boston" in hit.content and hit.details.graph > 0 for hit in hits)
        # Expansion obeys the search's filters.
        assert memory.search(question, user_id="ada", k=5, recipe="graph", kinds=["preference"]) == []
        assert not any(
            "Lyon" in hit.content
            for hit in memory.search(question, user_id="ada", k=5, recipe="graph", as_of="2024-03-09")
        )
        # By default the hybrid recipe runs the graph stage too.
        with Memory(memory.config, retrieval={"graph_weight": 1.0}) as default:
            assert any(
                "Lyon" in hit.content and hit.details.graph > 0
                for hit in default.search(question, user_id="ada", k=5)
            )
        # Off the scope's wall: another user's memories are never reached.
        memory.add("Beth's home town", user_id="bob", at="2024-03-10")
        assert {
            hit.memory.user_id for hit in memory.search(question, user_id="ada", k=10, recipe="graph")
        } == {"ada"}
