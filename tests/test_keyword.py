import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.store.keyword import match_expression, query_terms

HOSTILE = [
    '"',
    '""',
    "'",
    'foo" OR "bar',
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    "NEAR(a b, 3)",
    "a AND",
    "OR OR OR",
    "*",
    "pre*",
    ":",
    "content:secret",
    "scope:u123",
    "((",
    "())",
    "a) OR (b",
    "^start",
    "-",
    "+",
    "🙂",
    "🙂🙂 emoji only 🎉",
    "café naïve",
    "日本語のテキスト",
    "\x00",
    "\n\t",
    "",
    "   ",
    "x" * 10_000,
    " ".join(["word"] * 500),
    "SELECT * FROM memories; --",
    "{content}: x",
]


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    memory = Memory(str(tmp_path_factory.mktemp("kw") / "m.db"), embedder=HashEmbedder(32))
    memory.add(
        ["Ada said: NEAR the river AND the mill", "café au lait", "日本語のテキスト", 'quote " inside'],
        user_id="ada",
    )
    yield memory
    memory.close()


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_break_search(filled, query):
    for recipe in ("keyword", "hybrid"):
        hits = filled.search(query, user_id="ada", recipe=recipe)
        assert all(hit.memory.user_id == "ada" for hit in hits)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300))
def test_any_text_is_a_safe_keyword_query(filled, query):
    filled.search(query, user_id="ada", recipe="keyword", k=3)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.printable + "\"'():*^-+", max_size=120))
def test_match_expressions_only_hold_quoted_alphanumeric_terms(query):
    terms = query_terms(query)
    assert all(term.isalnum() for term in terms)
    expression = match_expression(terms)
    if expression is not None:
        assert expression.count('"') == 2 * len(terms)


def test_keywords_are_matched_as_words(filled):
    assert filled.search("NEAR", user_id="ada", recipe="keyword")[0].content.startswith("Ada said")
    assert filled.search("cafe", user_id="ada", recipe="keyword")[0].content == "café au lait"


def test_stopwords_are_dropped_unless_the_query_is_only_stopwords():
    assert query_terms("What did the cat do?") == ["cat"]
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("What did the cat do?", drop_stopwords=False) == ["what", "did", "the", "cat", "do"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)), max_terms=32)) == 32


def test_large_scopes_score_rare_terms_within_a_budget(tmp_path):
    """With a tiny budget the planner must still find the right memory: rare terms select,
    and when every term is common all of them are required."""
    texts = [f"note {i} about gardening and weather" for i in range(60)]
    texts += ["Ada Lovelace wrote the first program", "Ada likes gardening", "Lovelace is a surname"]
    memory = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32), retrieval={"keyword_score_budget": 5})
    memory.add(texts, user_id="u")
    plan = memory.store.keywords.plan
    with memory.store.snapshot() as conn:
        # "program" is rare (1 row): it alone selects; "gardening" (61 rows) does not.
        assert (
            plan(conn, ["gardening", "program"], [], scope_rows=63, total_rows=63) == 'content : ("program")'
        )
        # every term common: all are required.
        assert plan(conn, ["gardening", "weather"], [], scope_rows=63, total_rows=63) == (
            'content : ("gardening" AND "weather")'
        )
        # terms that match nothing are ignored.
        assert plan(conn, ["zzzz"], [], scope_rows=63, total_rows=63) is None
    hits = memory.search("gardening program", user_id="u", recipe="keyword")
    assert hits[0].content == "Ada Lovelace wrote the first program"
    assert [h.content for h in memory.search("Ada gardening", user_id="u", recipe="keyword")][:1] == [
        "Ada likes gardening"
    ]
    memory.close()


def test_keyword_filters_apply_before_the_top_k(tmp_path):
    """Rows rejected by filters must not crowd out matching rows further down the BM25 list."""
    memory = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32))
    memory.add([f"apple apple apple {i}" for i in range(100)], user_id="u", metadata={"keep": False})
    memory.add("one apple", user_id="u", metadata={"keep": True})
    hits = memory.search("apple", user_id="u", recipe="keyword", filters={"keep": True})
    assert [h.content for h in hits] == ["one apple"]
    memory.close()
