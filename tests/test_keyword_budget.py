"""Keyword search on scopes larger than the score budget picks the same terms on both backends:
rarest first while the rows they match fit the budget, all terms when even the rarest is
common; small scopes match every term. (The budget is lowered so a few dozen rows exercise it;
no conversation context, so a row matches by its own words only.)"""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

pytestmark = pytest.mark.backends


@pytest.fixture
def memory(db_path):
    retrieval = {"turn_context_before": 0, "turn_context_after": 0}
    with Memory(db_path, embedder=HashEmbedder(64), retrieval=retrieval) as mem:
        mem.store.keywords.score_budget = 20
        yield mem


def keyword_hits(memory, query, user="ada"):
    return sorted(hit.memory.content for hit in memory.search(query, user_id=user, recipe="keyword", k=50))


def test_common_terms_stop_selecting_rows_on_a_large_scope(memory):
    memory.add([f"garden note {i}" for i in range(40)], user_id="ada", infer=False)
    memory.add([f"orchid {i} bloomed" for i in range(4)], user_id="ada", infer=False)
    # "garden" matches 40 rows, over the budget: only the rare "orchid" selects rows.
    assert keyword_hits(memory, "garden orchid") == sorted(f"orchid {i} bloomed" for i in range(4))


def test_every_term_is_required_when_even_the_rarest_is_common(memory):
    memory.add([f"garden note {i}" for i in range(25)], user_id="ada", infer=False)
    memory.add([f"garden plan {i}" for i in range(25)], user_id="ada", infer=False)
    memory.add([f"note book {i}" for i in range(25)], user_id="ada", infer=False)
    hits = keyword_hits(memory, "garden note")
    assert hits == sorted(f"garden note {i}" for i in range(25))


def test_a_small_scope_matches_any_term_and_sees_only_its_rows(memory):
    memory.add([f"garden note {i}" for i in range(60)], user_id="bob", infer=False)
    memory.add(["garden gate", "orchid pot", "kitchen shelf"], user_id="ada", infer=False)
    assert keyword_hits(memory, "garden orchid") == ["garden gate", "orchid pot"]


def test_term_counts_are_forgotten_when_memories_are_erased(memory):
    memory.add([f"garden note {i}" for i in range(40)], user_id="ada", infer=False)
    keyword_hits(memory, "garden orchid")
    assert memory.store.keywords._frequencies_cache
    memory.delete_scope(user_id="ada")
    assert not memory.store.keywords._frequencies_cache
    assert keyword_hits(memory, "garden") == []
