"""Conversation files for bulk ingestion (dspy_memory/write/formats.py): each format read as a
stream of messages with their conversation, time and place in the file; bad records reported
with where and why, and the rest read. The fixtures are written here, in each format's public
shape (the ChatGPT export's `mapping` tree reproduced from its structure, not anyone's data)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from dspy_memory.errors import InvalidInputError
from dspy_memory.write.formats import Message, Refusal, detect_format, read_messages


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def messages(read):
    return [item for item in read if isinstance(item, Message)]


def test_jsonl_keeps_each_message_its_conversation_and_time_and_reports_bad_lines_by_number(tmp_path):
    lines = [
        {"role": "user", "name": "Ada", "content": "I moved to Denver.", "at": "2024-03-01T09:30:00Z", "conversation": "c1"},
        "{not json",
        {"role": "assistant", "content": "Noted.", "session": "s2"},
        "",
        {"role": 5, "content": "bad role"},
        {"role": "user", "content": ["a list", "of parts"], "at": "yesterday-ish"},
        ["not", "an", "object"],
    ]  # fmt: skip
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path = write(tmp_path / "chat.jsonl", text)
    assert detect_format(path) == "jsonl"
    read = list(read_messages(path))
    ada, noted = messages(read)
    assert (ada.conversation, ada.name, ada.role, ada.where) == ("c1", "Ada", "user", "line 1")
    assert ada.at == datetime(2024, 3, 1, 9, 30, tzinfo=timezone.utc)
    assert (noted.conversation, noted.at, noted.where) == ("s2", None, "line 3")
    refused = {item.where: item.reason for item in read if isinstance(item, Refusal)}
    assert set(refused) == {"line 2", "line 5", "line 6", "line 7"}
    assert "not valid JSON" in refused["line 2"] and "role must be a string" in refused["line 5"]
    assert "at=" in refused["line 6"] and "an object" in refused["line 7"]


def test_openai_lists_and_jsonl_of_messages(tmp_path):
    one = write(
        tmp_path / "one.json",
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
    )
    many = write(
        tmp_path / "many.json",
        json.dumps(
            [
                [{"role": "user", "content": "a"}],
                [{"role": "user", "content": [{"type": "text", "text": "b"}]}],
            ]
        ),
    )
    lines = write(
        tmp_path / "ft.jsonl",
        json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n" + json.dumps({"messages": "no"}),
    )
    assert {detect_format(p) for p in (one, many, lines)} == {"openai"}
    assert [m.content for m in messages(read_messages(one))] == ["hi", "hello"]
    assert [(m.conversation, m.content) for m in messages(read_messages(many))] == [("1", "a"), ("2", "b")]
    read = list(read_messages(lines))
    assert [m.where for m in messages(read)] == ["line 1, message 1"]
    assert [r.where for r in read if isinstance(r, Refusal)] == ["line 2"]


def chatgpt_conversation(conversation_id, *, branch_text, other_text):
    """A conversation of the export's shape: a root, a system node, a user message with two
    answers (regenerated); `current_node` names the second."""

    def node(node_id, parent, children, role=None, text=None, at=None, content_type="text"):
        message = None
        if role is not None:
            message = {
                "id": node_id,
                "author": {"role": role},
                "create_time": at,
                "content": {"content_type": content_type, "parts": [text]},
            }
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, ["sys"]),
        "sys": node("sys", "root", ["u1"], "system", "", None),
        "u1": node("u1", "sys", ["a1", "a2"], "user", "Where should I stay in Lisbon?", 1700000000.0),
        "a1": node("a1", "u1", [], "assistant", other_text, 1700000005.0),
        "a2": node("a2", "u1", ["t1"], "assistant", branch_text, 1700000010.0),
        "t1": node("t1", "a2", [], "tool", "{}", 1700000011.0, content_type="code"),
    }
    return {
        "title": "Lisbon",
        "create_time": 1699999999.0,
        "mapping": mapping,
        "current_node": "t1",
        "conversation_id": conversation_id,
    }


def test_chatgpt_export_keeps_the_current_branch_with_each_messages_time(tmp_path):
    export = [
        chatgpt_conversation("c-1", branch_text="Alfama, near the river.", other_text="Baixa."),
        {"title": "broken", "mapping": None},
        chatgpt_conversation("c-2", branch_text="Try Belem.", other_text="Never shown."),
    ]
    path = write(tmp_path / "conversations.json", json.dumps(export))
    assert detect_format(path) == "chatgpt"
    read = list(read_messages(path))
    got = [(m.conversation, m.role, m.content) for m in messages(read)]
    assert got == [
        ("c-1", "user", "Where should I stay in Lisbon?"),
        ("c-1", "assistant", "Alfama, near the river."),
        ("c-2", "user", "Where should I stay in Lisbon?"),
        ("c-2", "assistant", "Try Belem."),
    ]
    assert messages(read)[1].at == datetime.fromtimestamp(1700000010, tz=timezone.utc)
    assert [(r.where, r.reason) for r in read if isinstance(r, Refusal)] == [
        ("conversation 2", "no mapping: not a ChatGPT conversation")
    ]


def test_locomo_sessions_in_order_at_their_date_times(tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Bo",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Back from Porto."}],
            "session_2_date_time": "10:05 am on 9 May, 2023",
            "session_1": [
                {"speaker": "Ada", "dia_id": "D1:1", "text": "Hi Bo!"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Look", "blip_caption": "a photo of a cat"},
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_3": [{"speaker": "Ada", "dia_id": "D3:1", "text": "no time"}],
        },
        "qa": [],
    }
    path = write(tmp_path / "locomo.json", json.dumps([sample]))
    assert detect_format(path) == "locomo"
    read = list(read_messages(path))
    got = [(m.conversation, m.name, m.content, m.at.isoformat()) for m in messages(read)]
    assert got == [
        ("conv-x:session_1", "Ada", "Hi Bo!", "2023-05-08T13:56:00+00:00"),
        ("conv-x:session_1", "Bo", "Look [shared a photo: a photo of a cat]", "2023-05-08T13:56:01+00:00"),
        ("conv-x:session_2", "Bo", "Back from Porto.", "2023-05-09T10:05:00+00:00"),
    ]
    assert [r.where for r in read if isinstance(r, Refusal)] == ["sample conv-x, session 3"]


def test_a_json_array_broken_midway_is_read_up_to_the_break(tmp_path):
    path = write(
        tmp_path / "cut.json", json.dumps([[{"role": "user", "content": "kept"}]])[:-1] + ', [{"role": '
    )
    read = list(read_messages(path, "openai"))
    assert [m.content for m in messages(read)] == ["kept"]
    assert [r.where for r in read if isinstance(r, Refusal)] == ["element 2"]


@pytest.mark.parametrize("text", ["plain words, not JSON", '{"a": 1}\n', "[1, 2, 3]", ""])
def test_an_unknown_file_says_which_formats_exist_and_how_to_convert(tmp_path, text):
    path = write(tmp_path / "odd.txt", text)
    if text.startswith("{"):
        # A JSON object a line is read as jsonl: the line without content is reported.
        assert [r.where for r in read_messages(path) if isinstance(r, Refusal)] == ["line 1"]
        return
    with pytest.raises(InvalidInputError, match="formats read: jsonl .* chatgpt .* locomo"):
        read_messages(path)
    with pytest.raises(InvalidInputError, match="unknown format 'csv'"):
        read_messages(path, "csv")
