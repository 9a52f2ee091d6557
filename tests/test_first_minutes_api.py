"""What a new user of the Python API trips over first (issue 11): advice that must work when
followed literally, a closed Memory, paths that are not files, quiet input mistakes, and the
same raw text stored twice."""

from __future__ import annotations

import logging
import os
import re
import select
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import pytest

from dspy_memory import DSPyMemoryError, EmbedderMismatchError, InvalidInputError, Memory
from dspy_memory.embed import HashEmbedder


def test_the_embedder_mismatch_advice_works_when_followed_literally(db_path):
    Memory(db_path, embedder="test:64").close()
    with pytest.raises(EmbedderMismatchError) as info:
        Memory(db_path, embedder="test:32")
    message = str(info.value)
    spec = re.search(r"embedder=(['\"])(.+?)\1", message)
    assert spec is not None, message
    with Memory(db_path, embedder=spec.group(2)) as memory:
        assert memory.embedder.name == "test-hash-v1:64"
    assert "leave embedder= out" in message.lower() or "leaving embedder= out" in message.lower()
    with Memory(db_path) as memory:  # and leaving it out does work
        assert memory.embedder.name == "test-hash-v1:64"


def test_mismatch_with_an_embedder_that_has_no_spec_says_to_pass_the_same_object(db_path):
    from dspy_memory.embed import CallableEmbedder

    custom = CallableEmbedder(HashEmbedder(16).embed, name="my-model-v1", dim=16)
    Memory(db_path, embedder=custom).close()
    with pytest.raises(EmbedderMismatchError, match="my-model-v1") as info:
        Memory(db_path, embedder="test:64")
    assert "same embedder" in str(info.value)


