"""Export and import (docs/governance.md, "Export and import"): one JSONL format on both backends;
a round trip gives the same records and the same answers on both time axes; importing twice
changes nothing; another embedder re-embeds; a scope's export holds nothing of another; damaged,
edited or hostile files are refused before anything is written."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import DSPyMemoryError
from dspy_memory.governance.exchange_format import FORMAT_VERSION, ExportFileError
from dspy_memory.store.exchange import ImportConflictError
from dspy_memory.testing import scripted_lm
from dspy_memory.util.timeutil import set_clock

from .leakscan import leaks, markers
from .pg import fresh_schema
from .test_migrate import build_source

pytestmark = pytest.mark.backends

SCOPES = (
    {"user_id": "ada"},
    {"user_id": "bob"},
    {"user_id": "cy", "agent_id": "helper"},
    {"agent_id": "helper"},
)
QUERIES = ("where does Ada live", "sandwiches lemonade hike", "tea peanuts", "note")


def opened(path, dim=64):
    return Memory(path, embedder=HashEmbedder(dim), track_access=False)


def records(path) -> list[str]:
    """The record lines of an export (header and trailer left out)."""
    with open(path, "rb") as raw:
        data = raw.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode().splitlines()[1:-1]


def answers(path, known_at) -> dict:
    """What the store says, on both time axes, in every scope (volatile fields left out)."""

    def row(record):
        return (
            record.id, record.version, record.content, record.kind, record.subject, record.predicate,
            record.object, record.valid_at, record.invalid_at, record.created_at, record.expired_at,
            record.status, record.archived_at, record.pinned, record.superseded_by, record.expires_at,
        )  # fmt: skip

    found = {}
    with opened(path) as memory:
        for scope in SCOPES:
            key = json.dumps(scope)
            for query in QUERIES:
                for label, view in (
                    ("now", {}),
                    ("as_of", {"as_of": "2024-02-01"}),
                    ("known", {"known_at": known_at}),
                ):
                    hits = memory.search(query, k=20, **scope, **view)
                    found[key, query, label] = [
                        (row(hit.memory), [p.episode_id for p in hit.provenance]) for hit in hits
                    ]
            found[key, "get_all"] = [row(r) for r in memory.get_all(**scope, include_archived=True)]
            found[key, "get_all as_of"] = [row(r) for r in memory.get_all(**scope, as_of="2024-02-01")]
            found[key, "get_all known_at"] = [row(r) for r in memory.get_all(**scope, known_at=known_at)]
            for subject in ("Ada", "Bob"):
                found[key, "timeline", subject] = [row(r) for r in memory.timeline(subject=subject, **scope)]
                earlier = memory.timeline(subject=subject, known_at=known_at, **scope)
                found[key, "timeline known_at", subject] = [row(r) for r in earlier]
            for record in memory.get_all(**scope, include_archived=True, known_at=known_at):
                found[key, "history", record.id] = [
                    event.model_dump(exclude={"id"}) for event in memory.history(record.id, **scope)
                ]
    return found


def built(path) -> str:
    """The test_migrate store (LM facts with an invalidation, raw turns in a conversation, a
    correction, a delete, blocks, settings, a pin, an archived memory, a summary); returns a
    time at which the corrected turn's first version was believed (for known_at)."""
    build_source(path)
    with opened(path) as memory:
        [changed] = [r for r in memory.get_all(user_id="bob") if r.version == 2]
        [first] = [e for e in memory.history(changed.id, user_id="bob") if e.event == "ADD"]
        return first.created_at.isoformat()


def test_round_trip_keeps_records_and_answers_on_both_time_axes(db_path, other_store, tmp_path):
    known_at = built(db_path)
    before = answers(db_path, known_at)
    assert (
        before['{"user_id": "ada"}', "where does Ada live", "as_of"]
        != before['{"user_id": "ada"}', "where does Ada live", "now"]
    )
    assert before['{"user_id": "bob"}', "get_all known_at"] != before['{"user_id": "bob"}', "get_all"]
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    with opened(db_path) as memory:
        exported = memory.export(first, all_scopes=True, include_embeddings=True)
    assert exported.counts["memory"] == exported.counts["vector"] > 10 and exported.expired == {}
    expiring = [json.loads(line) for line in records(first) if '"expires_at":"' in line]
    assert {record["record"] for record in expiring} == {"episode", "memory"}  # bob's gym locker
    assert all(
        exported.counts[kind] > 0
        for kind in (
            "entity",
            "episode",
            "memory_event",
            "memory_link",
            "block_version",
            "turn_context",
            "lifecycle_settings",
            "retention_settings",
            "write_run",
            "write_run_candidate",
            "write_run_op",
            "feedback",
        )
    )
    copy = other_store()
    with opened(copy) as memory:
        report = memory.import_(first)
        assert report.reembedded == 0 and report.new["memory"] == exported.counts["memory"]
        again = memory.export(second, all_scopes=True, include_embeddings=True)
        assert memory.check().ok
    assert records(first) == records(second) and again.sha256 == exported.sha256
    assert answers(copy, known_at) == before


