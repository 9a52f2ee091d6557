"""The keyword planner of a large scope counts each term in the searched scope: a term that is
absent from it but common elsewhere selects nothing, so the scope's own terms are still ranked.
(The budget is lowered so a few dozen rows take the planner's path; no conversation context, so
a row matches by its own words only.)"""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

pytestmark = pytest.mark.backends

GARDEN = [f"garden note {i}" for i in range(60)]


@pytest.fixture
def memory(db_path):
    retrieval = {"turn_context_before": 0, "turn_context_after": 0}
    with Memory(db_path, embedder=HashEmbedder(64), retrieval=retrieval) as mem:
        mem.store.keywords.score_budget = 20
        yield mem


def keyword_hits(memory, query, **scope):
    return sorted(hit.memory.content for hit in memory.search(query, recipe="keyword", k=100, **scope))


def test_a_term_common_in_other_scopes_but_absent_from_this_one_does_not_hide_its_rows(memory):
    memory.add(GARDEN, user_id="ada", infer=False)
    memory.add([f"orchid {i} bloomed" for i in range(10)], user_id="bob", infer=False)
    memory.add([f"kitchen shelf {i}" for i in range(90)], user_id="bob", infer=False)
    # "orchid" is rarer than "garden" in the whole index, and absent from ada's rows.
    assert keyword_hits(memory, "garden orchid", user_id="ada") == sorted(GARDEN)


def test_term_counts_of_one_scope_are_not_reused_for_another(memory):
    memory.add(GARDEN, user_id="ada", infer=False)
    memory.add([f"orchid {i}" for i in range(3)], user_id="ada", infer=False)
    memory.add([f"orchid {i} bloomed" for i in range(30)], user_id="bob", infer=False)
    memory.add([f"garden {i}" for i in range(3)], user_id="bob", infer=False)
    # The rare term of each scope is the other's common one: bob's counts, read first, would
    # make ada's search rank "garden".
    assert keyword_hits(memory, "garden orchid", user_id="bob") == sorted(f"garden {i}" for i in range(3))
    assert keyword_hits(memory, "garden orchid", user_id="ada") == sorted(f"orchid {i}" for i in range(3))


@pytest.mark.sqlite_only
def test_a_scope_without_a_user_counts_terms_in_that_scope_too(memory):
    memory.add(GARDEN, agent_id="planner", infer=False)
    memory.add([f"orchid {i} bloomed" for i in range(10)], agent_id="critic", infer=False)
    assert keyword_hits(memory, "garden orchid", agent_id="planner") == sorted(GARDEN)


def test_a_term_counted_absent_is_found_as_soon_as_a_row_of_the_scope_holds_it(memory):
    memory.add(GARDEN, user_id="ada", infer=False)
    assert keyword_hits(memory, "orchid", user_id="ada") == []  # counted: absent
    memory.add("orchid on the sill", user_id="ada", infer=False)  # the scope grows by under 10%
    assert keyword_hits(memory, "orchid", user_id="ada") == ["orchid on the sill"]
