"""Retention (docs/governance.md#retention): memories that expire on purpose. From the moment a
memory expires no read returns it, whatever it asks; maintenance then erases it with the closure
of `delete`, leaving one receipt with counts only."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError, MemoryNotFoundError
from dspy_memory.testing import scripted_lm

from .clock import START, clock_fixture  # noqa: F401 - the `clock` fixture
from .leakscan import leaks, markers, unseen

pytestmark = [pytest.mark.backends, pytest.mark.encrypted]


# Words no other text holds: the expiring fact's object, and the expiring raw turn's word.
SECRET, RAW_SECRET, NOTE = markers(3, seed=31)


def _facts(call):
    """The write program: each turn becomes one fact about Ada (subject, predicate, object), and
    the answer program answers with its whole context (so a leak into context shows)."""
    if call.output_fields == ["ops"]:
        ops = []
        for turn in call.inputs["turns"]:
            text = turn["text"]
            obj = SECRET if SECRET in text else "tea"
            predicate = "locker_code" if SECRET in text else "likes"
            ops.append(
                {"action": "ADD", "content": text, "subject": "Ada", "predicate": predicate, "object": obj}
            )
        return {"ops": ops}
    if call.output_fields == ["answer"]:
        return {"answer": call.inputs["context"]}
    if call.output_fields == ["plan"]:
        return {"plan": {"queries": [call.inputs["question"]], "as_of": None}}
    raise AssertionError(call.signature)


def _every_read(memory, ids):
    """What every read of the public API returns for ada, as text."""
    ada = {"user_id": "ada"}
    outputs = []
    for recipe in ("hybrid", "dense", "keyword", "graph"):
        for query in (SECRET, RAW_SECRET, "Ada locker code"):
            outputs.append(memory.search(query, recipe=recipe, **ada))
            outputs.append(memory.search(query, recipe=recipe, include_archived=True, **ada))
            # Time travel does not bring it back: expiry is by the clock.
            outputs.append(memory.search(query, recipe=recipe, known_at=START, as_of=START, **ada))
    outputs.append(memory.get_all(**ada))
    outputs.append(memory.get_all(known_at=START + timedelta(minutes=30), include_archived=True, **ada))
    outputs.append(memory.get_all(user_id="ada", run_id="call-1"))
    for memory_id in ids:
        outputs.append(memory.get(memory_id, **ada))
        outputs.append(memory.get(memory_id, recall=False, all_scopes=True))
        outputs.append(memory.find_ids(memory_id[:8], **ada))
        try:
            outputs.append(memory.history(memory_id, **ada))
        except MemoryNotFoundError:
            pass
    outputs.append(memory.timeline(subject="Ada", **ada))
    outputs.append(memory.timeline(predicate="locker_code", known_at=START + timedelta(minutes=30), **ada))
    outputs.append(memory.graph(**ada).to_json())
    outputs.append(memory.graph("Ada", **ada).to_json())
    outputs.append(memory.graph(SECRET, **ada).to_json())
    outputs.append(memory.context("Ada locker code " + SECRET, **ada))
    outputs.append(memory.answer("What is Ada's locker code?", **ada))
    outputs.append(memory.answer("What is Ada's locker code?", rewrite=True, **ada))
    outputs.append(memory.feedback_records(**ada))
    outputs.append(memory.stats())
    for tool in memory.tools(**ada):
        name = tool.name if hasattr(tool, "name") else tool.__name__
        if name == "recall":
            outputs.append(tool(query=SECRET))
            outputs.append(tool(query="locker code"))
        elif name == "memory_history":
            for memory_id in ids:
                outputs.append(tool(memory_id=memory_id[:8]))
    return "\n".join(repr(output) for output in outputs)


def test_an_expired_memory_is_invisible_to_every_read_at_once(db_path, clock):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(_facts)) as memory:
        secret = memory.add(f"Ada's locker code is {SECRET}.", user_id="ada", expires_in="1h").memories[0]
        raw = memory.add(
            f"Ada said {RAW_SECRET} on the phone.",
            user_id="ada",
            run_id="call-1",
            infer=False,
            expires_in="1h",
        ).memories[0]
        kept = memory.add("Ada likes tea.", user_id="ada").memories[0]
        memory.feedback(secret.id, "wrong", note=f"it said {NOTE}", user_id="ada")
        assert secret.expires_at == raw.expires_at == START + timedelta(hours=1)
        assert kept.expires_at is None
        ids = [secret.id, raw.id]
        before = _every_read(memory, ids)
        assert SECRET in before and RAW_SECRET in before and NOTE in before, "the reads must see it first"

        clock.advance(minutes=59)
        assert SECRET in _every_read(memory, ids), "not before it expires"
        clock.advance(minutes=1)  # exactly at expires_at: gone
        after = _every_read(memory, ids)
        for word in (SECRET, RAW_SECRET, NOTE):
            assert word not in after, word
        assert memory.get(secret.id, user_id="ada") is None
        assert "Ada likes tea." in after  # the rest reads as before
        assert [hit.memory.id for hit in memory.search("tea", user_id="ada")] == [kept.id]


def test_what_is_given_again_without_expiry_is_kept_apart_from_what_expires(db_path, clock):
    """A raw turn given again is one memory; given again to be kept longer it is another, so
    that the expiring one takes no input that is to stay with it."""
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        first = memory.add("The gate code is 4417.", user_id="ada", at=START, expires_in="2h").memories[0]
        again = memory.add("The gate code is 4417.", user_id="ada", at=START, expires_in="2h").memories[0]
        kept = memory.add("The gate code is 4417.", user_id="ada", at=START).memories[0]
        assert again.id == first.id and kept.id != first.id
        clock.advance(hours=3)
        assert [m.id for m in memory.get_all(user_id="ada")] == [kept.id]
        assert memory.add("The gate code is 4417.", user_id="ada", at=START).memories[0].id == kept.id


def test_expiry_is_checked_before_anything_is_stored(memory, clock):
    for bad, why in (
        (dict(expires_at=START - timedelta(seconds=1)), "not in the future"),
        (dict(expires_at=START), "not in the future"),
        (dict(expires_in="-1h"), "interval"),
        (dict(expires_in=0), "positive"),
        (dict(expires_in="soon"), "interval"),
        (dict(expires_at="2026-04-01", expires_in="1h"), "not both"),
        (dict(expires_in=1e15), "9999"),
    ):
        with pytest.raises(InvalidInputError, match=why):
            memory.add("nothing is stored", user_id="ada", **bad)
    assert memory.get_all(user_id="ada") == []
    when = memory.add("kept a day", user_id="ada", expires_in=timedelta(days=1)).memories[0].expires_at
    assert when == START + timedelta(days=1)
    assert memory.log("a step", user_id="ada", expires_at="2026-03-03")[0].expires_at == datetime(
        2026, 3, 3, tzinfo=timezone.utc
    )


def test_a_revision_keeps_the_expiry_of_what_it_revises(db_path, clock):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        first = memory.add("Room 12 is booked.", user_id="ada", expires_in="1h").memories[0]
        revised = memory.update(first.id, "Room 14 is booked.", user_id="ada")
        assert revised.version == 2 and revised.expires_at == first.expires_at
        clock.advance(hours=1)
        assert memory.get(first.id, user_id="ada") is None
        assert memory.search("Room booked", user_id="ada") == []


def _audit_text(memory):
    return json.dumps([entry.model_dump(mode="json") for entry in memory.audit(limit=1000)])


def test_maintenance_erases_what_expired_to_the_byte_and_leaves_a_receipt_without_content(db_path, clock):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(_facts)) as memory:
        secret = memory.add(f"Ada's locker code is {SECRET}.", user_id="ada", expires_in="1h").memories[0]
        memory.add(f"Ada said {RAW_SECRET} on the phone.", user_id="ada", infer=False, expires_in="1h")
        kept = memory.add("Ada likes tea.", user_id="ada").memories[0]
        memory.feedback(secret.id, "wrong", note=f"it said {NOTE}", user_id="ada")
        vector = memory.embedder.embed([secret.content])[0].tobytes()
        words = (SECRET, RAW_SECRET, NOTE)
        assert unseen(db_path, words, [vector]) == [], "the scan must see it first"
        assert memory.maintain(all_scopes=True).erased == {}, "nothing is due yet"
        assert unseen(db_path, words, [vector]) == []

        clock.advance(hours=1)
        stats = memory.stats()
        assert (stats["expiring_memories"], stats["memories_past_expiry"]) == (2, 2)
        report = memory.maintain(all_scopes=True)
        assert report.erased["memories"] == 2 and report.erased["episodes"] == 2
        assert (memory.stats()["expiring_memories"], memory.stats()["memories_past_expiry"]) == (0, 0)
        assert report.erased["vectors"] == 2 and report.erased["feedback"] == 1
        assert leaks(db_path, words, [vector]) == []
        assert [m.id for m in memory.get_all(user_id="ada")] == [kept.id]
        receipts = [e for e in memory.audit(limit=1000) if e.operation == "retention"]
        assert len(receipts) == 1 and receipts[0].counts["memories"] == 2
        for word in words:
            assert word not in _audit_text(memory)
        # Erased: the history says so, without the text.
        assert [e.event for e in memory.history(secret.id, user_id="ada")] == ["ADD", "DELETE"]
        assert memory.maintain(all_scopes=True).erased == {}, "a second run finds nothing"
        assert len([e for e in memory.audit(limit=1000) if e.operation == "retention"]) == 1


def test_a_policy_erases_only_its_scope_and_kinds(db_path, clock):
    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(_facts)) as memory:
        policy = memory.retention(user_id="ada", erase_after="30d", kinds=["turn"])
        assert policy.erase_after == timedelta(days=30) and policy.kinds == ("turn",)
        assert memory.retention(user_id="bob").erase_after is None  # the config's: keep
        ada_turn = memory.add("Ada: call me after six.", user_id="ada", infer=False).memories[0]
        ada_fact = memory.add("Ada likes tea.", user_id="ada").memories[0]
        bob_turn = memory.add("Bob: call me after six.", user_id="bob", infer=False).memories[0]
        pinned = memory.add("Ada: my badge is 7.", user_id="ada", infer=False).memories[0]
        memory.pin(pinned.id, user_id="ada")
        clock.advance(days=29)
        young = memory.add("Ada: lunch at noon.", user_id="ada", infer=False).memories[0]
        assert memory.maintain(all_scopes=True).erased == {}
        clock.advance(days=1)
        report = memory.maintain(user_id="ada")
        assert report.erased["memories"] == 1 and report.erased["episodes"] == 2  # the turn's and the fact's
        left = {m.id for m in memory.get_all(user_id="ada")}
        assert left == {ada_fact.id, pinned.id, young.id}
        assert memory.get(ada_fact.id, user_id="ada").content == "Ada likes tea."
        assert [m.id for m in memory.get_all(user_id="bob")] == [bob_turn.id]
        assert memory.get(ada_turn.id, user_id="ada") is None
        # A policy naming pinned memories takes them too; reset forgets the stored one.
        memory.retention(user_id="ada", pinned=True)
        assert memory.retention(user_id="ada").kinds == ("turn",)
        assert memory.maintain(user_id="ada").erased["memories"] == 1
        assert memory.retention(user_id="ada", reset=True).erase_after is None


def test_policies_are_checked(memory):
    for bad, why in (
        (dict(erase_after="-3d"), "interval"),
        (dict(erase_after=0), "positive"),
        (dict(kinds=["secrets"]), "kinds"),
        (dict(erase_later="3d"), "unknown retention setting"),
        (dict(pinned="yes please"), "pinned"),
    ):
        with pytest.raises(InvalidInputError, match=why):
            memory.retention(user_id="ada", **bad)
    assert memory.retention(user_id="ada").erase_after is None
    with pytest.raises(InvalidInputError):
        memory.retention(erase_after="1d")  # a scope is needed: no user, agent or run


def test_a_week_of_sessions_with_a_day_long_run_policy_keeps_today_and_every_fact(db_path, clock):
    """Seven days, two users, one session (run) a day each, with a 24-hour policy for runs:
    after each night's maintenance only the sessions of the last day are left, and every fact
    stored for a user (outside runs) is intact."""
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        for user in ("ada", "bob"):
            memory.retention(user_id=user, erase_runs_after="24h")
        facts = {}
        for day in range(7):
            for user in ("ada", "bob"):
                run = f"day-{day}"
                for hour in range(3):
                    memory.add(f"{user} session {day} message {hour}", user_id=user, run_id=run, infer=False)
                    clock.advance(minutes=20)
                facts[(user, day)] = memory.add(f"{user} fact number {day}", user_id=user).memories[0].id
                memory.blocks.set("notes", f"{user} notes of day {day}", user_id=user, run_id=run)
            clock.advance(hours=20)  # the night: maintenance runs
            memory.maintain(all_scopes=True)
            for user in ("ada", "bob"):
                runs = {m.run_id for m in memory.get_all(user_id=user, limit=1000) if m.run_id}
                assert runs == {f"day-{day}"}, (day, runs)
                kept = {m.id for m in memory.get_all(user_id=user, limit=1000) if m.run_id is None}
                assert kept == {facts[(user, d)] for d in range(day + 1)}
            assert memory.check().ok
        clock.advance(hours=4)  # a day after the last session's last message
        report = memory.maintain(all_scopes=True)
        assert report.erased["memories"] == 6 and report.erased["episodes"] == 6
        assert memory.check().ok
        for user in ("ada", "bob"):
            assert all(m.run_id is None for m in memory.get_all(user_id=user, limit=1000))
            assert memory.blocks.get("notes", user_id=user, run_id="day-6") is not None  # blocks kept
        # A policy that names blocks takes them too (each run's, with their versions).
        memory.retention(user_id="ada", blocks=True)
        assert memory.maintain(all_scopes=True).erased["blocks"] == 7
        assert memory.blocks.get("notes", user_id="ada", run_id="day-6") is None
        assert memory.blocks.get("notes", user_id="bob", run_id="day-6") is not None


def _merge_all(call):
    if call.output_fields == ["ops"]:
        return {"ops": [{"action": "ADD", "content": turn["text"]} for turn in call.inputs["turns"]]}
    if call.output_fields == ["decisions"]:
        aliases = [memory["alias"] for memory in call.inputs["memories"]]
        action = "MERGE" if len(aliases) == 2 else "SUMMARIZE"
        return {
            "decisions": [
                {"action": action, "aliases": aliases, "content": "Ada's sister Ana lives in Lisbon."}
            ]
        }
    raise AssertionError(call.signature)


def test_a_merge_expires_when_the_first_of_its_parts_does(tmp_path, clock):
    """A merged memory says what its parts said: it is not read past the expiry of any of them."""
    lm = scripted_lm(_merge_all)
    settings = {"lifecycle": {"merge_similarity": 0.5}}
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(64), lm=lm, **settings) as memory:
        memory.add("Ada's sister Ana lives in Lisbon.", user_id="ada")
        memory.add("Ada's sister Ana lives in Lisbon now.", user_id="ada", expires_in="2d")
        clock.advance(days=1)
        report = memory.maintain(user_id="ada", consolidate=True)
        assert report.merges == 1
        (merged,) = memory.get_all(user_id="ada")
        assert (
            merged.content == "Ada's sister Ana lives in Lisbon."
            and merged.expires_at == START + timedelta(days=2)
        )
        clock.advance(days=1)
        assert memory.get_all(user_id="ada") == []
        assert memory.maintain(user_id="ada").erased["memories"] == 3  # the merge and both parts


def test_a_summary_expires_when_the_first_of_what_it_condenses_does(tmp_path, clock):
    """A summary quotes no episode, only the memories it condenses (memory_links)."""
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(64), lm=scripted_lm(_merge_all)) as memory:
        memory.add(["Ada flew to Tokyo.", "Ada saw Kyoto.", "Ada flew home."], user_id="ada")
        memory.add("Ada bought tea in Uji.", user_id="ada", expires_in="300d")
        memory.lifecycle_settings(user_id="ada", strategy="summarize")
        clock.advance(days=200)
        assert memory.maintain(user_id="ada").summaries == 1
        (summary,) = memory.get_all(user_id="ada")
        assert summary.kind == "note" and summary.expires_at == START + timedelta(days=300)
        clock.advance(days=100)
        assert memory.get_all(user_id="ada") == []  # the summary went with the part that expired
        left = sorted(m.content for m in memory.get_all(user_id="ada", include_archived=True))
        assert left == ["Ada flew home.", "Ada flew to Tokyo.", "Ada saw Kyoto."]  # archived, kept


def test_a_version_made_from_input_that_expires_takes_its_memory_with_it(db_path, clock):
    """An LM update made from a message that expires: the memory (every version) is not read
    past that expiry, and maintenance erases it, as `delete` would."""

    def update_home(call):
        turn = call.inputs["turns"][0]["text"]
        existing = call.inputs["existing_memories"]
        if existing:
            return {"ops": [{"action": "UPDATE", "target": existing[0]["alias"], "content": turn}]}
        return {"ops": [{"action": "ADD", "content": turn}]}

    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(update_home)) as memory:
        home = memory.add("Ada lives in Porto.", user_id="ada").memories[0]
        moved = memory.add("Ada lives in Porto, in a flat near the river.", user_id="ada", expires_in="1h")
        assert moved.memories[0].id == home.id and moved.memories[0].version == 2
        clock.advance(hours=1)
        assert memory.get(home.id, user_id="ada") is None
        assert memory.search("Porto", user_id="ada") == []
        assert memory.maintain(user_id="ada").erased["memories"] == 2


def test_an_expired_memory_cannot_be_pinned_restored_revised_or_judged_but_can_be_deleted(db_path, clock):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        gone = memory.add(f"The vault word is {SECRET}.", user_id="ada", expires_in="1h").memories[0]
        clock.advance(hours=1)
        for act in (
            lambda: memory.pin(gone.id, user_id="ada"),
            lambda: memory.restore(gone.id, user_id="ada"),
            lambda: memory.update(gone.id, "The vault word changed.", user_id="ada"),
            lambda: memory.feedback(gone.id, "useful", user_id="ada"),
        ):
            with pytest.raises(MemoryNotFoundError):
                act()
        assert memory.delete(gone.id, user_id="ada").counts["memories"] == 1
        assert memory.maintain(user_id="ada").erased == {}


def test_scheduled_maintenance_erases_what_expired(tmp_path, clock):
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(64), maintenance_every=0.05) as memory:
        memory.add("A one-hour note.", user_id="ada", infer=False, expires_in="1h")
        clock.advance(hours=2)
        deadline = time.monotonic() + 10
        while (
            not any(report.erased for report in memory.maintenance_reports()) and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert [report.erased["memories"] for report in memory.maintenance_reports() if report.erased] == [1]
        assert memory.stats()["tables"]["memories"] == 0


def test_the_remember_tool_saves_an_expiring_note_as_said_and_never_revises_what_stays(db_path, clock):
    """An agent's note for the session expires; through the write program it could revise a
    memory that is to stay (which would then expire with it), so it is saved as said."""

    def revise_everything(call):
        existing = call.inputs["existing_memories"]
        text = call.inputs["turns"][0]["text"]
        if existing:  # an LM (or an injected instruction) that rewrites what it sees
            return {"ops": [{"action": "UPDATE", "target": existing[0]["alias"], "content": text}]}
        return {"ops": [{"action": "ADD", "content": text}]}

    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(revise_everything)) as memory:
        home = memory.add("Ada lives in Porto.", user_id="ada").memories[0]
        remember = {tool.name: tool for tool in memory.tools(user_id="ada")}["remember"]
        assert "saved" in remember(content="Ada lives in Porto, at the hotel this week.", expires_in="2h")
        for bad in ("-2h", "forever", "1e15"):
            assert remember(content="Ada's note.", expires_in=bad).startswith("error"), bad
        clock.advance(hours=2)
        memory.maintain(user_id="ada")
        assert [m.id for m in memory.get_all(user_id="ada")] == [home.id]
        assert memory.get(home.id, user_id="ada").version == 1


def test_policy_intervals_are_bounded(memory, clock):
    """An interval the clock cannot subtract is refused when it is set, not when maintain runs."""
    with pytest.raises(InvalidInputError, match="erase_after"):
        memory.retention(user_id="ada", erase_after=1e13)
    memory.retention(user_id="ada", erase_after=10**10)
    memory.add("kept", user_id="ada", infer=False)
    assert memory.maintain(user_id="ada").erased == {}


def test_the_configs_policy_applies_where_no_scope_has_one(tmp_path, clock):
    settings = {"retention": {"erase_runs_after": "24h"}}
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(64), **settings) as memory:
        memory.add("In the lobby now.", user_id="ada", run_id="visit", infer=False)
        memory.add("Ada likes tea.", user_id="ada", infer=False)
        memory.retention(user_id="bob", erase_after="90d")  # bob's own: runs kept 90 days
        memory.add("Bob is in the lobby.", user_id="bob", run_id="visit", infer=False)
        clock.advance(days=1)
        assert memory.maintain(all_scopes=True).erased["memories"] == 1
        assert [m.content for m in memory.get_all(user_id="ada")] == ["Ada likes tea."]
        assert [m.content for m in memory.get_all(user_id="bob")] == ["Bob is in the lobby."]
