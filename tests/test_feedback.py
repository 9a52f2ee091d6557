"""Feedback kept in the file (docs/feedback.md): each source (a correction, a verdict, a restore
after archiving, an operation validation refused, a request to forget carried out) makes exactly
its record, naming the write run and operation behind the judged version; scopes are walls; every
record has its audit entry; the CLI lists and shows them. Erasure's byte scans are in
tests/test_purge.py, the export round trip in tests/test_export_import.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError, MemoryNotFoundError, ScopeError
from dspy_memory.util.timeutil import set_clock

from .scripted import alias_of, fused_lm

pytestmark = pytest.mark.backends


def as_said(turns, existing):
    """A write program that keeps each message as a fact about Ada, and on "forget" deletes the
    memory it names."""
    text = turns[-1]["text"]
    if "forget" in text:
        return [{"action": "DELETE", "target": alias_of(existing, "bike")}]
    return [{"action": "ADD", "content": text.split(": ", 1)[-1], "subject": "Ada"}]


def opened(db_path, decide=as_said, **settings):
    return Memory(db_path, embedder=HashEmbedder(64), lm=fused_lm(decide), **settings)


def only(records, **expected):
    [record] = records
    assert {name: getattr(record, name) for name in expected} == expected
    return record


def test_a_correction_names_the_version_corrected_and_the_run_that_made_it(db_path):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        memory.update(made.memory_id, "Ada's bike is blue.", reason="I said blue", user_id="ada")
        record = only(
            memory.feedback_records(user_id="ada"),
            source="correction",
            verdict="wrong",
            memory_id=made.memory_id,
            memory_version=1,
            op_index=0,
            note="I said blue",
            expected={"content": "Ada's bike is blue."},
            actor="user",
        )
        run = memory.store.runs.get(record.write_run_id, scope=None)
        assert [(op.action, op.applied, op.memory_id, op.version) for op in run.ops] == [
            ("ADD", "ADD", made.memory_id, 1)
        ]
        # The text judged is there by its version.
        assert memory.store.get_memory(made.memory_id, version=1).content == "my bike is red."
        # A raw turn corrected by hand was made by no run.
        [turn] = memory.add("Ada walks to work.", user_id="ada", infer=False).memories
        memory.update(turn.id, "Ada cycles to work.", user_id="ada")
        only(memory.feedback_records(user_id="ada", memory_id=turn.id), write_run_id=None, note=None)
        # An update that changes nothing is no correction.
        memory.update(turn.id, "Ada cycles to work.", user_id="ada")
        assert len(memory.feedback_records(user_id="ada")) == 2


def test_every_verdict_is_kept_and_anything_else_is_refused(db_path):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        [bobs] = memory.add("Bob: my car is green.", user_id="bob").ops
        for verdict in ("wrong", "outdated", "irrelevant", "useful"):
            record = memory.feedback(made.memory_id, verdict, note=f"{verdict}!", user_id="ada")
            assert (record.source, record.verdict, record.note, record.expected) == (
                "verdict", verdict, f"{verdict}!", {"verdict": verdict},
            )  # fmt: skip
            assert record.memory_version == 1 and record.op_index == 0 and record.write_run_id
        assert [r.verdict for r in memory.feedback_records(user_id="ada")] == [
            "useful", "irrelevant", "outdated", "wrong",
        ]  # fmt: skip
        with pytest.raises(InvalidInputError, match="'wrong', 'outdated', 'irrelevant', 'useful'"):
            memory.feedback(made.memory_id, "meh", user_id="ada")
        with pytest.raises(InvalidInputError, match="note must be a string"):
            memory.feedback(made.memory_id, "wrong", note=5, user_id="ada")
        with pytest.raises(MemoryNotFoundError):
            memory.feedback("00000000-0000-0000-0000-000000000000", "wrong", user_id="ada")
        with pytest.raises(ScopeError):
            memory.feedback(made.memory_id, "wrong")  # strict mode: the scope that owns it
        # Scopes are walls: ada's scope does not reach bob's memory, nor bob's her feedback.
        with pytest.raises(MemoryNotFoundError):
            memory.feedback(bobs.memory_id, "wrong", user_id="ada")
        assert memory.feedback_records(user_id="bob") == []
        first = memory.feedback_records(user_id="ada")[0]
        assert memory.get_feedback(first.id, user_id="bob") is None
        assert memory.get_feedback(first.id, user_id="ada") == first
        assert memory.get_feedback(first.id, all_scopes=True) == first
        ada = memory.scoped(user_id="ada")
        assert len(ada.feedback_records()) == 4 and ada.get_feedback(first.id) == first
        with pytest.raises(ScopeError):
            ada.feedback_records(user_id="bob")
        with pytest.raises(InvalidInputError, match="source"):
            memory.feedback_records(user_id="ada", source="gossip")


def test_a_note_is_redacted_like_everything_else(db_path):
    with opened(db_path, redact=True) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        secret = "AKIAIOSFODNN7EXAMPLE"
        record = memory.feedback(made.memory_id, "wrong", note=f"key {secret}", user_id="ada")
        assert secret not in record.note and secret not in memory.feedback_records(user_id="ada")[0].note


@pytest.fixture
def clock():
    now = [datetime(2024, 1, 1, 9, tzinfo=timezone.utc)]
    set_clock(lambda: now[0])
    yield now
    set_clock(None)


def test_restoring_an_archived_memory_names_what_archived_it(db_path, clock):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        [kept] = memory.add("Ada: my car is green.", user_id="ada").ops
        clock[0] += timedelta(days=200)
        assert memory.maintain(user_id="ada").archived == 2
        memory.restore(made.memory_id, user_id="ada")
        record = only(
            memory.feedback_records(user_id="ada"),
            source="restore",
            memory_id=made.memory_id,
            memory_version=1,
            op_index=0,
            expected={"status": "active", "archived_by": "DECAY", "archive_reason": "forgotten"},
        )
        assert record.write_run_id == memory.store.runs.made(made.memory_id, 1)[0]
        # Restoring what is active is no feedback; pinning an archived memory restores it: one.
        memory.restore(made.memory_id, user_id="ada")
        memory.pin(kept.memory_id, user_id="ada")
        assert [r.source for r in memory.feedback_records(user_id="ada")] == ["restore", "restore"]


def refuses(turns, existing):
    """A write program whose second answer the validator mostly refuses."""
    text = turns[-1]["text"]
    if not existing:
        return [{"action": "ADD", "content": text, "subject": "Ada", "predicate": "lives_in"}]
    return [
        {"action": "DELETE", "target": 1},  # no one asked to forget anything
        {"action": "UPDATE", "target": 7, "content": "Ada lives in Rome."},  # not a memory shown
        # about another relation: kept as an ADD
        {"action": "INVALIDATE", "target": 1, "content": "Ada works in Rome.", "subject": "Ada",
         "predicate": "works_in"},
    ]  # fmt: skip


def test_each_refused_operation_is_a_labelled_example(db_path):
    with opened(db_path, refuses) as memory:
        [lives] = memory.add("Ada lives in Oslo.", user_id="ada").memories
        result = memory.add("Ada lives in Rome now, and works there.", user_id="ada")
        assert [op.action for op in result.ops] == ["ADD"]
        records = sorted(memory.feedback_records(user_id="ada"), key=lambda r: r.op_index)
        assert [(r.source, r.op_index, r.memory_id, r.actor) for r in records] == [
            ("refused", 0, lives.id, "validator"),
            ("refused", 1, None, "validator"),
            ("refused", 2, lives.id, "validator"),
        ]
        assert records[0].note == "DELETE without an explicit request to forget in the input"
        assert records[1].note == "unknown alias 7: not one of the memories shown"
        assert records[0].expected == {"applied": False}
        assert records[2].expected == {"applied": False, "applied_as": "ADD"}
        assert {r.write_run_id for r in records} == {records[0].write_run_id}
        run = memory.store.runs.get(records[0].write_run_id, scope=None)
        assert [(c.alias, c.memory_id, c.version) for c in run.candidates] == [(1, lives.id, 1)]
        assert [(op.action, op.target, op.applied, op.refused) for op in run.ops] == [
            ("DELETE", 1, None, "no_forget_request"),
            ("UPDATE", 7, None, "unknown_alias"),
            ("INVALIDATE", 1, "ADD", "kept_as_add"),
        ]
        assert (run.ops[2].memory_id, run.ops[2].version) == (result.ops[0].memory_id, 1)
        # The runs shown a version before a time (learning from an "outdated" verdict).
        assert memory.store.runs.seen(lives.id, 1, before=records[0].created_at) == [(run.uid, 1)]
        assert memory.store.runs.seen(lives.id, 1, before=lives.created_at) == []


def test_a_request_to_forget_carried_out_is_a_label_with_no_content(db_path):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike lock code is 0451.", user_id="ada").ops
        memory.feedback(made.memory_id, "useful", note="code 0451", user_id="ada")
        memory.add("Ada: please forget my bike lock code.", user_id="ada")
        # The memory's own feedback went with it; the request left one content-free record.
        record = only(
            memory.feedback_records(user_id="ada"),
            source="forget",
            memory_id=None,
            memory_version=None,
            note=None,
            expected={"action": "DELETE"},
            op_index=0,
        )
        run = memory.store.runs.get(record.write_run_id, scope=None)
        assert (run.ops[0].action, run.ops[0].applied, run.ops[0].memory_id) == (
            "DELETE",
            "DELETE",
            made.memory_id,
        )
        assert memory.get(made.memory_id, user_id="ada") is None


def test_every_record_has_an_audit_entry_without_its_note(db_path):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        memory.update(made.memory_id, "Ada's bike is blue.", reason="quietsecretnote", user_id="ada")
        memory.feedback(made.memory_id, "useful", note="quietsecretnote", user_id="ada")
        entries = memory.audit(operation="feedback", user_id="ada")
        assert [(e.details["source"], e.details["verdict"], e.memory_ids) for e in entries] == [
            ("verdict", "useful", [made.memory_id]),
            ("correction", "wrong", [made.memory_id]),
        ]
        assert all(e.counts == {"feedback": 1} for e in entries)
        assert "quietsecretnote" not in json.dumps(
            [e.model_dump(mode="json") for e in memory.audit(limit=1000)]
        )
        receipt = memory.delete(made.memory_id, user_id="ada")
        assert receipt.counts["feedback"] == 2
        assert memory.audit(operation="delete")[0].counts["feedback"] == 2
        assert memory.verify_audit().ok


def test_the_cli_lists_and_shows_feedback(db_path, capsys):
    with opened(db_path) as memory:
        [made] = memory.add("Ada: my bike is red.", user_id="ada").ops
        memory.feedback(made.memory_id, "wrong", note="it is blue, " + "very " * 20 + "blue", user_id="ada")
    base = ["--db", db_path, "--embedder", "test"]
    assert main(["feedback", "list", "--user", "ada", *base]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "verdict" in line and "wrong" in line and made.memory_id[:8] in line and line.endswith("…")
    assert main(["feedback", "list", "--user", "ada", "--source", "restore", *base]) == 0
    assert capsys.readouterr().out.strip() == "no feedback"
    assert main(["feedback", "list", "--user", "ada", "--json", *base]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert main(["feedback", "show", listed["id"], "--user", "ada", *base]) == 0
    out = capsys.readouterr().out
    assert f"memory {made.memory_id} v1: my bike is red." in out
    assert "op 0: ADD: applied as ADD" in out and "episodes: " in out
    assert main(["feedback", "show", listed["id"], "--user", "ada", "--json", *base]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["feedback"]["id"] == listed["id"] and shown["memory"]["content"] == "my bike is red."
    assert [op["applied"] for op in shown["run"]["ops"]] == ["ADD"]
    assert main(["feedback", "show", listed["id"], "--user", "bob", *base]) == 1
    assert main(["feedback", "list", *base]) == 2
    assert "--all-scopes" in capsys.readouterr().err
    assert main(["feedback", "list", "--all-scopes", *base]) == 0
    assert listed["id"] in capsys.readouterr().out
