"""PostgreSQL ranks keyword hits by BM25 as FTS5 does (store/postgres/keywords.py): a rare term
weighs more than a common one, a term in a raw turn's conversation context weighs
`context_weight` of one in its own text, and the statistics are the searched user's alone, so
no other user's rows move a ranking. Rankings on one scope agree with SQLite's."""

from __future__ import annotations

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

from .pg import fresh_schema

NO_CONTEXT = {"turn_context_before": 0, "turn_context_after": 0}


@pytest.fixture
def pg_url(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return url


def open_memory(path, **retrieval):
    return Memory(path, embedder=HashEmbedder(32), retrieval={**NO_CONTEXT, **retrieval})


def ranking(memory, query, user="ada", k=50):
    return [
        (hit.memory.content, round(hit.details.keyword_score, 9))
        for hit in memory.search(query, user_id=user, recipe="keyword", k=k)
    ]


def test_a_rare_term_outranks_a_common_one(pg_url):
    with open_memory(pg_url) as memory:
        # Every row matches one query term and has three words: only the terms' rarity differs.
        memory.add([f"garden note {i}" for i in range(20)], user_id="ada", infer=False)
        memory.add("orchid pot 7", user_id="ada", infer=False)
        hits = ranking(memory, "garden orchid")
    assert hits[0][0] == "orchid pot 7"
    assert hits[0][1] > 2 * hits[1][1]


def test_a_repeated_term_outranks_a_single_one_of_the_same_length(pg_url):
    with open_memory(pg_url) as memory:
        memory.add(
            ["tulip bulbs planted in spring", "tulip tulip fields near town"], user_id="ada", infer=False
        )
        memory.add([f"filler row {i}" for i in range(10)], user_id="ada", infer=False)
        hits = ranking(memory, "tulip")
    assert [content for content, _ in hits] == [
        "tulip tulip fields near town",
        "tulip bulbs planted in spring",
    ]


def test_a_term_common_in_another_users_scope_does_not_change_this_users_ranking(pg_url):
    """Within Ada's rows "garden" is the rare term; Bob writing it 200 times must not make it
    common for her (FTS5's whole-file statistics would flip her order)."""
    with open_memory(pg_url) as memory:
        memory.add(["garden shed", *(f"orchid pot {i}" for i in range(6))], user_id="ada", infer=False)
        before = ranking(memory, "garden orchid")
        memory.add([f"garden plot {i}" for i in range(200)], user_id="bob", infer=False)
        memory.add([f"kitchen shelf {i}" for i in range(200)], user_id="carol", infer=False)
        after = ranking(memory, "garden orchid")
    assert before[0][0] == "garden shed"
    assert after == before


def test_a_term_in_the_memorys_own_text_outranks_one_in_its_context(pg_url):
    conversation = [
        {"role": "user", "content": "Where should we travel in May?"},
        {"role": "assistant", "content": "Lisbon has mild weather then."},
        {"role": "user", "content": "Book it for two."},
        {"role": "user", "content": "Lisbon again next year maybe."},
    ]
    with Memory(pg_url, embedder=HashEmbedder(32)) as memory:
        memory.add(conversation, user_id="ada", infer=False)
        hits = dict(ranking(memory, "lisbon"))
        memory.store.keywords.context_weight = 0.0
        without_context = dict(ranking(memory, "lisbon"))
    own = {"Lisbon has mild weather then.", "Lisbon again next year maybe."}
    # "Book it for two." is found only through its neighbours' words.
    assert "Book it for two." in hits
    assert min(hits[text] for text in own) > hits["Book it for two."] > 0
    assert without_context["Book it for two."] == 0


def test_a_word_said_once_stays_rare_however_many_contexts_repeat_it(pg_url):
    """ "Lisbon", said in one turn of six, is in four rows' text or context (its own and its
    neighbours'): counted there it would pass half the rows and weigh nothing."""
    conversation = [
        {"role": "user", "content": "We should plan the spring trip."},
        {"role": "assistant", "content": "Agreed, somewhere warm."},
        {"role": "user", "content": "How about Lisbon then?"},
        {"role": "assistant", "content": "Good food and mild weather."},
        {"role": "user", "content": "Book flights tomorrow."},
        {"role": "assistant", "content": "Will do."},
    ]
    with Memory(pg_url, embedder=HashEmbedder(32)) as memory:
        memory.add(conversation, user_id="ada", infer=False)
        hits = ranking(memory, "lisbon")
    assert len(hits) == 4
    assert hits[0][0] == "How about Lisbon then?"
    assert hits[0][1] > 0.5


def test_document_frequencies_are_counted_when_every_term_is_required(pg_url):
    """Over the budget with only common terms, every term is required; the rarer of them
    still weighs more, so a row repeating it ranks first."""
    with open_memory(pg_url) as memory:
        memory.store.keywords.score_budget = 20
        memory.add([f"garden fence item{i}" for i in range(40)], user_id="ada", infer=False)
        memory.add([f"garden rose item{i}" for i in range(25)], user_id="ada", infer=False)
        memory.add(["garden garden rose x", "garden rose rose x"], user_id="ada", infer=False)
        hits = ranking(memory, "garden rose")
    assert len(hits) == 27
    assert hits[0][0] == "garden rose rose x"


CORPUS = [
    "quantum computing lecture notes",
    "notes about the lecture on quantum physics and computing history",
    "computing budget spreadsheet",
    "history lecture about ancient rome",
    "physics physics physics exam",
    "ancient rome travel plans",
    "budget for the rome travel",
    "exam schedule for physics",
]


@pytest.mark.parametrize(
    "query", ["quantum lecture", "physics exam", "rome travel budget", "computing history"]
)
def test_a_scopes_keyword_ranking_is_sqlites(pg_url, tmp_path, query):
    rankings = []
    for path in (str(tmp_path / "memory.db"), pg_url):
        with open_memory(path) as memory:
            memory.add(CORPUS, user_id="ada", infer=False)
            rankings.append([content for content, _ in ranking(memory, query)])
    assert rankings[1] == rankings[0]
