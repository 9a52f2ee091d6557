from datetime import datetime, timezone

import pytest

from dspy_memory import Memory, MemoryNotFoundError, ScopeError
from dspy_memory.embed import HashEmbedder

pytestmark = pytest.mark.backends


def test_add_text_messages_and_json(memory):
    text = memory.add("I moved to Denver last month.", user_id="ada")
    assert [e.source for e in text.episodes] == ["text"]
    assert text.memories[0].kind == "turn" and text.memories[0].content == "I moved to Denver last month."

    chat = memory.add(
        [
            {
                "role": "user",
                "name": "Ada",
                "content": "My cat is called Miso.",
                "metadata": {"topic": "pets"},
            },
            {"role": "assistant", "content": "Cute name!"},
        ],
        user_id="ada",
        metadata={"channel": "web"},
        at="2024-05-01T10:00:00Z",
    )
    assert [e.status for e in chat.episodes] == ["done", "done"]
    assert chat.episodes[0].role == "user" and chat.episodes[0].name == "Ada"
    assert chat.memories[0].content == "Ada: My cat is called Miso."
    assert chat.memories[0].metadata == {"channel": "web", "topic": "pets"}
    assert chat.memories[0].valid_at == datetime(2024, 5, 1, 10, tzinfo=timezone.utc)

    structured = memory.add({"event": "signup", "plan": "pro"}, user_id="ada")
    assert structured.episodes[0].source == "json"
    assert '"plan": "pro"' in structured.memories[0].content


def test_message_time_overrides_call_time(memory):
    result = memory.add(
        [{"role": "user", "content": "one", "at": "2023-01-01"}, {"role": "user", "content": "two"}],
        user_id="ada",
        at="2024-01-01",
    )
    assert [m.valid_at.year for m in result.memories] == [2023, 2024]


@pytest.mark.parametrize(
    "bad, error",
    [
        (42, TypeError),
        ([], ValueError),
        ([{"role": "user"}], TypeError),
        ([{"role": "user", "content": 5}], TypeError),
        ([{"role": 3, "content": "x"}], TypeError),
        ([object()], TypeError),
    ],
)
def test_bad_input_is_rejected_before_anything_is_written(memory, bad, error):
    with pytest.raises(error):
        memory.add(bad, user_id="ada")
    assert memory.stats()["tables"]["episodes"] == 0


def test_scope_is_required_and_validated(memory):
    with pytest.raises(ScopeError, match="user_id="):
        memory.add("hello")
    with pytest.raises(ScopeError):
        memory.search("hello")
    with pytest.raises(ScopeError):
        memory.add("hello", user_id="  ")
    with pytest.raises(ScopeError):
        memory.add("hello", user_id=["ada"])


def test_blank_messages_are_kept_as_episodes_but_not_memories(memory):
    result = memory.add(
        [{"role": "user", "content": "   "}, {"role": "user", "content": "real"}], user_id="ada"
    )
    assert len(result.episodes) == 2 and len(result.memories) == 1


def test_search_returns_typed_hits_with_details_times_and_provenance(memory):
    memory.add(
        [{"role": "user", "name": "Ada", "content": "I live in Denver and work at Denver Health."}],
        user_id="ada",
        at="2024-05-02",
        metadata={"src": "chat"},
    )
    memory.add("I love hiking in the Rockies.", user_id="ada", at="2024-06-01")
    hits = memory.search("Where does Ada live? Denver", user_id="ada", k=5)
    top = hits[0]
    assert "Denver" in top.content
    assert top.memory.status == "current"
    assert top.details.dense_rank is not None and top.details.keyword_rank is not None
    # fused is in [0, 1]; the boosts (time, said-together, graph) add to final, which may pass 1
    assert 0 < top.details.fused <= 1 and top.details.final == top.score > 0
    assert top.memory.valid_at.year == 2024 and top.memory.created_at is not None
    assert top.memory.invalid_at is None and top.memory.expired_at is None
    [source] = top.provenance
    assert source.source == "message" and source.name == "Ada" and source.metadata == {"src": "chat"}
    assert source.content.startswith("I live in Denver")
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_recipes(memory):
    memory.add(["Ada adopted a beagle named Pixel.", "The quarterly report is due Friday."], user_id="ada")
    for recipe in ("dense", "keyword", "hybrid"):
        hits = memory.search("beagle Pixel", user_id="ada", recipe=recipe)
        assert hits[0].content == "Ada adopted a beagle named Pixel.", recipe
    keyword = memory.search("beagle", user_id="ada", recipe="keyword")
    assert all(h.details.dense_rank is None for h in keyword)
    dense = memory.search("beagle", user_id="ada", recipe="dense")
    assert all(h.details.keyword_rank is None for h in dense)
    with pytest.raises(ValueError, match="unknown recipe"):
        memory.search("x", user_id="ada", recipe="vibes")
    with pytest.raises(ValueError, match="k must be"):
        memory.search("x", user_id="ada", k=0)
    assert memory.search("   ", user_id="ada") == []


