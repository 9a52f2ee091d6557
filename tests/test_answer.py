"""memory.answer(): plan (optional), context, answer; the past is asked with as_of."""

from __future__ import annotations

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm

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
