"""What was said around a strong hit rises with it (RetrievalConfig.said_together_weight,
read/boosts.py)."""

from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import HashEmbedder
from dspy_memory.read.boosts import boost_said_together
from dspy_memory.store.queries import Candidate

MINUTE = 1 / 1440


def candidate(row_id, age_days):
    return Candidate(row_id, 1.0, age_days, 0.5, 1.0, 0, 0.0, 0)


def scored(weight, ages, finals, top=10):
    details = {row: {"final": final} for row, final in finals.items()}
    config = RetrievalConfig(said_together_weight=weight, said_together_top=top)
    boost_said_together(details, {row: candidate(row, age) for row, age in ages.items()}, config)
    return details


def test_a_weak_turn_said_minutes_after_a_strong_hit_overtakes_a_turn_from_another_day():
    ages = {1: 10.0, 2: 10.0 - 30 * MINUTE, 3: 40.0}  # 2: half an hour after 1; 3: a month before
    finals = {1: 1.0, 2: 0.2, 3: 0.25}
    off, on = scored(0.0, ages, finals), scored(0.5, ages, finals)
    assert off[2]["final"] < off[3]["final"] and "said_together" not in off[2]
    assert on[2]["final"] == pytest.approx(0.2 + 0.5 * 1.0)  # vouched for by hit 1
    assert on[3]["final"] == pytest.approx(0.25 + 0.5 * 0.25)  # only by itself
    assert on[2]["final"] > on[3]["final"]
    assert on[1]["said_together"] == 1.0 and on[2]["said_together"] == 1.0


def test_only_hits_within_the_gap_and_among_the_top_vouch():
    ages = {1: 10.0, 2: 10.0 - 2 * 60 * MINUTE, 3: 10.0 - 10 * MINUTE}  # 2: two hours later
    finals = {1: 1.0, 2: 0.2, 3: 0.1}
    on = scored(0.5, ages, finals)
    assert on[2]["said_together"] == 0.2  # an hour is turn_context_gap_minutes: two is too far
    assert on[3]["said_together"] == 1.0
    # With only the best hit as a leader, a row that is not near it gets nothing, not even itself.
    top_one = scored(0.5, ages, finals, top=1)
    assert top_one[2]["said_together"] == 0.0 and top_one[2]["final"] == pytest.approx(0.2)


def test_search_reports_the_part_a_turn_gets_from_the_strong_hit_said_with_it(tmp_path):
    sunday = datetime(2024, 5, 5, 10, tzinfo=timezone.utc)
    turns = [
        "Ada adopted a beagle named Pixel.",
        "They swim in the lake near the old mill every Sunday morning.",
    ]
    found = {}
    for weight in (0.0, 0.5):
        settings = {"said_together_weight": weight, "turn_context_before": 0, "turn_context_after": 0}
        with Memory(str(tmp_path / f"{weight}.db"), embedder=HashEmbedder(64), retrieval=settings) as memory:
            memory.add(turns, user_id="u", at=sunday)
            memory.add(["Pool closed Sunday."], user_id="u", at=sunday + timedelta(days=30))
            hits = memory.search("Ada beagle Pixel Sunday", user_id="u", k=3)
            found[weight] = {hit.content: hit.details for hit in hits}
    assert all(details.said_together == 0.0 for details in found[0.0].values())
    adopted, swim, pool = (found[0.5][text] for text in (*turns, "Pool closed Sunday."))
    before = found[0.0]
    # The swim turn is vouched for by the adoption (the best hit, said with it); the pool turn,
    # a month later, only by itself.
    assert swim.said_together == pytest.approx(before[turns[0]].final)
    assert pool.said_together == pytest.approx(before["Pool closed Sunday."].final)
    assert swim.final == pytest.approx(before[turns[1]].final + 0.5 * before[turns[0]].final)
    assert adopted.final > swim.final