METHODS = {
    "add": lambda m: m.add("x", user_id="a", infer=False),
    "log": lambda m: m.log("x", user_id="a"),
    "search": lambda m: m.search("x", user_id="a"),
    "get": lambda m: m.get("0" * 36, user_id="a"),
    "get_all": lambda m: m.get_all(user_id="a"),
    "history": lambda m: m.history("0" * 36, user_id="a"),
    "update": lambda m: m.update("0" * 36, "y", user_id="a"),
    "delete": lambda m: m.delete("0" * 36, user_id="a"),
    "delete_scope": lambda m: m.delete_scope(user_id="a"),
    "context": lambda m: m.context("x", user_id="a"),
    "timeline": lambda m: m.timeline(subject="Ada", user_id="a"),
    "stats": lambda m: m.stats(),
    "check": lambda m: m.check(),
    "reprocess": lambda m: m.reprocess(),
    "tools": lambda m: m.tools(user_id="a"),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_closed_memory_says_so_from_every_method(db_path, method):
    memory = Memory(db_path, embedder="test")
    memory.close()
    with pytest.raises(DSPyMemoryError, match=r"closed.*Memory\("):
        METHODS[method](memory)


def test_close_twice_is_fine(db_path):
    memory = Memory(db_path, embedder="test")
    memory.close()
    memory.close()


def test_a_directory_or_a_file_that_is_not_a_memory_file_is_named(tmp_path):
    with pytest.raises(DSPyMemoryError, match=f"{re.escape(str(tmp_path))}.*is a folder"):
        Memory(str(tmp_path), embedder="test")
    text = tmp_path / "notes.txt"
    text.write_text("these are my notes, not a database " * 200)
    with pytest.raises(DSPyMemoryError, match="notes.txt.*not a SQLite"):
        Memory(str(text), embedder="test")
    assert text.read_text().startswith("these are my notes")  # and it was left alone


# Root writes anywhere, and CI runs as root: there the folder check runs in a child process that
# has switched to this user (nobody on Debian; a uid needs no passwd entry to be switched to).
# The child is forked, not started anew: the venv's interpreter may live where that user cannot
# read it (pyenv's under /root, mode 700, here), and a child that imports nothing needs none.
UNPRIVILEGED = 65534


def _open(path: Path) -> str:
    try:
        Memory(str(path), embedder="test").close()
    except DSPyMemoryError as exc:
        return f"refused: {exc}"
    return "opened"


def opening(path: Path) -> str:
    """'opened', or 'refused: <message>' when Memory(path) raises a DSPyMemoryError, for a user
    that is not root (this process, or as root a forked child running as UNPRIVILEGED)."""
    if os.geteuid() != 0:
        return _open(path)
    with tempfile.TemporaryDirectory() as warm:  # every module the call needs, imported before
        assert _open(Path(warm) / "m.db") == "opened"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports through the pipe and never returns into pytest
        outcome = "crashed"
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(UNPRIVILEGED)
            os.setuid(UNPRIVILEGED)
            outcome = _open(path)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails on it
            outcome = f"crashed as uid {os.getuid()}: {type(exc).__name__}: {exc}"
        finally:
            os.write(write, outcome.encode()[:60_000])
            os._exit(0)
    os.close(write)
    try:
        if not select.select([read], [], [], 120)[0]:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the check as uid {UNPRIVILEGED} did not answer in 120 s")
        with os.fdopen(read, "rb", closefd=False) as pipe:
            answer = pipe.read().decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert not answer.startswith("crashed"), answer
    return answer


@pytest.fixture
def own_folder(tmp_path):
    """A folder that the user of `opening` owns: tmp_path, or as root a new folder in the
    system's temp folder given to UNPRIVILEGED (pytest's temp folders are root's alone)."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="dspy-memory-unwritable-"))
    try:
        os.chown(folder, UNPRIVILEGED, UNPRIVILEGED)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(os.name != "posix", reason="folder permissions are POSIX modes here")
def test_an_unwritable_folder_is_named(own_folder):
    owner = own_folder.stat().st_uid
    folders = {}
    for name, mode in (("writable", 0o755), ("locked", 0o555)):
        folders[name] = own_folder / name
        folders[name].mkdir()
        os.chown(folders[name], owner, -1)
        folders[name].chmod(mode)
    try:
        assert owner != 0 and folders["locked"].stat().st_mode & 0o777 == 0o555
        # The same user can create a file in a folder it may write to: the refusal is the mode's.
        assert opening(folders["writable"] / "m.db") == "opened"
        refused = opening(folders["locked"] / "m.db")
        assert refused.startswith("refused:") and "locked" in refused, refused
    finally:
        folders["locked"].chmod(0o755)


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_is_refused_and_nothing_is_stored(db_path, content):
    with Memory(db_path, embedder="test") as memory:
        for given in (
            content,
            [content],
            {"role": "user", "content": content},
            [content, {"content": content}],
        ):
            with pytest.raises(InvalidInputError, match="empty"):
                memory.add(given, user_id="a", infer=False)
        assert memory.stats()["tables"]["episodes"] == 0
        # A blank message among others keeps the transcript whole: an episode, no memory.
        result = memory.add(["fine", content], user_id="a", infer=False)
        assert len(result.episodes) == 2 and len(result.memories) == 1


def test_a_message_dict_without_content_is_refused_with_its_keys(db_path):
    with Memory(db_path, embedder="test") as memory:
        with pytest.raises(InvalidInputError, match=r"'content'.*role, text"):
            memory.add({"role": "user", "text": "hi"}, user_id="a", infer=False)
        assert memory.stats()["tables"]["episodes"] == 0
        # A dict that is not a message is JSON data, on purpose (docs/write-path.md).
        result = memory.add({"temperature_c": 21, "room": "kitchen"}, user_id="a", infer=False)
        assert result.episodes[0].source == "json"


def test_a_number_as_time_is_read_as_epoch_seconds_and_a_suspicious_one_is_flagged(db_path, caplog):
    with Memory(db_path, embedder="test") as memory:
        with caplog.at_level(logging.WARNING, logger="dspy_memory"):
            result = memory.add("said long ago", user_id="a", at=12345, infer=False)
        assert result.episodes[0].occurred_at.year == 1970
        assert any("12345" in r.getMessage() and "epoch seconds" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="dspy_memory"):
            memory.add("said in 2024", user_id="a", at=1709278200, infer=False)
        assert not caplog.records


def test_the_same_raw_text_in_the_same_scope_at_the_same_time_is_one_memory(db_path):
    with Memory(db_path, embedder="test") as memory:
        first = memory.add("Ada moved to Denver.", user_id="ada", at="2024-05-02", infer=False)
        second = memory.add("Ada moved to Denver.", user_id="ada", at="2024-05-02", infer=False)
        assert [r.id for r in second.memories] == [r.id for r in first.memories]
        current = memory.get_all(user_id="ada")
        assert len(current) == 1
        assert current[0].access_count >= 1  # said again: counted as a recall
        hits = memory.search("Denver", user_id="ada")
        assert len(hits) == 1 and len(hits[0].provenance) == 2  # both episodes are kept
        # Another time, another scope or other words are other memories.
        memory.add("Ada moved to Denver.", user_id="ada", at="2024-06-01", infer=False)
        memory.add("Ada moved to Denver.", user_id="bob", at="2024-05-02", infer=False)
        memory.add("Ada moved to Denver!", user_id="ada", at="2024-05-02", infer=False)
        assert len(memory.get_all(user_id="ada")) == 3
        assert memory.check().ok


def test_running_the_same_batch_twice_adds_nothing_new(db_path):
    turns = [
        {"role": "user", "name": "Ada", "content": f"turn {i}", "at": f"2024-01-0{i + 1}"} for i in range(5)
    ]
    with Memory(db_path, embedder="test") as memory:
        memory.add(turns, user_id="ada", infer=False)
        memory.add(turns, user_id="ada", infer=False)
        assert len(memory.get_all(user_id="ada")) == 5
        assert memory.stats()["tables"]["episodes"] == 10
        assert memory.check().ok


def test_two_writers_adding_the_same_text_at_once_make_one_memory(db_path):
    Memory(db_path, embedder="test").close()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with Memory(db_path, embedder="test") as memory:
                barrier.wait()
                memory.add("Ada moved to Denver.", user_id="ada", at="2024-05-02", infer=False)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with Memory(db_path) as memory:
        assert len(memory.get_all(user_id="ada")) == 1
        assert memory.check().ok


def test_replaying_a_corrected_turn_does_not_bring_the_wrong_version_back(db_path):
    with Memory(db_path, embedder="test") as memory:
        said = memory.add("I live in Somerville.", user_id="ada", at="2024-01-08", infer=False)
        memory_id = said.memories[0].id
        memory.update(memory_id, "I live in Cambridge.", reason="typo", user_id="ada")
        again = memory.add("I live in Somerville.", user_id="ada", at="2024-01-08", infer=False)
        assert [record.id for record in again.memories] == [memory_id]
        assert [record.content for record in memory.get_all(user_id="ada")] == ["I live in Cambridge."]
        # Erased is gone: said again after a delete, it is a new memory.
        memory.delete(memory_id, user_id="ada")
        fresh = memory.add("I live in Somerville.", user_id="ada", at="2024-01-08", infer=False)
        assert fresh.memories[0].id != memory_id


def test_a_retry_reaches_the_model_even_when_dspy_caches_answers(tmp_path):
    """DSPy caches LM answers (in memory and on disk, keyed without the API base; at
    temperature 0 a rollout id changes nothing): a bad answer must not be served again to a
    retry or to a later reprocess() once the model answers well. Failed before: every attempt
    got the cached garbage."""
    import dspy

    from dspy_memory.testing import ScriptedEngine, oracle_responder

    text = "I moved to Denver."
    facts = {
        text: [
            {"content": "Ada lives in Denver.", "subject": "Ada", "predicate": "lives_in", "object": "Denver"}
        ]
    }
    broken = ScriptedEngine(lambda call: "garbage, not an answer")
    with Memory(
        str(tmp_path / "a.db"), embedder="test", lm=dspy.LM("scripted/cached", engine=broken, temperature=0.0)
    ) as memory:
        assert memory.add(text, user_id="ada").error is not None  # the outage: answers cached
    healthy = ScriptedEngine(oracle_responder(facts))
    with Memory(
        str(tmp_path / "b.db"),
        embedder="test",
        lm=dspy.LM("scripted/cached", engine=healthy, temperature=0.0),
    ) as memory:
        result = memory.add(text, user_id="ada")
    assert result.error is None and len(healthy.calls) == 1
    assert [op.action for op in result.ops] == ["ADD"]


def test_the_demo_twice_on_one_file_stores_each_chat_once(tmp_path):
    """Failed before: the second run doubled the memories (38 current for 19 chats)."""
    import io

    from dspy_memory.demo import run_demo

    db = str(tmp_path / "demo.db")
    first = run_demo(db, embedder="test", out=io.StringIO())
    second = run_demo(db, embedder="test", out=io.StringIO())
    with Memory(db) as memory:
        assert memory.stats()["current_memories"] == first["added"] == 19
        assert memory.check().ok
    assert second["history"] == ["ADD", "UPDATE"] and "Mochi" in second["current"][0]
    assert "Miso" in second["believed"][0]  # what was believed before the first run's correction
    assert [len(hits) for hits in (first["now"], first["as_of"])] == [
        len(second["now"]),
        len(second["as_of"]),
    ]
