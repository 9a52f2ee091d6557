"""Time in a query: the window it names, and how search uses it (a boost for memories true in it;
for "when" questions, a boost for memories whose text says when)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.read.temporal import EARLIEST, LATEST, asks_when, is_dated, time_window

pytestmark = pytest.mark.backends

NOW = datetime(2026, 11, 25, 15, 30, tzinfo=timezone.utc)


def day(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "query, start, end",
    [
        ("Who did Maria have dinner with on May 3, 2023?", "2023-05-03", "2023-05-04"),
        ("What painting did she show on 13 October, 2023?", "2023-10-13", "2023-10-14"),
        ("what happened on 2024-02-29", "2024-02-29", "2024-03-01"),
        ("What did they paint in July 2023?", "2023-07-01", "2023-08-01"),
        ("What happened in Dec. 2023?", "2023-12-01", "2024-01-01"),
        ("How many beach trips in 2023?", "2023-01-01", "2024-01-01"),
        ("What did I do yesterday?", "2026-11-24", "2026-11-25"),
        ("plans for today", "2026-11-25", "2026-11-26"),
        ("what did we discuss last week", "2026-11-16", "2026-11-23"),
        ("anything last weekend?", "2026-11-21", "2026-11-23"),
        ("books read this month", "2026-11-01", "2026-12-01"),
        ("trips last month", "2026-10-01", "2026-11-01"),
        ("trips last year", "2025-01-01", "2026-01-01"),
        ("what happened 2 weeks ago", "2026-11-04", "2026-11-19"),
    ],
)
def test_a_named_time_is_a_window(query, start, end):
    window = time_window(query, NOW)
    assert window is not None
    assert (window.start, window.end, window.month) == (day(start), day(end), None)


def test_before_and_after_open_the_window_on_one_side():
    before = time_window("What did she do before June 2023?", NOW)
    assert (before.start, before.end, before.expression) == (EARLIEST, day("2023-06-01"), "before June 2023")
    after = time_window("and after 2021?", NOW)
    assert (after.start, after.end) == (day("2022-01-01"), LATEST)
    since = time_window("since March 2024", NOW)
    assert (since.start, since.end) == (day("2024-03-01"), LATEST)


def test_a_month_without_a_year_is_that_month_of_any_year_so_far():
    window = time_window("When did Melanie go camping in June?", NOW)
    assert window.month == 6 and window.start == EARLIEST and window.end == day("2026-11-26")
    assert window.holds(day("2023-06-20")) and window.holds(day("2026-06-01"))
    assert not window.holds(day("2023-07-01"))


@pytest.mark.parametrize(
    "query",
    ["You may go now", "What does Ada like?", "the 13th floor", "May I ask?", "2 Maybe", "Room 12345"],
)
def test_no_time_no_window(query):
    assert time_window(query, NOW) is None


def test_when_questions_and_dated_texts():
    assert asks_when("When did Caroline go to the support group?")
    assert asks_when("what year did she move?") and asks_when("How long ago was her birthday?")
    assert not asks_when("What did Caroline do when she was young?")
    assert is_dated("I went to a support group yesterday.") and is_dated("back in 2019")
    assert is_dated("We met last Tuesday") and is_dated("in March")
    assert not is_dated("We may go, it sounds great.")


@settings(max_examples=300, deadline=None)
@given(
    query=st.text(max_size=80)
    | st.from_regex(
        r"(in|before|after|since)? ?(may|june|2023|9999|0001|\d{1,6} (day|week|month|year)s? ago|last (week|month|year)|yesterday|today)",
        fullmatch=True,
    ),
    reference=st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59), timezones=st.just(timezone.utc)
    ),
)
def test_any_query_at_any_time_gives_a_window_or_none(query, reference):
    window = time_window(query, reference)
    assert window is None or window.start <= window.end


@pytest.fixture
def diary(db_path):
    with Memory(db_path, embedder=HashEmbedder(32)) as memory:
        for at, text in [
            ("2023-05-03T19:00:00Z", "Dinner with Jon at the harbour."),
            ("2023-06-10T19:00:00Z", "Dinner with Sam downtown."),
            ("2023-07-22T19:00:00Z", "Dinner with Ana on the roof."),
        ]:
            memory.add(text, user_id="u", at=at)
        yield memory


def test_a_dated_query_ranks_what_was_true_then_first(diary):
    for query, expected in [
        ("Who did I have dinner with on May 3, 2023?", "Dinner with Jon at the harbour."),
        ("dinner in June 2023", "Dinner with Sam downtown."),
        ("dinner in July", "Dinner with Ana on the roof."),
    ]:
        hits = diary.search(query, user_id="u", k=3)
        assert hits[0].content == expected, query
        assert hits[0].details.temporal == 1.0
        assert [hit.details.temporal for hit in hits[1:]] == [0.0, 0.0]


def test_the_boost_can_be_turned_off_and_never_filters(db_path, diary):
    with Memory(diary.config, retrieval={"temporal_weight": 0.0, "when_weight": 0.0}) as plain:
        hits = plain.search("dinner in June 2023", user_id="u", k=3)
        assert all(hit.details.temporal == 0.0 for hit in hits)
    # A window nothing falls in ranks as before: a boost, not a filter.
    assert len(diary.search("dinner in 1999", user_id="u", k=3)) == 3


def test_when_questions_prefer_memories_that_say_when(db_path):
    with Memory(db_path, embedder=HashEmbedder(32), retrieval={"when_weight": 0.3}) as memory:
        memory.add("Caroline: the support group was lovely", user_id="u", at="2023-05-08T12:00:00Z")
        memory.add("Caroline: I went to the support group yesterday", user_id="u", at="2023-05-08T12:00:00Z")
        [top, other] = memory.search("When did Caroline go to the support group?", user_id="u", k=2)
        assert top.content == "Caroline: I went to the support group yesterday"
        assert top.details.temporal == 1.0 and other.details.temporal == 0.0
        plain = memory.search("Did Caroline like the support group?", user_id="u", k=2)
        assert all(hit.details.temporal == 0.0 for hit in plain)
