"""The memory lifecycle (docs/lifecycle.md): the forgetting curve on stored memories, archive not
delete, restore, idempotent maintenance, what never decays, compaction settings per scope,
retention on hits and in stats, and scheduled maintenance. Time is simulated (set_clock)."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError, MemoryNotFoundError, ScopeError
from dspy_memory.util.timeutil import set_clock

from .scripted import fused_lm

START = datetime(2024, 1, 1, 9, tzinfo=timezone.utc)
FACTS = ["Ada likes green tea.", "Ada's sister Ana lives in Lisbon.", "Ada runs every Sunday."]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, days: float) -> None:
        self.now += timedelta(days=days)


@pytest.fixture
def clock():
    simulated = Clock()
    set_clock(simulated)
    yield simulated
    set_clock(None)


def open_memory(path, **settings):
    return Memory(path, embedder=HashEmbedder(64), **settings)


def add_apart(memory, clock, texts, **scope):
    """Each text said two hours after the last: raw turns apart are not each other's context."""
    added = []
    for text in texts:
        added += memory.add(text, infer=False, **scope).memories
        clock.advance(1 / 12)
    return added


def dump(memory):
    """Every memory row and event, as stored: what a maintenance run may change."""
    with memory.store.snapshot() as conn:
        rows = [tuple(row) for row in conn.execute("SELECT * FROM memories ORDER BY row_id")]
        events = [tuple(row) for row in conn.execute("SELECT * FROM memory_events ORDER BY id")]
    return rows, events


def contents(hits):
    return sorted(hit.content for hit in hits)


