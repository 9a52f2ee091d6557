"""Context assembly: priority order, token budget, conflicts, timelines, the report."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from dspy_memory.util.tokens import count_tokens

from .scripted import fused_lm

pytestmark = pytest.mark.backends

TOPICS = ["hiking", "chess", "jazz", "pottery", "sailing", "baking", "cycling", "poetry", "tennis", "origami"]


def facts_from_lines(turns, existing):
    """Each turn is "subject|predicate|object|content|valid_at|confidence"."""
    ops = []
    for turn in turns:
        subject, predicate, obj, content, valid_at, confidence = turn["text"].split("|")
        ops.append(
            {
                "action": "ADD",
                "content": content,
                "subject": subject,
                "predicate": predicate,
                "object": obj,
                "valid_at": valid_at,
                "confidence": float(confidence),
            }
        )
    return ops


@pytest.fixture
def rich(db_path):
    """200 memories of Ada's, two of which conflict, one that changed, and core blocks."""
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(facts_from_lines)) as memory:
        lines = [
            f"Ada|likes|{TOPICS[i % 10]}|Ada enjoyed {TOPICS[i % 10]} session number {i} with friend {i % 7}.|2024-01-{1 + i % 28:02d}|1.0"
            for i in range(196)
        ]
        for start in range(0, len(lines), 20):
            memory.add(lines[start : start + 20], user_id="ada", at="2024-02-01")
        # A sloppy LM added both cities as current: a conflict to quarantine.
        memory.add("Ada|lives_in|Denver|Ada lives in Denver.|2024-03-01|1.0", user_id="ada", at="2024-03-01")
        memory.add("Ada|lives_in|Austin|Ada lives in Austin.|2024-06-01|0.4", user_id="ada", at="2024-06-01")
        memory.add("Ada|works_at|Boston General|Ada works at Boston General.|2024-01-01|1.0", user_id="ada")
        memory.blocks.set(
            "persona", "You are Ada's travel assistant. Be brief.", user_id="ada", read_only=True
        )
        memory.blocks.set("human", "Ada, nurse, allergic to peanuts.", user_id="ada")
        assert len(memory.get_all(user_id="ada", limit=1000)) == 199
        yield memory


def test_a_500_token_context_over_200_memories(rich):
    context = rich.context("Where does Ada live? Ada lives in", user_id="ada", budget_tokens=500)
    assert context.tokens <= 500 and count_tokens(context.text) == context.tokens
    assert context.tokenizer == "cl100k_base"
    # Blocks first, in full.
    assert context.text.startswith("## Core memory\n<persona>\nYou are Ada's travel assistant.")
    assert [item.section for item in context.included[:2]] == ["blocks", "blocks"]
    # The two current cities are quarantined together, with dates and sources, low confidence marked.
    conflicts = context.text.split("## Conflicting information")[1].split("\n## ")[0]
    assert "Ada lives in Denver. [since 2024-03-01; Ada|lives_in" not in conflicts  # sources are speakers
    assert "Ada lives in Denver. [since 2024-03-01; from a text of 2024-03-01]" in conflicts
    assert (
        "Ada lives in Austin. [since 2024-06-01; from a text of 2024-06-01; low confidence 0.4]" in conflicts
    )
    facts = context.text.split("## Relevant facts (current)")[1].split("\n## ")[0]
    assert "lives in" not in facts
    # The report accounts for everything: what went in, what was dropped and why.
    assert context.dropped and {item.reason for item in context.dropped} <= {
        "over the token budget",
        "below relevance floor",
    }
    assert any(
        item.section == "episodes" and item.reason == "over the token budget" for item in context.dropped
    )
    included_tokens = sum(item.tokens for item in context.included)
    assert included_tokens < context.tokens <= 500


def test_sections_come_in_priority_order_with_room(rich):
    context = rich.context("Where does Ada live?", user_id="ada", budget_tokens=4000)
    order = [item.section for item in context.included]
    headings = [line for line in context.text.splitlines() if line.startswith("## ")]
    assert [h.split(" (")[0] for h in headings] == [
        "## Core memory",
        "## Relevant facts",
        "## Conflicting information",
        "## Recent conversation",
    ]
    ranks = {
        section: i
        for i, section in enumerate(
            ["blocks", "profile", "facts", "conflicts", "timelines", "episodes", "procedures"]
        )
    }
    # Budget priority: blocks, then facts and conflicts by relevance, then the rest.
    assert order[:2] == ["blocks", "blocks"] and order[-1] == "episodes"
    assert set(ranks) >= set(order)
    assert "## Recent conversation" in context.text and "episodes" in order


def test_timelines_show_what_changed(db_path):
    def moves(turns, existing):
        text = turns[-1]["text"]
        if "Denver" in text:
            return [
                {
                    "action": "INVALIDATE",
                    "target": existing[0]["alias"],
                    "content": "Ada lives in Denver.",
                    "subject": "Ada",
                    "predicate": "lives_in",
                    "object": "Denver",
                    "valid_at": "2024-03-08",
                }
            ]
        return [
            {
                "action": "ADD",
                "content": "Ada lives in Boston.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Boston",
                "valid_at": "2024-01-10",
            }
        ]

    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        memory.add("Ada: I live in Boston", user_id="ada", at="2024-01-10")
        memory.add("Ada: I live in Denver now", user_id="ada", at="2024-03-15")
        context = memory.context("where does Ada live", user_id="ada", budget_tokens=300)
        assert (
            "- until 2024-03-08: Ada lives in Boston. (true since 2024-01-10); since 2024-03-08: Ada lives in Denver."
            in context.text
        )
        past = memory.context("where does Ada live", user_id="ada", budget_tokens=300, as_of="2024-02-01")
        assert "Ada lives in Boston." in past.text and "Denver" not in past.text.split("## Recent")[0]


def test_overflow_is_compressed_by_the_lm_when_asked(rich):
    def summarize(call):
        assert call.output_fields == ["summary"] and call.inputs["memories"]
        return {"summary": f"Ada also did {len(call.inputs['memories'])} other things. " + "word " * 400}

    rich._lm = scripted_lm(summarize)
    context = rich.context("hobbies", user_id="ada", budget_tokens=350, compress=True)
    assert context.tokens <= 350
    assert context.included[-1].section == "summary" and "## More memories, summarized" in context.text
    plain = rich.context("hobbies", user_id="ada", budget_tokens=350)
    assert "summarized" not in plain.text


def test_bad_budgets_are_refused(memory):
    for budget in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="budget_tokens"):
            memory.context("x", user_id="ada", budget_tokens=budget)