def test_scope_isolation_is_enforced_everywhere(memory):
    ada = memory.add("Ada's secret: the vault code is 1234.", user_id="ada").memories[0]
    memory.add("Bob likes vaults too.", user_id="bob")
    assert all(h.memory.user_id == "bob" for h in memory.search("vault code secret", user_id="bob", k=10))
    assert memory.get(ada.id, user_id="bob") is None
    assert memory.get(ada.id, user_id="ada").id == ada.id
    with pytest.raises(MemoryNotFoundError):
        memory.update(ada.id, "hacked", user_id="bob")
    with pytest.raises(MemoryNotFoundError):
        memory.delete(ada.id, user_id="bob")
    assert memory.history(ada.id, user_id="bob") == []
    assert memory.get(ada.id, user_id="ada").content.startswith("Ada's secret")


def test_omitted_agent_and_run_ids_are_wildcards_within_the_user(memory):
    memory.add("run one note", user_id="ada", run_id="r1")
    memory.add("run two note", user_id="ada", run_id="r2")
    memory.add("agent note", user_id="ada", agent_id="planner")
    assert len(memory.get_all(user_id="ada")) == 3
    assert [m.content for m in memory.get_all(user_id="ada", run_id="r2")] == ["run two note"]
    assert {h.content for h in memory.search("note", user_id="ada", run_id="r1")} == {"run one note"}
    assert memory.search("note", run_id="r1") == []  # no user_id: memories stored without one
    assert {h.content for h in memory.search("note", user_id="ada", agent_id="planner")} == {"agent note"}


def test_get_all_filters_kinds_and_paging(memory):
    for i in range(7):
        memory.add(
            f"fact number {i}",
            user_id="ada",
            metadata={"i": i, "even": i % 2 == 0, "tag": "t" if i < 3 else "u"},
            at=f"2024-01-0{i + 1}",
        )
    everything = memory.get_all(user_id="ada")
    assert [m.content for m in everything][:2] == ["fact number 6", "fact number 5"]
    page = memory.get_all(user_id="ada", limit=3, offset=3)
    assert [m.content for m in page] == ["fact number 3", "fact number 2", "fact number 1"]
    assert {m.metadata["i"] for m in memory.get_all(user_id="ada", filters={"even": True})} == {0, 2, 4, 6}
    assert {m.metadata["i"] for m in memory.get_all(user_id="ada", filters={"i": {"$gte": 5}})} == {5, 6}
    assert {
        m.metadata["i"]
        for m in memory.get_all(user_id="ada", filters={"tag": {"$in": ["t"]}, "i": {"$ne": 0}})
    } == {1, 2}
    assert memory.get_all(user_id="ada", filters={"missing": {"$exists": True}}) == []
    assert len(memory.get_all(user_id="ada", filters={"missing": None})) == 7
    assert memory.get_all(user_id="ada", kinds=["fact"]) == []
    assert len(memory.get_all(user_id="ada", kinds=["turn"])) == 7
    hits = memory.search("fact number", user_id="ada", filters={"i": {"$lt": 2}})
    assert {h.memory.metadata["i"] for h in hits} == {0, 1}
    with pytest.raises(ValueError, match="unknown memory kind"):
        memory.get_all(user_id="ada", kinds=["feelings"])
    with pytest.raises(ValueError, match="unknown operator"):
        memory.get_all(user_id="ada", filters={"i": {"$regex": "."}})
    with pytest.raises(ValueError, match="bad filter key"):
        memory.get_all(user_id="ada", filters={'a"b': 1})
    with pytest.raises(ValueError):
        memory.get_all(user_id="ada", filters={"i": [1, 2]})
    with pytest.raises(ValueError, match="limit"):
        memory.get_all(user_id="ada", limit=0)


def test_update_keeps_versions_and_logs_history(memory):
    original = memory.add("Ada lives in Boston.", user_id="ada", at="2024-01-01").memories[0]
    updated = memory.update(original.id, "Ada lives in Denver.", reason="she moved", user_id="ada")
    assert updated.id == original.id and updated.version == 2 and updated.status == "current"
    assert memory.get(original.id, user_id="ada").content == "Ada lives in Denver."
    assert [h.content for h in memory.search("Ada lives", user_id="ada")] == ["Ada lives in Denver."]
    events = memory.history(original.id, user_id="ada")
    assert [e.event for e in events] == ["ADD", "UPDATE"]
    assert events[1].old_content == "Ada lives in Boston." and events[1].new_content == "Ada lives in Denver."
    assert events[1].reason == "she moved" and events[1].version == 2
    # The update re-embedded the memory: the new text is what dense search finds.
    assert memory.search("Denver", user_id="ada", recipe="dense")[0].content == "Ada lives in Denver."
    # Same text again changes nothing.
    assert memory.update(original.id, "Ada lives in Denver.", user_id="ada").version == 2
    with pytest.raises(ValueError):
        memory.update(original.id, "  ", user_id="ada")
    with pytest.raises(MemoryNotFoundError):
        memory.update("no-such-id", "x", user_id="ada")