def test_the_same_data_exports_to_the_same_bytes_but_the_time(db_path, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "one.jsonl", user_id="ada")
        memory.export(tmp_path / "two.jsonl.gz", user_id="ada")
    one, two = (
        (tmp_path / "one.jsonl").read_bytes(),
        gzip.decompress((tmp_path / "two.jsonl.gz").read_bytes()),
    )
    assert one.split(b"\n")[1:] == two.split(b"\n")[1:]
    header = json.loads(one.split(b"\n")[0])
    assert header["format"] == "dspy-memory-export" and header["scope"] == {"user_id": "ada"}
    assert header["embedder"] == {"name": "test-hash-v1:64", "dim": 64} and header["embeddings"] is False
    trailer = json.loads(one.rstrip(b"\n").split(b"\n")[-1])
    assert (
        trailer["sha256"]
        == hashlib.sha256(b"".join(line + b"\n" for line in one.split(b"\n")[1:-2])).hexdigest()
    )


def table_counts(path, dim=64) -> dict:
    with opened(path, dim) as memory:
        stats = memory.stats()
        return {**stats["tables"], "current": stats["current_memories"]}


def test_importing_twice_changes_nothing(db_path, other_store, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "all.jsonl", all_scopes=True)
    copy = other_store()
    with opened(copy) as memory:
        first = memory.import_(tmp_path / "all.jsonl")
    counts = table_counts(copy)
    with opened(copy) as memory:
        second = memory.import_(tmp_path / "all.jsonl")
        memory.export(tmp_path / "again.jsonl", all_scopes=True)
    assert first.changed and not second.changed
    assert second.present == first.new and set(second.new.values()) == {0}
    assert table_counts(copy) == counts
    assert records(tmp_path / "all.jsonl") == records(tmp_path / "again.jsonl")


def test_another_embedder_re_embeds(db_path, other_store, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "with.jsonl", user_id="ada", include_embeddings=True)
        memory.export(tmp_path / "without.jsonl", user_id="ada")
    file_vectors = [
        json.loads(line) for line in records(tmp_path / "with.jsonl") if '"record":"vector"' in line
    ]
    for name in ("with.jsonl", "without.jsonl"):
        copy = other_store()
        with opened(copy, dim=32) as memory:
            report = memory.import_(tmp_path / name)
            assert report.reembedded == len(file_vectors) > 0 and report.embedder == "test-hash-v1:32"
            assert (
                "Denver"
                in memory.search("where does Ada live", user_id="ada", recipe="dense")[0].memory.content
            )
            memory.export(tmp_path / "mine.jsonl", user_id="ada", include_embeddings=True)
        mine = [json.loads(line) for line in records(tmp_path / "mine.jsonl") if '"record":"vector"' in line]
        assert {v["dim"] for v in mine} == {32} and len(mine) == len(file_vectors)
    # The same embedder: the file's vectors are used as they are.
    copy = other_store()
    with opened(copy) as memory:
        assert memory.import_(tmp_path / "with.jsonl", reembed="never").reembedded == 0
        memory.export(tmp_path / "same.jsonl", user_id="ada", include_embeddings=True)
    assert records(tmp_path / "same.jsonl") == records(tmp_path / "with.jsonl")
    copy = other_store()
    with opened(copy, dim=32) as memory, pytest.raises(ExportFileError, match="reembed='auto'"):
        memory.import_(tmp_path / "with.jsonl", reembed="never")
    assert table_counts(copy, 32)["memories"] == 0


def test_a_scope_export_holds_nothing_of_another(db_path, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "ada.jsonl", user_id="ada")
        memory.export(tmp_path / "helper.jsonl", agent_id="helper")  # stored without a user only
    text = (tmp_path / "ada.jsonl").read_text()
    for word in ("sandwiches", "Carla", "peanuts", "tea", "bob", "note without"):
        assert word not in text
    users = {json.loads(line).get("user_id", "ada") for line in records(tmp_path / "ada.jsonl")}
    assert users == {"ada"}
    helper = records(tmp_path / "helper.jsonl")
    assert helper and {json.loads(line).get("user_id") for line in helper} == {None}
    assert "note without a user" in "\n".join(helper) and "peanuts" not in "\n".join(helper)


