"""Bulk ingestion (`Memory.ingest`, `dspy-memory ingest`; docs/ingest.md): every format stored
with its times, roles and speakers; a second run stores nothing twice and says how much was
there; an interrupted run (Ctrl-C, kill -9, a fault mid-batch) loses nothing and the next run
finishes it with exactly one copy of everything; bad records are reported by line and never
half-stored; the LM path runs conversations in order under claims, side by side with
--concurrency."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from dspy_memory import InvalidInputError, Memory, ScopeError
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm

from .test_cli_first_minutes import _cli

pytestmark = [pytest.mark.backends]
START = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def chat_lines(path, conversations=3, turns=4, *, bad=()):
    """A JSONL file of `conversations` x `turns` messages with times; `bad`: line numbers that
    are broken JSON instead."""
    lines = []
    for c in range(conversations):
        for t in range(turns):
            lines.append(
                json.dumps(
                    {
                        "conversation": f"c{c}",
                        "role": "user" if t % 2 == 0 else "assistant",
                        "name": "Ada" if t % 2 == 0 else None,
                        "content": f"conversation {c} turn {t}: I keep {c * 100 + t} stamps",
                        "at": (START + timedelta(days=c, minutes=t)).isoformat(),
                    }
                )
            )
    for number in bad:
        lines.insert(number - 1, '{"conversation": "c0", "content": broken')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def contents(memory, **scope):
    return Counter(record.content for record in memory.get_all(**scope, limit=10_000))


def test_each_format_is_stored_with_its_times_roles_and_speakers(memory, tmp_path):
    jsonl = chat_lines(tmp_path / "chat.jsonl", conversations=2, turns=2)
    openai = tmp_path / "openai.json"
    openai.write_text(json.dumps([[{"role": "user", "content": "I adopted a cat named Miso."}]]))
    chatgpt = tmp_path / "conversations.json"
    chatgpt.write_text(
        json.dumps(
            [
                {
                    "id": "conv-1",
                    "create_time": 1709280000.0,
                    "current_node": "b",
                    "mapping": {
                        "root": {"id": "root", "message": None, "parent": None, "children": ["a"]},
                        "a": {
                            "id": "a",
                            "parent": "root",
                            "children": ["b"],
                            "message": {
                                "id": "a",
                                "author": {"role": "user"},
                                "create_time": 1709280060.0,
                                "content": {"content_type": "text", "parts": ["I play the oboe."]},
                            },
                        },
                        "b": {
                            "id": "b",
                            "parent": "a",
                            "children": [],
                            "message": {
                                "id": "b",
                                "author": {"role": "assistant"},
                                "create_time": 1709280120.0,
                                "content": {"content_type": "text", "parts": ["A fine instrument."]},
                            },
                        },
                    },
                }
            ]
        )
    )
    locomo = tmp_path / "locomo.json"
    locomo.write_text(
        json.dumps(
            [
                {
                    "sample_id": "s1",
                    "conversation": {
                        "speaker_a": "Caroline",
                        "speaker_b": "Mel",
                        "session_1_date_time": "1:56 pm on 8 May, 2023",
                        "session_1": [
                            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group."},
                            {"speaker": "Mel", "dia_id": "D1:2", "text": "That sounds brave."},
                        ],
                    },
                }
            ]
        )
    )
    expected = {jsonl: ("jsonl", 4), openai: ("openai", 1), chatgpt: ("chatgpt", 2), locomo: ("locomo", 2)}
    for path, (form, count) in expected.items():
        report = memory.ingest(path, user_id="ada")
        assert (report.format, report.mode, report.messages, report.stored) == (form, "raw", count, count)
        assert report.refused_count == 0 and not report.interrupted
    by_text = {record.content: record for record in memory.get_all(user_id="ada", limit=100)}
    caroline = by_text["Caroline: I went to a support group."]
    assert caroline.valid_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert by_text["Mel: That sounds brave."].valid_at.isoformat() == "2023-05-08T13:56:01+00:00"
    assert by_text["I play the oboe."].valid_at.isoformat() == "2024-03-01T08:01:00+00:00"
    assert by_text["Ada: conversation 1 turn 0: I keep 100 stamps"].valid_at.isoformat() == (
        "2024-03-02T09:00:00+00:00"
    )
    [episode] = [e for e in _episodes(memory, "ada") if e.content == "A fine instrument."]
    assert episode.role == "assistant"
    assert episode.metadata["ingest"] == {
        "file": "conversations.json",
        "where": "conversation 1, message 3",
        "conversation": "conv-1",
    }
    hits = memory.search("what instrument does the user play?", user_id="ada", k=3)
    assert hits and hits[0].content == "I play the oboe."


def _episodes(memory, user_id):
    from dspy_memory.types import Scope

    return memory.store.episodes.list(Scope(user_id=user_id), limit=1000)


def test_a_second_run_stores_nothing_twice_and_says_what_was_there(memory, tmp_path):
    path = chat_lines(tmp_path / "chat.jsonl")
    first = memory.ingest(path, user_id="ada", batch_size=5)
    assert (first.messages, first.stored, first.already, first.conversations) == (12, 12, 0, 3)
    before = memory.stats()["tables"]
    again = memory.ingest(path, user_id="ada", batch_size=5)
    assert (again.messages, again.stored, again.already, again.memories) == (12, 0, 12, 0)
    assert memory.stats()["tables"] == before
    # A file that grew: only what is new is stored.
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps({"conversation": "c9", "content": "a late message", "at": "2024-04-01"}) + "\n")
    grown = memory.ingest(path, user_id="ada")
    assert (grown.stored, grown.already) == (1, 12)
    assert set(contents(memory, user_id="ada").values()) == {1}
    # Scopes are walls: the same file in another scope is that scope's own copy.
    other = memory.ingest(path, user_id="bob")
    assert (other.stored, other.already) == (13, 0)
    assert sum(contents(memory, user_id="ada").values()) == 13


def test_messages_without_a_time_are_found_again_by_their_place_in_the_file(memory, tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps([{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"}]))
    first = memory.ingest(path, user_id="ada")
    # Said twice at one time (the ingest's): two episodes, one raw turn that both restate.
    assert (first.stored, first.memories) == (2, 1)
    assert len(_episodes(memory, "ada")) == 2
    again = memory.ingest(path, user_id="ada")
    assert (again.stored, again.already) == (0, 2)
    assert len(_episodes(memory, "ada")) == 2


def test_bad_records_are_reported_by_line_and_skipped_and_strict_stops_at_the_first(memory, tmp_path):
    path = chat_lines(tmp_path / "chat.jsonl", conversations=1, turns=4, bad=(2, 4))
    path.write_text(path.read_text() + json.dumps({"content": "   "}) + "\n" + '{"content": "\\ud800"}\n')
    report = memory.ingest(path, user_id="ada")
    assert report.stored == 4 and report.refused_count == 4
    assert [r["where"] for r in report.refused] == ["line 2", "line 4", "line 7", "line 8"]
    assert "not valid JSON" in report.refused[0]["reason"]
    assert "empty" in report.refused[2]["reason"] and "surrogate" in report.refused[3]["reason"]
    strict_path = chat_lines(tmp_path / "strict.jsonl", conversations=1, turns=4, bad=(3,))
    with pytest.raises(
        InvalidInputError, match=r"strict.jsonl, line 3: not valid JSON.*2 messages before it"
    ):
        memory.ingest(strict_path, user_id="bob", strict=True)
    assert sum(contents(memory, user_id="bob").values()) == 2  # what came before it is stored
    finished = memory.ingest(strict_path, user_id="bob")
    assert (finished.stored, finished.already, finished.refused_count) == (2, 2, 1)


def test_a_file_in_no_known_format_says_which_exist_and_how_to_convert(memory, tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("role,content\nuser,hi\n")
    with pytest.raises(InvalidInputError, match="jsonl.*openai.*chatgpt.*locomo.*one message a line"):
        memory.ingest(path, user_id="ada")
    with pytest.raises(FileNotFoundError, match="no such file"):
        memory.ingest(tmp_path / "missing.jsonl", user_id="ada")
    with pytest.raises(InvalidInputError, match="unknown format 'csv'"):
        memory.ingest(path, user_id="ada", format="csv")
    with pytest.raises(ScopeError):
        memory.ingest(path)
    with pytest.raises(InvalidInputError, match="concurrency"):
        memory.ingest(path, user_id="ada", concurrency=0)
    assert memory.stats()["tables"]["episodes"] == 0


def test_a_fault_mid_run_loses_nothing_and_the_next_run_finishes_with_one_copy(memory, tmp_path, monkeypatch):
    path = chat_lines(tmp_path / "chat.jsonl", conversations=4, turns=5)
    writer = memory._writer
    real, calls = writer.process, []

    def interrupted_on_the_third_batch(episodes, lm, **options):
        calls.append(len(episodes))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(episodes, lm, **options)

    monkeypatch.setattr(writer, "process", interrupted_on_the_third_batch)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        memory.ingest(path, user_id="ada", batch_size=4, on_progress=seen.append)
    persisted = seen[-1].counts["stored"]  # the third batch, and the fourth embedded meanwhile
    assert persisted in (12, 16)
    monkeypatch.setattr(writer, "process", real)
    report = memory.ingest(path, user_id="ada", batch_size=4)
    assert (report.stored, report.already, report.resumed) == (20 - persisted, 8, persisted - 8)
    assert len(contents(memory, user_id="ada")) == 20 and set(contents(memory, user_id="ada").values()) == {1}
    assert memory.check().ok


def test_progress_counts_bytes_of_the_file_up_to_its_size(memory, tmp_path):
    path = chat_lines(tmp_path / "chat.jsonl", conversations=5, turns=10)
    seen = []
    memory.ingest(path, user_id="ada", batch_size=7, on_progress=seen.append)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[-1].done == seen[-1].total == path.stat().st_size and seen[-1].unit == "bytes"
    assert seen[-1].counts["stored"] == 50 and len(seen) >= 8


# -- the LM path ------------------------------------------------------------------------------


def recording_lm(order, *, delay_s=0.0, fail_on=None):
    """A write LM that extracts each turn as a fact and records which conversation's turns it
    read, in the order it read them (storage-side behaviour: the decisions are scripted)."""
    lock = threading.Lock()

    def responder(call):
        turns = call.inputs.get("turns", [])
        with lock:
            order.append([turn["text"] for turn in turns])
        if fail_on and any(fail_on in turn["text"] for turn in turns):
            return {"ops": "not a list"} if "ops" in call.output_fields else {"facts": "nope"}
        facts = [{"content": turn["text"], "kind": "fact"} for turn in turns]
        if call.output_fields == ["facts"]:
            return {"facts": facts}
        return {"ops": [{"action": "ADD", **fact} for fact in facts]}

    return scripted_lm(responder, delay_s=delay_s)


def test_with_an_lm_each_conversation_is_written_in_order_side_by_side_and_resumable(db_path, tmp_path):
    path = chat_lines(tmp_path / "chat.jsonl", conversations=4, turns=6)
    order = []
    with Memory(db_path, embedder=HashEmbedder(64), lm=recording_lm(order, delay_s=0.05)) as memory:
        report = memory.ingest(path, user_id="ada", batch_size=3, concurrency=3)
        assert (report.stored, report.failed, report.mode) == (24, 0, memory._writer.mode_for(memory._lm))
        assert report.memories >= 24
        for c in range(4):  # each conversation's batches reached the LM in time order
            mine = [text for call in order for text in call if text.startswith(f"conversation {c} ")]
            assert mine == sorted(set(mine), key=lambda t: int(t.split()[3].rstrip(":")))
            assert all(len({t.split()[1] for t in call}) == 1 for call in order)  # one conversation a call
        calls = len(order)
        again = memory.ingest(path, user_id="ada", batch_size=3, concurrency=3)
        assert (again.stored, again.already, len(order)) == (0, 24, calls)  # no LM call the second time
        assert memory.check().ok


def test_interleaved_conversations_reach_the_lm_each_in_order_with_bounded_buffers(db_path, tmp_path):
    path = tmp_path / "interleaved.jsonl"
    lines = [
        {"conversation": f"c{c}", "role": "user", "content": f"conversation {c} turn {t}: note {t}",
         "at": (START + timedelta(minutes=t)).isoformat()}
        for t in range(4) for c in range(30)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    order = []
    with Memory(db_path, embedder=HashEmbedder(64), lm=recording_lm(order)) as memory:
        # 30 open conversations, 2 per batch: buffers of 8 batches (16 messages) at most, so
        # the fullest conversation is written early, in pieces, each piece in order.
        report = memory.ingest(path, user_id="ada", batch_size=2)
        assert (report.stored, report.conversations, report.failed) == (120, 30, 0)
    for c in range(30):
        mine = [text for call in order for text in call if text.startswith(f"conversation {c} ")]
        assert mine == [f"conversation {c} turn {t}: note {t}" for t in range(4)]
    assert all(len({t.split()[1] for t in call}) == 1 for call in order)


def test_an_lm_that_fails_keeps_the_input_as_raw_turns_and_says_so(db_path, tmp_path):
    path = chat_lines(tmp_path / "chat.jsonl", conversations=2, turns=2)
    with Memory(db_path, embedder=HashEmbedder(64), lm=recording_lm([], fail_on="conversation 1")) as memory:
        report = memory.ingest(path, user_id="ada", concurrency=2)
        assert report.stored == 4 and report.failed == 2 and report.errors
        assert "conversation 1 turn 0" in " ".join(contents(memory, user_id="ada"))  # searchable raw


# -- the command line ----------------------------------------------------------------------------


def _rows(db, sql):
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:  # the file is not made yet
            return [(0,)]


@pytest.mark.parametrize("how", ["kill -9", "ctrl-c"])
def test_an_interrupted_ingest_run_again_gives_exactly_one_copy(tmp_path, how, backend):
    if backend != "sqlite":
        pytest.skip("one backend is enough for the process-level test")
    path = chat_lines(tmp_path / "big.jsonl", conversations=40, turns=100)
    db = str(tmp_path / "m.db")
    args = ["ingest", str(path), "--user", "ada", "--db", db, "--embedder", "test", "--batch-size", "50"]
    process = _cli(*args, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while _rows(db, "SELECT count(*) FROM episodes")[0][0] < 400 and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGINT)
    _, err = process.communicate(timeout=60)
    stored = _rows(db, "SELECT count(*) FROM episodes")[0][0]
    assert 400 <= stored < 4000, "the run was not stopped midway"
    if how == "ctrl-c":
        assert process.returncode == 130
        assert "Traceback" not in err and "interrupted" in err and "Run the same command again" in err
    else:
        assert process.returncode == -signal.SIGKILL
    again = _cli(*args, "--json")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    report = json.loads(out)
    assert report["messages"] == 4000 and report["stored"] + report["already"] + report["resumed"] == 4000
    assert report["already"] + report["resumed"] == stored
    assert _rows(db, "SELECT count(*) FROM episodes") == [(4000,)]
    assert _rows(db, "SELECT count(*), count(DISTINCT content) FROM memories") == [(4000, 4000)]
    assert _rows(db, "SELECT count(*) FROM episodes WHERE status != 'done'") == [(0,)]


def test_the_bar_goes_to_stderr_json_to_stdout_and_bad_lines_are_named(tmp_path, capsys, backend):
    if backend != "sqlite":
        pytest.skip("the command line runs on files here")
    path = chat_lines(tmp_path / "chat.jsonl", conversations=2, turns=3, bad=(2,))
    db = str(tmp_path / "m.db")
    base = ["ingest", str(path), "--user", "ada", "--db", db, "--embedder", "test"]
    process = _cli(*base, "--json")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    report = json.loads(out)  # stdout holds the JSON alone
    assert report["stored"] == 6 and report["refused"] == [
        {"where": "line 2", "reason": report["refused"][0]["reason"]}
    ]
    assert "ingest:" in err and "100%" in err and "stored=6" in err  # the bar
    assert "skipped line 2: not valid JSON" in err
    assert main([*base, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "6 messages in 2 conversations" in captured.out and "0 stored, 6 already there" in captured.out
    assert "%|" not in captured.err and "skipped line 2" in captured.err
    assert main([*base, "--strict", "--quiet"]) == 2
    assert "line 2: not valid JSON" in capsys.readouterr().err
