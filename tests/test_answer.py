"""memory.answer(): plan (optional), context, answer; the past is asked with as_of."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.read.answer import fuse_rankings
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Hit, MemoryRecord, ScoreDetails

from .test_write_path import HOMES, moves


def test_answer_uses_the_planned_date_and_reports_cost(db_path):
    def reader(call):
        if call.output_fields == ["plan"]:
            asks_past = "February" in call.inputs["question"]
            return {"plan": {"queries": ["Ada home city"], "as_of": "2024-02-15" if asks_past else None}}
        if call.output_fields == ["answer"]:
            memory_part = call.inputs["context"].split("## Recent")[0]
            # The latest statement of where Ada lives: a timeline line ends with the current one.
            found = [
                (memory_part.rfind(f"lives in {c}."), c) for c, _ in HOMES if f"lives in {c}." in memory_part
            ]
            return {"answer": max(found)[1] if found else "No information available"}
        return moves_ops(call)

    def moves_ops(call):
        return {"ops": moves(call.inputs["turns"], call.inputs["existing_memories"])}

    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(reader)) as memory:
        for city, day in HOMES:
            memory.add(
                {"role": "user", "name": "Ada", "content": f"Ada here: I live in {city} now."},
                user_id="ada",
                at=day,
            )
        past = memory.answer(
            "Where did Ada live in February 2024?", user_id="ada", rewrite=True, today="2024-10-01"
        )
        assert past.answer == "Boston" and past.as_of.startswith("2024-02-15")
        assert past.queries == ["Ada home city"] and past.usage.lm_calls == 2
        now = memory.answer("Where does Ada live?", user_id="ada")
        assert now.answer == "Austin" and now.usage.lm_calls == 1 and now.context.tokens <= 1500


# Each planned query has one fact that only it finds (a word no other query or distractor has).
PLANNED = ["passport renewal", "yellow fever vaccination", "travel adapter plug"]
EVIDENCE = {
    "passport renewal": "The passport renewal is booked at the consulate.",
    "yellow fever vaccination": "A yellow fever vaccination certificate is required.",
    "travel adapter plug": "The travel adapter plug was lost in Lisbon.",
}
TRIP_QUESTION = "What must Ada sort out before her Kenya trip?"


def _trip_reader(searched_contexts):
    def reader(call):
        if call.output_fields == ["ops"]:
            return {"ops": [{"action": "ADD", "content": turn["text"]} for turn in call.inputs["turns"]]}
        if call.output_fields == ["plan"]:
            return {"plan": {"queries": PLANNED, "as_of": None}}
        searched_contexts.append(call.inputs["context"])
        return {"answer": "see context"}

    return reader


def _facts_in(context):
    """The fact lines of a context (recent episodes are in every context, relevant or not)."""
    return "\n".join(item.text for item in context.included if item.section == "facts")


def test_answer_searches_every_planned_query_and_the_question(db_path, monkeypatch):
    contexts: list[str] = []
    with Memory(db_path, embedder=HashEmbedder(1024), lm=scripted_lm(_trip_reader(contexts))) as memory:
        distractors = [
            f"Ada went {sport} on weekend {i} with cousin {i % 5}."
            for i, sport in enumerate(["hiking", "rowing", "climbing", "skating", "surfing"] * 40)
        ]
        memory.add(list(EVIDENCE.values()), user_id="ada", at="2024-01-01")
        memory.add("Ada's Kenya trip starts on 2024-07-01.", user_id="ada", at="2024-01-02")
        for start in range(0, len(distractors), 20):
            memory.add(distractors[start : start + 20], user_id="ada", at="2024-02-01")
        first = EVIDENCE[PLANNED[0]]
        # The first planned query's evidence is found by it alone: the question and the other
        # queries, searched together or apart, do not bring it into a context.
        for text in [TRIP_QUESTION, " ".join([TRIP_QUESTION, *PLANNED[1:]]), *PLANNED[1:]]:
            assert first not in _facts_in(memory.context(text, user_id="ada")), text
        assert first in _facts_in(memory.context(PLANNED[0], user_id="ada"))

        searched: list[str] = []
        search_at = memory._retriever.search_at

        def spy(query, scope, **options):
            searched.append(query)
            return search_at(query, scope, **options)

        monkeypatch.setattr(memory._retriever, "search_at", spy)
        result = memory.answer(TRIP_QUESTION, user_id="ada", rewrite=True, today="2024-04-01")

    assert result.queries == PLANNED and result.usage.lm_calls == 2
    assert contexts == [result.context.text]
    for query, fact in EVIDENCE.items():
        assert fact in _facts_in(result.context), query
    assert "Ada's Kenya trip starts on 2024-07-01." in _facts_in(result.context)
    # Each query is its own search (the facts search and the procedures search), not one string.
    assert set(searched) == {TRIP_QUESTION, *PLANNED}
    assert all(searched.count(text) == 2 for text in [TRIP_QUESTION, *PLANNED])


def _hit(memory_id: str, score: float) -> Hit:
    record = MemoryRecord.model_validate(
        {"id": memory_id, "content": memory_id, "content_hash": memory_id, "created_at": "2024-01-01"}
    )
    return Hit(memory=record, score=score, details=ScoreDetails(final=score))


def test_fusion_ranks_by_reciprocal_rank_and_keeps_each_memorys_best_hit():
    # rrf_k = 10, a rank r adds 11 / (10 + r):
    #   a: rank 1 in the first search                     -> 11/11         = 1.0
    #   b: rank 2 in both searches                        -> 11/12 + 11/12 = 1.833
    #   c: rank 1 in the second search                    -> 11/11         = 1.0 (ties a; c's
    #      score 0.8 > a's 0.5 decides)
    #   d: rank 3 in the first search                     -> 11/13         = 0.846
    first = [_hit("a", 0.5), _hit("b", 0.4), _hit("d", 0.2)]
    second = [_hit("c", 0.8), _hit("b", 0.6)]
    fused = fuse_rankings([first, second], rrf_k=10)
    assert [hit.id for hit in fused] == ["b", "c", "a", "d"]
    # Ordered by search score instead, c (0.8) would lead; each memory keeps its best hit.
    assert [hit.score for hit in fused] == [0.6, 0.8, 0.5, 0.2]