def rewritten(source, target, change) -> None:
    """A copy of an export whose records were changed by `change(list of dicts)`, with a trailer
    and header made to match (a forger's file: only the content checks can refuse it)."""
    lines = (source).read_text().splitlines()
    header, body = json.loads(lines[0]), [json.loads(line) for line in lines[1:-1]]
    change(body)
    text = [json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n" for r in body]
    counts: dict = {}
    for record in body:
        counts[record.get("record")] = counts.get(record.get("record"), 0) + 1
    trailer = {
        "record": "trailer",
        "counts": counts,
        "sha256": hashlib.sha256("".join(text).encode()).hexdigest(),
    }
    target.write_text(
        json.dumps({**header, "counts": counts}) + "\n" + "".join(text) + json.dumps(trailer) + "\n"
    )


def first_of(kind):
    def pick(body):
        return next(record for record in body if record["record"] == kind)

    return pick


DAMAGE = {
    "truncated": (
        lambda path, out: out.write_bytes(path.read_bytes()[: len(path.read_bytes()) * 2 // 3]),
        "cut short",
    ),
    "no trailer": (
        lambda path, out: out.write_text("".join(path.read_text().splitlines(True)[:-1])),
        "cut short",
    ),
    "edited record": (
        lambda path, out: out.write_text(path.read_text().replace("Denver", "Dallas")),
        "checksum",
    ),
    "empty": (lambda path, out: out.write_bytes(b""), "empty"),
    "not an export": (lambda path, out: out.write_text('{"hello": 1}\n'), "not a dspy-memory export"),
    "binary": (lambda path, out: out.write_bytes(b"\x00\xff" * 50), "not a dspy-memory export"),
    "future format": (
        lambda path, out: out.write_text(
            path.read_text().replace(f'"format_version":{FORMAT_VERSION}', '"format_version":99', 1)
        ),
        "format version 99",
    ),
    "unknown record type": (
        lambda path, out: rewritten(path, out, lambda body: first_of("memory")(body).update(record="memoir")),
        "unknown record type 'memoir'",
    ),
    "wrong field type": (
        lambda path, out: rewritten(path, out, lambda body: first_of("memory")(body).update(content=5)),
        "content",
    ),
    "unknown field": (
        lambda path, out: rewritten(path, out, lambda body: first_of("episode")(body).update(extra="x")),
        "extra",
    ),
    "bad time": (
        lambda path, out: rewritten(
            path, out, lambda body: first_of("memory")(body).update(valid_at="yesterday")
        ),
        "valid_at",
    ),
    "missing episode": (
        lambda path, out: rewritten(path, out, lambda body: body.remove(first_of("episode")(body))),
        "does not hold",
    ),
    "forged feedback verdict": (
        lambda path, out: rewritten(
            path, out, lambda body: first_of("feedback")(body).update(verdict="great")
        ),
        "verdict",
    ),
    "feedback about a memory the file lacks": (
        lambda path, out: rewritten(
            path, out, lambda body: first_of("feedback")(body).update(memory_id="m-none")
        ),
        "does not hold",
    ),
    "run op without its run": (
        lambda path, out: rewritten(path, out, lambda body: body.remove(first_of("write_run")(body))),
        "does not hold",
    ),
    "unknown key in the header's scope": (
        lambda path, out: out.write_text(
            path.read_text().replace('"scope":{"user_id":"ada"}', '"scope":{"team":"x","user_id":"ada"}', 1)
        ),
        "scope",
    ),
    "lone surrogate": (
        lambda path, out: out.write_text(path.read_text().replace("Denver", "\\ud800", 1)),
        "checksum|valid JSON",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_or_forged_files_are_refused_before_anything_is_written(
    db_path, other_store, tmp_path, damage
):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "ada.jsonl", user_id="ada")
    make, message = DAMAGE[damage]
    make(tmp_path / "ada.jsonl", tmp_path / "bad.jsonl")
    copy = other_store()
    with opened(copy) as memory, pytest.raises(ExportFileError, match=message):
        memory.import_(tmp_path / "bad.jsonl")
    assert set(table_counts(copy).values()) == {0}


def as_version(version, source, target) -> None:
    """`source` (an export) as a file of an older format `version` would hold it: without the
    records and fields that version did not know, and with its number in the header."""
    newer = {
        "record": {"retention_settings"} | ({"write_run_candidate", "write_run_op", "feedback"} if version < 2 else set()),
        "field": {"expires_at"} | ({"uid"} if version < 2 else set()),
    }  # fmt: skip

    def older(body):
        body[:] = [record for record in body if record["record"] not in newer["record"]]
        for record in body:
            for field in newer["field"]:
                record.pop(field, None)

    rewritten(source, target, older)
    text = target.read_text()
    assert f'"format_version": {FORMAT_VERSION}' in text
    target.write_text(text.replace(f'"format_version": {FORMAT_VERSION}', f'"format_version": {version}', 1))


def test_a_version_1_file_is_read_and_its_runs_are_matched_by_the_whole_row(db_path, other_store, tmp_path):
    """Files written before write runs had a uid (and before feedback) import, and again."""
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "new.jsonl", user_id="ada")
    as_version(1, tmp_path / "new.jsonl", tmp_path / "v1.jsonl")
    copy = other_store()
    with opened(copy) as memory:
        first = memory.import_(tmp_path / "v1.jsonl")
        second = memory.import_(tmp_path / "v1.jsonl")
    assert first.new["write_run"] > 0 and first.new["memory"] > 0 and not first.new.get("feedback")
    assert not second.changed and second.present["write_run"] == first.new["write_run"]


def test_a_version_2_file_is_read_and_nothing_of_it_expires(db_path, other_store, tmp_path):
    """Files written before expiry and retention policies (no `expires_at`, no
    retention_settings records) import; what they hold never expires."""
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "new.jsonl", all_scopes=True)
    as_version(2, tmp_path / "new.jsonl", tmp_path / "v2.jsonl")
    assert "expires_at" not in (tmp_path / "v2.jsonl").read_text()
    copy = other_store()
    with opened(copy) as memory:
        report = memory.import_(tmp_path / "v2.jsonl")
        assert report.new["memory"] > 10 and report.new["feedback"] > 0 and not report.expired
        assert report.new["retention_settings"] == 0
        assert all(r.expires_at is None for r in memory.get_all(user_id="bob"))
        assert memory.retention(user_id="ada").erase_after is None  # the config's
        assert not memory.import_(tmp_path / "v2.jsonl").changed


START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
# Words no other text holds: the expiring fact's object, the expiring raw turn's, a note on the fact.
SECRET, RAW_SECRET, NOTE = markers(3, seed=33)


@pytest.fixture
def clock():
    """The library's clock at START, moved by the test (now[0] = ...)."""
    now = [START]
    set_clock(lambda: now[0])
    yield now
    set_clock(None)


def _facts(call):
    """The write program: each turn becomes one fact about Ada whose object is its last word."""
    assert call.output_fields == ["ops"], call.signature
    ops = [
        {"action": "ADD", "content": turn["text"], "subject": "Ada", "predicate": "said",
         "object": turn["text"].split()[-1].strip(".")}
        for turn in call.inputs["turns"]
    ]  # fmt: skip
    return {"ops": ops}


def expiring_store(path) -> dict:
    """At START: a fact and a raw turn of ada that expire in an hour (with an entity, feedback, a
    raw turn whose keyword context quotes the expiring one), and a fact and a raw turn that stay."""
    with Memory(path, embedder=HashEmbedder(64), lm=scripted_lm(_facts), track_access=False) as memory:
        secret = memory.add(f"Ada's locker code is {SECRET}.", user_id="ada", expires_in="1h").memories[0]
        raw = memory.add(f"Ada said {RAW_SECRET} on the phone.", user_id="ada", infer=False, expires_in="1h")
        tea = memory.add("Ada likes tea.", user_id="ada").memories[0]
        later = memory.add("Ada will call back tomorrow.", user_id="ada", infer=False).memories[0]
        memory.feedback(secret.id, "wrong", note=f"it said {NOTE}", user_id="ada")
    return {"gone": [secret.id, raw.memories[0].id], "kept": sorted([tea.id, later.id])}


def test_an_export_taken_before_expiry_brings_nothing_back_after(db_path, other_store, tmp_path, clock):
    ids = expiring_store(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "before.jsonl.gz", user_id="ada", include_embeddings=True)
    words = (SECRET, RAW_SECRET, NOTE)
    before = "\n".join(records(tmp_path / "before.jsonl.gz"))
    assert all(word in before for word in words), "the file holds it while it has not expired"
    # Imported before it expires, all of it comes (and the leak scan sees it there).
    control = other_store()
    with opened(control) as memory:
        assert memory.import_(tmp_path / "before.jsonl.gz").expired == {}
    assert {hit.split(": ")[-1] for hit in leaks(control, words)} == set(words)

    clock[0] = START + timedelta(hours=1)  # exactly at expires_at: gone
    copy = other_store()
    with opened(copy) as memory:
        report = memory.import_(tmp_path / "before.jsonl.gz")
        assert report.expired["memory"] == report.expired["episode"] == report.expired["vector"] == 2
        assert report.expired["feedback"] == report.expired["entity"] == 1
        assert report.expired["turn_context"] >= 1  # the staying turn's context quoted the expiring one
        assert report.new["memory"] == 2 and report.reembedded == 0
        assert sorted(r.id for r in memory.get_all(user_id="ada")) == ids["kept"]
        for memory_id in ids["gone"]:
            assert memory.get(memory_id, user_id="ada") is None
        shown = repr([memory.search(query, user_id="ada") for query in (*words, "locker code", "phone")])
        assert not any(word in shown for word in words)
        assert "Ada likes tea." in repr(memory.search("tea", user_id="ada"))
        assert memory.check().ok
        again = memory.import_(tmp_path / "before.jsonl.gz")
        assert not again.changed and again.expired == report.expired
        [receipt, _] = memory.audit(operation="import", user_id="ada")
        assert receipt.details["expired"] == sum(report.expired.values())
    assert leaks(copy, words) == []


def test_an_export_after_expiry_leaves_out_what_expired(db_path, tmp_path, clock):
    ids = expiring_store(db_path)
    clock[0] = START + timedelta(hours=2)  # expired, not erased: maintain() has not run
    with opened(db_path) as memory:
        report = memory.export(tmp_path / "after.jsonl.gz", user_id="ada", include_embeddings=True)
        everything = memory.export(tmp_path / "all.jsonl", all_scopes=True, include_embeddings=True)
    assert report.expired["memory"] == 2 and report.expired["feedback"] == 1 and report.expired["entity"] == 1
    for path in (tmp_path / "after.jsonl.gz", tmp_path / "all.jsonl"):
        text = "\n".join(records(path))
        assert not any(word in text for word in (SECRET, RAW_SECRET, NOTE)) and "Ada likes tea." in text
        # Not even the raw turn's id (the fact's stays in what its write run saw and did: ids only).
        assert ids["gone"][1] not in text
        memories = {json.loads(line)["id"] for line in records(path) if '"record":"memory"' in line}
        assert sorted(memories) == ids["kept"]
    assert everything.counts["vector"] == 2


def imported_once(db_path, other_store, tmp_path):
    """ada's export (tmp_path / "ada.jsonl") imported into another store: (it, its row counts)."""
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "ada.jsonl", user_id="ada")
    copy = other_store()
    with opened(copy) as memory:
        memory.import_(tmp_path / "ada.jsonl")
    return copy, table_counts(copy)


def test_a_held_row_with_another_expiry_is_a_conflict(db_path, other_store, tmp_path):
    copy, counts = imported_once(db_path, other_store, tmp_path)
    later = "2999-01-01T00:00:00.000000Z"
    rewritten(
        tmp_path / "ada.jsonl",
        tmp_path / "later.jsonl",
        lambda body: first_of("memory")(body).update(expires_at=later),
    )
    with opened(copy) as memory, pytest.raises(ImportConflictError, match="expires_at"):
        memory.import_(tmp_path / "later.jsonl")
    assert table_counts(copy) == counts


def test_a_damaged_gzip_is_refused(db_path, other_store, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "ada.jsonl.gz", user_id="ada")
    data = (tmp_path / "ada.jsonl.gz").read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(data[: len(data) - 30])
    copy = other_store()
    with opened(copy) as memory, pytest.raises(ExportFileError, match="gzip"):
        memory.import_(tmp_path / "cut.jsonl.gz")
    assert set(table_counts(copy).values()) == {0}


def test_a_conflicting_row_is_refused_and_nothing_else_is_written(db_path, other_store, tmp_path):
    copy, counts = imported_once(db_path, other_store, tmp_path)

    def change(body):
        first_of("memory")(body)["content"] = "Ada lives in Paris."
        new = dict(first_of("episode")(body), id="00000000-0000-0000-0000-000000000001", content="new words")
        body.insert(0, new)

    rewritten(tmp_path / "ada.jsonl", tmp_path / "changed.jsonl", change)
    with opened(copy) as memory, pytest.raises(ImportConflictError, match="content"):
        memory.import_(tmp_path / "changed.jsonl")
    assert table_counts(copy) == counts
    assert issubclass(ImportConflictError, DSPyMemoryError)


def test_a_failure_part_way_leaves_nothing(db_path, other_store, tmp_path, monkeypatch):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "all.jsonl", all_scopes=True)
    copy = other_store()
    with opened(copy) as memory:

        def broken(*args, **kwargs):
            raise RuntimeError("the disk is full")

        monkeypatch.setattr(memory.store.keywords, "insert", broken)
        with pytest.raises(RuntimeError, match="disk is full"):
            memory.import_(tmp_path / "all.jsonl")
    assert set(table_counts(copy).values()) == {0}
    with opened(copy) as memory:
        assert memory.import_(tmp_path / "all.jsonl").changed and memory.check().ok


