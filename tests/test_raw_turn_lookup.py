"""A raw turn given again (same text, same exact scope, same time) is the memory it already is:
the write path looks the batch's turns up in one query per scope and chunk of hashes."""

from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder

pytestmark = pytest.mark.backends

T1 = datetime(2024, 5, 5, 10, tzinfo=timezone.utc)


def count(memory, **scope):
    return len(memory.get_all(limit=10_000, **scope))


def test_the_same_turn_again_is_found_but_another_time_or_scope_is_a_new_memory(db_path):
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        memory.add(["Ada plays chess.", "Ben cooks."], user_id="u", at=T1, infer=False)
        memory.add(["Ada plays chess.", "Ben cooks.", "Cy rows."], user_id="u", at=T1, infer=False)
        assert count(memory, user_id="u") == 3
        memory.add(["Ada plays chess."], user_id="u", at=T1 + timedelta(days=1), infer=False)
        memory.add(["Ada plays chess."], user_id="u", run_id="r", at=T1, infer=False)
        memory.add(["Ada plays chess."], user_id="v", at=T1, infer=False)
        assert count(memory, user_id="u") == 5 and count(memory, user_id="v") == 1


def test_a_batch_larger_than_one_lookup_query_is_found_whole_when_given_again(db_path):
    turns = [f"turn number {i} of a long history" for i in range(1_203)]
    with Memory(db_path, embedder=HashEmbedder(16)) as memory:
        memory.add(turns, user_id="u", at=T1, infer=False)
        memory.add(turns, user_id="u", at=T1, infer=False)
        held = memory.get_all(user_id="u", limit=10_000)
        assert len(held) == 1_203
        # Each was found again, in every chunk: a turn given again counts as a recall of it.
        assert {record.access_count for record in held} == {1}
