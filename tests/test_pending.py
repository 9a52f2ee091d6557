"""Episodes are the write-ahead log: persisted before anything that can fail, replayed later."""

import pytest

from dspy_memory import EmbeddingError, Memory
from dspy_memory.embed import CallableEmbedder, HashEmbedder

pytestmark = pytest.mark.backends


class FlakyEmbedder(CallableEmbedder):
    def __init__(self):
        self.fail = True
        self.inner = HashEmbedder(32, cache_size=0)
        super().__init__(self._embed, name=self.inner.name, dim=32, cache_size=0)

    def _embed(self, texts):
        if self.fail:
            raise ConnectionError("embedding server unreachable")
        return self.inner.embed(texts)


def test_input_is_kept_when_embedding_fails_and_replayed_on_next_open(db_path):
    flaky = FlakyEmbedder()
    memory = Memory(db_path, embedder=flaky)
    with pytest.raises(EmbeddingError, match="unreachable"):
        memory.add([{"role": "user", "content": "I moved to Denver."}], user_id="ada")
    [episode] = memory.store.episodes.list(memory_scope("ada"))
    assert episode.status == "failed" and "unreachable" in episode.error and episode.attempts == 1
    assert memory.get_all(user_id="ada") == []
    memory.close()

    # Next start: the episode is older than the grace period and gets processed.
    with Memory(db_path, embedder=HashEmbedder(32)) as reopened:
        [result] = reopened.reprocess()
        assert [e.status for e in result.episodes] == ["done"]
        [record] = reopened.get_all(user_id="ada")
        assert record.content == "I moved to Denver."
        assert reopened.store.episodes.list(memory_scope("ada"))[0].status == "done"
        # Replaying again does not duplicate.
        reopened.store.episodes.mark([episode.id], "pending")
        assert len(reopened.reprocess()) == 1
        assert len(reopened.get_all(user_id="ada")) == 1
        assert reopened.reprocess() == []


def test_pending_episodes_are_processed_when_a_file_is_opened(db_path):
    with Memory(db_path, embedder=FlakyEmbedder()) as memory:
        with pytest.raises(EmbeddingError):
            memory.add("remember me", user_id="ada")
    # Within the grace period another writer may still be working on it: left alone.
    with Memory(db_path, embedder=HashEmbedder(32)) as memory:
        assert memory.get_all(user_id="ada") == []
    with Memory(db_path, embedder=HashEmbedder(32), pending_grace_seconds=0) as memory:
        assert [m.content for m in memory.get_all(user_id="ada")] == ["remember me"]


def test_an_open_never_fails_because_replay_fails(db_path, caplog):
    with Memory(db_path, embedder=FlakyEmbedder()) as memory:
        with pytest.raises(EmbeddingError):
            memory.add("remember me", user_id="ada")
    with Memory(db_path, embedder=FlakyEmbedder(), pending_grace_seconds=0) as memory:
        assert memory.get_all(user_id="ada") == []
    assert "could not be processed yet" in caplog.text


def memory_scope(user):
    from dspy_memory.types import Scope

    return Scope(user_id=user)