def test_bad_arguments(db_path, tmp_path):
    with opened(db_path) as memory:
        with pytest.raises(DSPyMemoryError, match="scope"):
            memory.export(tmp_path / "x.jsonl")  # strict mode: a scope, or all_scopes=True
        with pytest.raises(DSPyMemoryError, match="not both"):
            memory.export(tmp_path / "x.jsonl", user_id="ada", all_scopes=True)
        with pytest.raises(DSPyMemoryError, match="reembed"):
            memory.import_(tmp_path / "x.jsonl", reembed="sometimes")
        with pytest.raises(ExportFileError, match="no export file"):
            memory.import_(tmp_path / "missing.jsonl")
        # A folder, a NUL, a number: one clear error each, not an OSError from the move.
        for bad, says in ((tmp_path, "is a folder"), ("x\x00.jsonl", "must name a file"), (7, "file path")):
            with pytest.raises(DSPyMemoryError, match=says):
                memory.export(bad, user_id="ada")
            with pytest.raises(DSPyMemoryError, match=says):
                memory.import_(bad)


@pytest.mark.sqlite_only
def test_sqlite_export_postgres_import_export_is_identical(db_path, tmp_path, postgres_server, request):
    built(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "file.jsonl", all_scopes=True, include_embeddings=True)
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    with opened(url) as memory:
        memory.import_(tmp_path / "file.jsonl")
        memory.export(tmp_path / "pg.jsonl", all_scopes=True, include_embeddings=True)
    assert records(tmp_path / "file.jsonl") == records(tmp_path / "pg.jsonl")


