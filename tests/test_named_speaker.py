"""What a speaker the query names said rises (RetrievalConfig.speaker_weight,
read/boosts.py `boost_named_speaker`)."""

import pytest

from dspy_memory import Memory
from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import HashEmbedder
from dspy_memory.read.boosts import boost_named_speaker

pytestmark = pytest.mark.backends

# Both turns hold every word of the query but the speaker's: only who said them differs.
TURNS = [
    {"role": "user", "name": "Melanie", "content": "Caroline and I went hiking by the lake"},
    {"role": "user", "name": "Caroline", "content": "Melanie and I went hiking by the lake"},
]
QUERY = "Where did Caroline go hiking?"


def boosted(query, names, weight=0.5):
    details = {row: {"final": 0.0} for row in names}
    boost_named_speaker(query, details, RetrievalConfig(speaker_weight=weight), lambda rows: names)
    return {row: detail["final"] for row, detail in details.items()}


def test_a_turn_said_by_the_speaker_the_query_names_gains_the_weight_and_says_so(db_path):
    scores = {}
    for weight in (0.0, 0.3):
        with Memory(db_path, embedder=HashEmbedder(64), retrieval={"speaker_weight": weight}) as memory:
            if weight == 0.0:
                memory.add(TURNS, user_id="u")
            hits = memory.search(QUERY, user_id="u", k=2)
            scores[weight] = {hit.provenance[0].name: hit for hit in hits}
    off, on = scores[0.0], scores[0.3]
    assert on["Caroline"].details.speaker == 1.0 and on["Melanie"].details.speaker == 0.0
    assert on["Caroline"].score == pytest.approx(off["Caroline"].score + 0.3)
    assert on["Melanie"].score == pytest.approx(off["Melanie"].score)
    assert off["Caroline"].details.speaker == 0.0  # off: nothing is looked up or added
    assert list(on) == ["Caroline", "Melanie"]


def test_a_speaker_is_named_by_the_first_word_of_the_name_as_a_whole_word_in_any_case():
    names = {1: {"Mary Ann Evans"}, 2: {"Al"}, 3: {"caroline"}, 4: {"Jo"}, 5: {"  "}}
    found = boosted("What did MARY and Caroline's sister say to Alice? always", names)
    assert found == {1: 0.5, 2: 0.0, 3: 0.5, 4: 0.0, 5: 0.0}


def test_a_memory_with_several_sources_is_boosted_once_when_any_speaker_is_named():
    assert boosted("what did Jo say", {1: {"Jo", "Sam"}, 2: {"Sam"}}) == {1: 0.5, 2: 0.0}


def test_turns_without_a_name_and_queries_naming_nobody_change_nothing(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), retrieval={"speaker_weight": 0.5}) as memory:
        memory.add(["Ada went hiking by the lake"], user_id="u")
        memory.add(TURNS, user_id="u")
        hits = memory.search("who went hiking by the lake", user_id="u", k=3)
    assert len(hits) == 3 and all(hit.details.speaker == 0.0 for hit in hits)


def test_the_speaker_lookup_stays_inside_the_scope(db_path):
    """Another user's Caroline neither appears nor lends her name to this user's hits."""
    with Memory(db_path, embedder=HashEmbedder(64), retrieval={"speaker_weight": 0.5}) as memory:
        memory.add(TURNS, user_id="u")
        memory.add([{**TURNS[1], "content": "Caroline went hiking by the lake alone"}], user_id="other")
        hits = memory.search(QUERY, user_id="u", k=5)
    assert {hit.memory.user_id for hit in hits} == {"u"} and len(hits) == 2
    assert [hit.details.speaker for hit in hits] == [1.0, 0.0]


def test_the_weight_is_checked():
    with pytest.raises(ValueError):
        RetrievalConfig(speaker_weight=-0.1)
    with pytest.raises(ValueError):
        RetrievalConfig(speaker_weight=1.5)
