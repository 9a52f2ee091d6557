"""Which memories a request to forget can delete: the request must be recognised however it is
typed, and it reaches only the memories it names (not every memory sharing a stray letter)."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .scripted import fused_lm

pytestmark = pytest.mark.backends

FAMILY = [
    ("Carmen's brother is Kenji.", "brother", "Kenji"),
    ("Carmen's sister is Dagny.", "sister", "Dagny"),
    ("Carmen's phone number is 555-0142.", "phone", "555-0142"),
]


def delete_everything_asked(turns, existing):
    """An LM that proposes deleting every memory shown whenever someone asks to forget; the
    write path must narrow that to what the request names."""
    if "Carmen" not in turns[-1]["text"] or len(existing) < len(FAMILY):
        return [
            {"action": "ADD", "content": content, "subject": "Carmen", "predicate": predicate, "object": obj}
            for content, predicate, obj in FAMILY
        ]
    return [{"action": "DELETE", "target": memory["alias"]} for memory in existing]


@pytest.fixture
def family(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(delete_everything_asked)) as memory:
        memory.add("Carmen: my brother is Kenji, my sister Dagny, my number 555-0142.", user_id="c")
        assert len(memory.get_all(user_id="c")) == 3
        yield memory


def remaining(memory):
    return sorted(m.content for m in memory.get_all(user_id="c") if m.kind != "turn")


def test_a_possessive_s_does_not_make_every_memory_deletable(family):
    family.add("Carmen: You can forget about my brother Kenji; that's fine.", user_id="c")
    assert remaining(family) == ["Carmen's phone number is 555-0142.", "Carmen's sister is Dagny."]


@pytest.mark.parametrize(
    "request_text",
    [
        "Carmen: Don\u2019t keep my phone number 555-0142 anymore.",  # a phone's curly apostrophe
        "Carmen: Please do not store my phone number 555-0142.",
        "Carmen: do not remember my phone number 555-0142",
    ],
)
def test_requests_to_forget_are_recognised_however_they_are_typed(family, request_text):
    family.add(request_text, user_id="c")
    assert remaining(family) == ["Carmen's brother is Kenji.", "Carmen's sister is Dagny."]