def test_cli_export_and_import(db_path, other_store, tmp_path, capsys):
    built(db_path)
    out = str(tmp_path / "ada.jsonl.gz")
    assert (
        main(["export", "--db", db_path, "--embedder", "test", "--user", "ada", "-o", out, "--embeddings"])
        == 0
    )
    assert "memory" in capsys.readouterr().out
    copy = other_store()
    assert main(["import", "--db", copy, "--embedder", "test", out, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] and report["reembedded"] == 0 and report["new"]["memory"] == 3
    assert main(["import", "--db", other_store(), "--embedder", "test:32", out, "--reembed", "never"]) == 2
    assert "reembed" in capsys.readouterr().err


def test_export_and_import_leave_receipts_without_content(db_path, other_store, tmp_path):
    built(db_path)
    with opened(db_path) as memory:
        exported = memory.export(tmp_path / "ada-smith.jsonl", user_id="ada")
        [receipt] = memory.audit(operation="export", user_id="ada")
        assert memory.verify_audit().ok
    assert receipt.counts == exported.counts and receipt.details["sha256"] == exported.sha256
    copy = other_store()
    with opened(copy) as memory:
        memory.import_(tmp_path / "ada-smith.jsonl")
        memory.import_(tmp_path / "ada-smith.jsonl")
        second, first = memory.audit(operation="import", user_id="ada")
        assert first.counts["memory"] == 3 and second.counts == {} and second.details["already_present"] > 0
        assert memory.verify_audit().ok
    for entry in (receipt, first, second):
        # Hex hashes left out: "ada" is hex too.
        shown = entry.model_dump(exclude={"hash", "prev_hash", "user_hash", "agent_hash", "run_hash"})
        shown["details"].pop("sha256")
        text = json.dumps(shown, default=str)
        assert "Denver" not in text and "ada" not in text.replace("already", "")