def test_forgotten_memories_are_archived_with_the_numbers_and_found_only_on_request(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        added = memory.add(FACTS, user_id="ada", infer=False).memories
        clock.advance(200)
        # S = 30 days * (1 + 0 recalls) * (1 + 1.0 * importance 0.5) = 45; R = exp(-200 / 45)
        report = memory.maintain(user_id="ada")
        assert (report.examined, report.decayed, report.archived) == (3, 3, 3)
        assert memory.search("Ada tea Lisbon Sunday", user_id="ada") == []
        assert memory.get_all(user_id="ada") == []
        archived = memory.search("Ada tea Lisbon Sunday", user_id="ada", include_archived=True)
        assert contents(archived) == sorted(FACTS)
        assert {hit.memory.status for hit in archived} == {"archived"}
        decay = memory.history(added[0].id, user_id="ada")[-1]
        assert decay.event == "DECAY" and decay.actor == "maintain"
        assert decay.metadata["stability_days"] == 45.0
        assert decay.metadata["days_since_recall"] == 200.0
        assert decay.metadata["retention"] == pytest.approx(math.exp(-200 / 45), abs=1e-6)
        assert decay.metadata["threshold"] == 0.05
        assert memory.stats()["archived_memories"] == 3


def test_memories_above_the_threshold_or_too_young_stay(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        clock.advance(130)  # R = exp(-130 / 45) = 0.056 > 0.05
        assert memory.maintain(user_id="ada").archived == 0
        clock.advance(10)  # 0.044
        assert memory.maintain(user_id="ada").archived == 3
    with open_memory(tmp_path / "young.db", lifecycle={"base_days": 1.0}) as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        clock.advance(20)  # R = exp(-20 / 1.5) is tiny, but min_age_days is 30
        report = memory.maintain(user_id="ada")
        assert (report.decayed, report.kept, report.archived) == (0, 3, 0)


def test_maintaining_twice_changes_nothing_the_second_time(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        memory.add(["Bob plays chess."], user_id="bob", infer=False)
        clock.advance(70)
        memory.add(["Ada moved to Porto."], user_id="ada", infer=False)
        clock.advance(80)
        first = memory.maintain(all_scopes=True)
        assert first.archived == 4  # the Porto memory is 80 days old: R = 0.17
        before = dump(memory)
        second = memory.maintain(all_scopes=True)
        assert dump(memory) == before
        assert (second.decayed, second.archived, second.restored, second.merged) == (0, 0, 0, 0)


def test_restore_brings_a_memory_back_and_counts_as_a_recall(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        tea = memory.add(FACTS[:1], user_id="ada", infer=False).memories[0]
        clock.advance(200)
        memory.maintain(user_id="ada")
        restored = memory.restore(tea.id, user_id="ada")
        assert restored.status == "current" and restored.access_count == 1 and restored.retention == 1.0
        assert [event.event for event in memory.history(tea.id, user_id="ada")] == ["ADD", "DECAY", "RESTORE"]
        assert contents(memory.search("green tea", user_id="ada")) == FACTS[:1]
        assert memory.maintain(user_id="ada").archived == 0  # its clock starts again
        with pytest.raises(MemoryNotFoundError):
            memory.restore(tea.id, user_id="eve")


def test_an_archived_memory_recalled_by_get_comes_back_at_the_next_maintenance(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        tea, lisbon, _ = add_apart(memory, clock, FACTS, user_id="ada")
        clock.advance(200)
        memory.maintain(user_id="ada")
        clock.advance(1)
        assert memory.get(tea.id, user_id="ada").status == "archived"  # a recall...
        found = memory.search("Lisbon", user_id="ada", recipe="keyword", include_archived=True)
        assert [hit.id for hit in found] == [lisbon.id]  # ...and another
        report = memory.maintain(user_id="ada")
        assert report.restored == 2 and report.archived == 0
        assert contents(memory.get_all(user_id="ada")) == sorted([tea.content, lisbon.content])
        assert memory.history(tea.id, user_id="ada")[-1].reason == "recalled"


def test_pinned_memories_profiles_and_core_blocks_never_decay(tmp_path, clock):
    def profile_facts(turns, existing):
        return [{"action": "ADD", "content": turn["text"], "kind": "profile"} for turn in turns]

    with open_memory(tmp_path / "m.db", lm=fused_lm(profile_facts)) as memory:
        tea, lisbon, sunday = memory.add(FACTS, user_id="ada", infer=False).memories
        memory.pin(lisbon.id, user_id="ada")
        memory.add("Ada is a pilot.", user_id="ada")  # a profile memory
        memory.blocks.set("persona", "I am Ada's assistant.", user_id="ada")
        block_before = memory.blocks.get("persona", user_id="ada")
        clock.advance(3650)
        report = memory.maintain(user_id="ada")
        assert report.archived == 2 and report.examined == 2  # tea and sunday
        current = contents(memory.get_all(user_id="ada"))
        assert current == sorted([lisbon.content, "Ada is a pilot."])
        assert memory.blocks.get("persona", user_id="ada") == block_before
        hit = memory.search("Lisbon", user_id="ada")[0]
        assert hit.memory.pinned and hit.details.retention == 1.0
        unpinned = memory.pin(lisbon.id, False, user_id="ada")
        assert not unpinned.pinned
        clock.advance(3650)
        assert memory.maintain(user_id="ada").archived == 1
        repinned = memory.pin(lisbon.id, user_id="ada")  # pinning restores
        assert repinned.status == "current" and repinned.pinned


def test_settings_per_scope_are_kept_in_the_file_and_followed(tmp_path, clock):
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        memory.add(["Bob plays chess.", "Bob owns a red bike."], user_id="bob", infer=False)
        memory.add(["Cy sings."], user_id="cy", infer=False)
        chosen = memory.lifecycle_settings(user_id="bob", min_age_days=1000)
        assert chosen.min_age_days == 1000 and chosen.archive_below == 0.05
        memory.lifecycle_settings(user_id="cy", keep_recalls=3)
        clock.advance(1)
        for _ in range(3):
            memory.search("Cy sings", user_id="cy")
    clock.advance(400)  # cy: S = 30 * (1 + 3) * 1.5 = 180 days: R = exp(-400 / 180) = 0.11
    clock.advance(200)  # R = exp(-600 / 180) = 0.036, but cy keeps what was recalled 3 times
    with open_memory(path) as memory:
        assert memory.lifecycle_settings(user_id="bob").min_age_days == 1000
        report = memory.maintain(all_scopes=True)
        assert (report.archived, report.kept) == (3, 3)  # ada's; bob's (too young) and cy's kept
        assert len(memory.get_all(user_id="bob")) == 2 and len(memory.get_all(user_id="cy")) == 1
        clock.advance(1000)
        assert memory.maintain(user_id="bob").archived == 2
        assert memory.lifecycle_settings(user_id="bob", reset=True).min_age_days == 30


@pytest.mark.parametrize(
    "bad",
    [
        {"archive_below": 2},
        {"strategy": "delete"},
        {"min_age_days": -1},
        {"half_life": 3},
        {"keep_recalls": "x"},
    ],
)
def test_bad_settings_are_refused_and_nothing_is_stored(tmp_path, bad):
    with open_memory(tmp_path / "m.db") as memory:
        with pytest.raises(InvalidInputError):
            memory.lifecycle_settings(user_id="ada", **bad)
        assert memory.store.lifecycle_settings.get(("ada", None, None)) is None


def test_maintain_needs_a_scope_or_all_scopes(tmp_path):
    with open_memory(tmp_path / "m.db") as memory:
        with pytest.raises(ScopeError):
            memory.maintain()
        with pytest.raises(ScopeError):
            memory.maintain(user_id="ada", all_scopes=True)


def test_retention_is_on_every_hit_and_in_stats(tmp_path, clock):
    with open_memory(tmp_path / "m.db") as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        assert memory.stats()["lifecycle"]["retention_median"] == 1.0
        clock.advance(45)
        some = memory.get_all(user_id="ada")[0]  # a listing is no recall
        looked = memory.get(some.id, user_id="ada", recall=False)  # nor is looking
        assert looked.access_count == 0 and looked.retention == pytest.approx(math.exp(-1), abs=1e-4)
        stats = memory.stats()["lifecycle"]
        assert stats["decaying_memories"] == 3 and stats["below_threshold"] == 0
        assert stats["retention_median"] == pytest.approx(math.exp(-1), abs=1e-4)
        hit = memory.search("green tea", user_id="ada")[0]
        assert hit.memory.retention == pytest.approx(math.exp(-1), abs=1e-4) == hit.details.retention
        assert memory.get(hit.id, user_id="ada").retention == 1.0  # that search was a recall


def test_retention_weighs_in_ranking_as_configured(tmp_path, clock):
    """The memory recalled lately overtakes a slightly more relevant one when retention counts."""
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        texts = ["the key is under the mat, the key", "the key is under the pot"]
        old, recent = memory.add(texts, user_id="u", infer=False).memories
        clock.advance(60)
        memory.get(recent.id, user_id="u")
        clock.advance(1)
    for weight, first in ((0.0, old.id), (0.5, recent.id)):
        retrieval = {"retention_weight": weight, "recency_weight": 0.0, "importance_weight": 0.0}
        with open_memory(path, retrieval=retrieval, track_access=False) as memory:
            hits = memory.search("where is the key", user_id="u", recipe="keyword")
            assert [hit.id for hit in hits] == [first, ({old.id, recent.id} - {first}).pop()]


def test_maintenance_runs_on_a_schedule_without_blocking_writes(tmp_path, clock):
    with open_memory(tmp_path / "m.db", maintenance_every=0.05) as memory:
        memory.add(FACTS, user_id="ada", infer=False)
        clock.advance(200)
        deadline = time.monotonic() + 10
        while not memory.maintenance_reports() and time.monotonic() < deadline:
            memory.add("still writing", user_id="bob", infer=False)
            time.sleep(0.02)
        reports = memory.maintenance_reports()
        assert reports and reports[0].archived == 3
        assert memory.search("still writing", user_id="bob")


def test_maintenance_every_is_validated():
    with pytest.raises(Exception, match="maintenance_every"):
        Memory(":memory:", embedder="test", maintenance_every="soon")


def test_a_file_from_before_the_lifecycle_keeps_its_events_when_opened(tmp_path, clock):
    """Schema 5 -> 6 rebuilds the event table (RESTORE joins its CHECK) with every id kept."""
    import sqlean

    from dspy_memory.store.sqlite.migrations import MIGRATIONS, migrate

    path = tmp_path / "old.db"
    conn = sqlean.connect(str(path), isolation_level=None)
    migrate(conn, MIGRATIONS[:5])
    for event_id, event in ((7, "ADD"), (9, "DECAY")):
        conn.execute(
            "INSERT INTO memory_events (id, memory_id, user_id, event, new_content, actor, created_at) "
            "VALUES (?, 'm1', 'ada', ?, 'Ada likes tea.', 'user', '2024-01-01T00:00:00.000000Z')",
            (event_id, event),
        )
    conn.close()
    with open_memory(path) as memory:
        tea = memory.add("Ada likes coffee.", user_id="ada", infer=False).memories[0]
        clock.advance(200)
        memory.maintain(user_id="ada")
        memory.restore(tea.id, user_id="ada")
        with memory.store.snapshot() as conn:
            events = [tuple(row) for row in conn.execute("SELECT id, memory_id, event FROM memory_events")]
    assert events[:2] == [(7, "m1", "ADD"), (9, "m1", "DECAY")]
    assert [event for _, _, event in events[2:]] == ["ADD", "DECAY", "RESTORE"]
    assert events[2][0] == 10  # AUTOINCREMENT goes on after the copied ids