def test_known_at_sees_what_was_believed_then(memory):
    original = memory.add("The meeting is on Monday.", user_id="ada").memories[0]
    before = datetime.now(timezone.utc)
    memory.update(original.id, "The meeting is on Tuesday.", user_id="ada")
    assert [h.content for h in memory.search("meeting", user_id="ada", known_at=before)] == [
        "The meeting is on Monday."
    ]
    assert [h.content for h in memory.search("meeting", user_id="ada")] == ["The meeting is on Tuesday."]
    old = memory.get_all(user_id="ada", known_at=before)
    assert [m.content for m in old] == ["The meeting is on Monday."]
    assert memory.search("meeting", user_id="ada", known_at="2000-01-01") == []


def test_as_of_sees_what_was_true_at_a_world_time(memory):
    memory.add("I live in Boston.", user_id="ada", at="2023-06-01")
    memory.add("I moved to Denver.", user_id="ada", at="2024-04-01")
    early = memory.search("live", user_id="ada", as_of="2023-12-31")
    assert [h.content for h in early] == ["I live in Boston."]
    assert {h.content for h in memory.search("live Denver Boston", user_id="ada")} == {
        "I live in Boston.",
        "I moved to Denver.",
    }
    assert memory.search("live", user_id="ada", as_of="2020-01-01") == []


def test_delete_forgets_one_memory(memory):
    keep = memory.add("keep me", user_id="ada").memories[0]
    drop = memory.add("the secret word is aubergine", user_id="ada").memories[0]
    memory.update(drop.id, "the secret word is zucchini", user_id="ada")
    result = memory.delete(drop.id, user_id="ada")
    assert result.counts["memories"] == 2 and result.counts["vectors"] == 2 and result.counts["episodes"] == 1
    assert memory.get(drop.id, user_id="ada") is None
    assert memory.search("secret word", user_id="ada", recipe="keyword") == []
    events = memory.history(drop.id, user_id="ada")
    assert events[-1].event == "DELETE"
    assert all(e.old_content is None and e.new_content is None for e in events)
    assert memory.get(keep.id, user_id="ada").content == "keep me"
    with pytest.raises(MemoryNotFoundError):
        memory.delete(drop.id, user_id="ada")


def test_access_statistics_count_recalls(memory):
    record = memory.add("Pixel is a beagle.", user_id="ada").memories[0]
    for _ in range(3):
        memory.search("beagle", user_id="ada")
    fetched = memory.get(record.id, user_id="ada")  # reading it is a recall too
    assert fetched.access_count == 4 and fetched.last_accessed_at is not None


def test_memory_file_survives_reopen(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as first:
        first.add("persisted fact", user_id="ada")
    with Memory(db_path) as second:
        assert second.search("persisted", user_id="ada")[0].content == "persisted fact"


def test_in_memory_database_works(tmp_path):
    with Memory(":memory:", embedder="test") as memory:
        memory.add("ephemeral", user_id="u")
        assert memory.search("ephemeral", user_id="u")[0].content == "ephemeral"


def test_memory_survives_deepcopy_for_optimizers(memory):
    import copy

    assert copy.deepcopy(memory) is memory


@pytest.mark.parametrize("fusion", ["rrf", "convex", "zscore"])
def test_fusion_modes_score_in_unit_range(db_path, fusion):
    with Memory(db_path, embedder=HashEmbedder(64), retrieval={"fusion": fusion}) as memory:
        memory.add(
            ["Ada adopted a beagle named Pixel.", "Pixel the beagle loves walks.", "Taxes are due."],
            user_id="a",
        )
        hits = memory.search("taxes due", user_id="a")
        assert hits[0].content == "Taxes are due."
        assert all(0.0 <= h.details.fused <= 1.0 for h in hits)
        if fusion != "zscore":  # a standardized score reaches 1 only far above its list's mean
            assert hits[0].details.fused == pytest.approx(1.0)
        assert hits[0].details.fused == max(h.details.fused for h in hits)


def test_standard_scores_place_each_score_in_its_own_lists_distribution():
    from dspy_memory.read.scores import standard_scores

    assert standard_scores([]) == [] and standard_scores([3.0, 3.0]) == [0.5, 0.5]
    # The scale drops out: BM25-sized and cosine-sized lists of the same shape score alike.
    assert standard_scores([12.0, 6.0, 3.0]) == pytest.approx(standard_scores([0.8, 0.4, 0.2]))
    # One outlier on top does not squash the rest to zero, as a min-max would.
    low = standard_scores([10.0, 1.0, 0.9, 0.8])
    assert low[0] > 0.9 and low[1] > 0.25 and low[1] > low[2] > low[3]  # min-max: 0.02, 0.01, 0
