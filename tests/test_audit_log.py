"""The hash-chained audit log (docs/governance.md, "The audit log"): an entry per change in the
change's transaction, a chain that finds changed, removed and reordered rows, erasure receipts
that survive delete_scope without the erased content, actors and request ids per call."""

from __future__ import annotations

import json
import multiprocessing
import os

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import BlockError, InvalidInputError
from dspy_memory.testing import scripted_lm
from dspy_memory.types import Scope

from . import workers
from .leakscan import markers
from .pg import Raw

pytestmark = pytest.mark.backends


def operations(memory, **scope):
    return [entry.operation for entry in reversed(memory.audit(limit=1000, **scope))]


def audit_text(path):
    """Every value of every audit row, as one string."""
    with Raw(path) as raw:
        return json.dumps([list(row) for row in raw.execute("SELECT * FROM audit_log")], default=str)


def tamper(path, sql, params=()):
    """Change the audit log as another program would: drop the append-only triggers first."""
    with Raw(path) as raw:
        if raw.postgres:
            raw.execute("DROP TRIGGER audit_log_no_change ON audit_log")
        else:
            raw.execute("DROP TRIGGER audit_log_no_update")
            raw.execute("DROP TRIGGER audit_log_no_delete")
        raw.execute(sql, params)


@pytest.fixture
def memory(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), actor="tests") as mem:
        yield mem


def test_every_kind_of_change_leaves_one_entry(memory):
    added = memory.add("Ada drinks green tea.", user_id="ada").memories[0]
    memory.update(added.id, "Ada drinks black tea.", user_id="ada")
    memory.blocks.set("persona", "A helpful assistant.", user_id="ada")
    memory.blocks.delete("persona", user_id="ada")
    memory.pin(added.id, user_id="ada")
    memory.pin(added.id, False, user_id="ada")
    key, _ = memory.store.keys.create(Scope.of("ada"), name="bot")
    memory.store.keys.revoke(key.id)
    memory.delete(added.id, user_id="ada")
    assert operations(memory) == [
        "add_episodes", "add", "update", "feedback", "block_write", "block_delete", "pin", "unpin",
        "key_create", "key_revoke", "delete",
    ]  # fmt: skip
    entries = memory.audit(limit=1000)
    assert {entry.actor for entry in entries} == {"tests"}
    assert {entry.pid for entry in entries} == {os.getpid()}
    assert all(entry.version and entry.host for entry in entries)
    delete = entries[0]
    assert delete.memory_ids == [added.id] and delete.counts["delete"] == 1 and delete.counts["memories"] == 2
    assert memory.verify_audit().ok


def test_a_change_that_rolls_back_leaves_no_entry(memory):
    memory.add("Ada drinks green tea.", user_id="ada")
    before = memory.verify_audit().head_id
    with pytest.raises(BlockError):
        memory.blocks.set("persona", "x" * 50, char_limit=10, user_id="ada")
    with pytest.raises(RuntimeError), memory.store.transaction():
        memory.store.keys.create(Scope.of("ada"))
        raise RuntimeError("the caller's transaction fails after the change")
    assert memory.store.keys.list() == []
    report = memory.verify_audit()
    assert report.ok and report.head_id == before


def test_the_lm_write_path_logs_its_program_and_lm_calls(db_path):
    def responder(call):
        return {"ops": [{"action": "ADD", "content": "Ada lives in Lisbon.", "subject": "Ada"}]}

    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(responder)) as memory:
        result = memory.add("I moved to Lisbon.", user_id="ada")
        [ops] = memory.audit(operation="memory_ops", user_id="ada")
    assert ops.role == "lm" and ops.counts["add"] == 1
    assert ops.memory_ids == [record.id for record in result.memories]
    assert len(ops.details["program"]) == 16 and len(ops.details["lm_calls"]) == 1
    assert ops.details["lm_calls"][0]


def test_the_chain_verifies_and_a_row_changed_by_raw_sql_is_named(memory, db_path):
    for text in ("one", "two", "three", "four"):
        memory.add(f"Ada said {text}.", user_id="ada")
    assert memory.verify_audit().ok
    with Raw(db_path) as raw, pytest.raises(Exception, match="append-only"):
        raw.execute("UPDATE audit_log SET actor = 'mallory' WHERE id = 3")
    tamper(db_path, "UPDATE audit_log SET actor = 'mallory' WHERE id = 3")
    report = memory.verify_audit()
    assert not report.ok and (report.first_problem.id, report.first_problem.kind) == (3, "changed")


def test_a_rewritten_row_with_a_fresh_hash_is_caught_by_the_next_one(memory, db_path):
    from dspy_memory.store.audit_log import entry_hash

    for text in ("one", "two", "three"):
        memory.add(f"Ada said {text}.", user_id="ada")
    row = next(r for r in memory.store.audit_log.rows() if r["id"] == 2)
    forged = {**row, "actor": "mallory"}
    tamper(db_path, "UPDATE audit_log SET actor = ?, hash = ? WHERE id = 2", ("mallory", entry_hash(forged)))
    problem = memory.verify_audit().first_problem
    assert (problem.id, problem.kind) == (2, "changed")


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_removed_row_is_caught(memory, db_path, where):
    for text in ("one", "two", "three"):
        memory.add(f"Ada said {text}.", user_id="ada")
    head = memory.verify_audit().head_id
    removed = 3 if where == "middle" else head
    tamper(db_path, "DELETE FROM audit_log WHERE id = ?", (removed,))
    report = memory.verify_audit()
    assert not report.ok and (report.first_problem.id, report.first_problem.kind) == (removed, "removed")
    # The next change does not hide it: it chains from the recorded head.
    memory.add("Ada said four.", user_id="ada")
    assert memory.verify_audit().first_problem.id == removed


def test_the_erasure_receipt_survives_delete_scope_without_the_erased_content(memory, db_path):
    words = markers(3, seed=18)
    memory.add(f"Ada's secret is {words[0]}.", user_id="ada-7f3k")
    memory.add(f"Ada's plan is {words[1]}.", user_id="ada-7f3k", agent_id="planner-q9")
    memory.blocks.set("notes", f"remember {words[2]}", user_id="ada-7f3k")
    memory.add("Bob likes chess.", user_id="bob")
    counts = memory.delete_scope(user_id="ada-7f3k").counts
    [receipt] = memory.audit(operation="erase_scope")
    assert receipt.counts == counts and receipt.counts["memories"] == 2 and receipt.counts["blocks"] == 1
    hashes = memory.store.audit_log.scope_hashes(Scope.of("ada-7f3k"))
    assert receipt.user_hash == hashes[0] and receipt.user_hash != "ada-7f3k"
    # Every entry of the erased scope is still there, found by the scope's salted hash.
    assert operations(memory, user_id="ada-7f3k")[-1] == "erase_scope"
    assert "bob" not in [e.operation for e in memory.audit(user_id="ada-7f3k")]
    stored = audit_text(db_path).lower()
    for secret in (*words, "ada-7f3k", "planner-q9", "secret", "notes"):
        assert secret not in stored
    assert memory.verify_audit().ok


def test_scope_hashes_are_salted_per_store(tmp_path):
    hashes = []
    for name in ("a.db", "b.db"):
        with Memory(tmp_path / name, embedder=HashEmbedder(64)) as memory:
            memory.add("hello", user_id="ada")
            hashes.append(memory.audit(user_id="ada")[0].user_hash)
    assert hashes[0] != hashes[1]


def test_actor_and_request_id_per_call(memory):
    with memory.acting_as("support-bot", request_id="req-17"):
        memory.add("Ada likes tea.", user_id="ada")
    memory.add("Ada likes cake.", user_id="ada")
    first, second = [(e.actor, e.request_id) for e in reversed(memory.audit(operation="add"))]
    assert first == ("support-bot", "req-17") and second == ("tests", None)
    with pytest.raises(InvalidInputError):
        memory.acting_as("")


def test_acting_as_is_per_asyncio_task(memory):
    import asyncio

    from dspy_memory.store.audit_log import current_context

    async def act(name):
        with memory.acting_as(name):
            await asyncio.sleep(0.01)
            return current_context().actor

    async def both():
        return await asyncio.gather(act("a"), act("b"))

    assert asyncio.run(both()) == ["a", "b"]
    assert current_context().actor is None


def test_the_server_logs_the_api_key_and_request_id(memory):
    from dspy_memory.server.app import create_app, running

    key, token = memory.store.keys.create(Scope.of("ada"), name="ada-app")
    with running(create_app(memory=memory)) as url, httpx.Client(base_url=url) as client:
        headers = {"Authorization": f"Bearer {token}"}
        given = client.post(
            "/store_memory", json={"content": "Ada likes tea."}, headers={**headers, "X-Request-ID": "req-42"}
        )
        made = client.post("/store_memory", json={"content": "Ada likes cake."}, headers=headers)
    assert given.headers["x-request-id"] == "req-42" and len(made.headers["x-request-id"]) == 32
    adds = list(reversed(memory.audit(operation="add")))
    assert [(e.actor, e.request_id) for e in adds] == [
        (f"api-key:{key.id}", "req-42"),
        (f"api-key:{key.id}", made.headers["x-request-id"]),
    ]


def test_two_processes_writing_keep_one_valid_chain(db_path):
    Memory(db_path, embedder=HashEmbedder(64)).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    processes = [ctx.Process(target=workers.move_many, args=(db_path, w, 8, barrier)) for w in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
    assert [process.exitcode for process in processes] == [0, 0]
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        report = memory.verify_audit()
        entries = memory.audit(limit=1000)
    assert report.ok, report.problems
    assert len({entry.pid for entry in entries}) == 2
    assert sum(e.operation == "add_episodes" for e in entries) == 16


def test_migrate_carries_the_chain(memory, db_path, tmp_path):
    from dspy_memory.store.transfer import migrate_store

    memory.add("Ada likes tea.", user_id="ada")
    memory.delete_scope(user_id="ada")
    memory.close()
    copy = str(tmp_path / "copy.db")
    migrate_store(db_path, copy)
    with Memory(copy, embedder=HashEmbedder(64)) as moved:
        assert moved.verify_audit().ok
        assert operations(moved, user_id="ada") == ["add_episodes", "add", "erase_scope"]
        moved.add("Bob likes chess.", user_id="bob")
        assert moved.verify_audit().ok


def test_audit_verify_cli_names_the_bad_row(memory, db_path, capsys):
    memory.add("Ada likes tea.", user_id="ada")
    memory.add("Ada likes cake.", user_id="ada")
    memory.close()
    assert main(["audit", "verify", "--db", db_path]) == 0
    assert "ok" in capsys.readouterr().out
    tamper(db_path, "UPDATE audit_log SET counts = '{\"add\": 9}' WHERE id = 2")
    assert main(["audit", "verify", "--db", db_path]) == 1
    assert "entry 2" in capsys.readouterr().out
    assert main(["audit", "--db", db_path, "--user", "ada", "--limit", "2"]) == 0
    listed = capsys.readouterr().out
    assert "add" in listed and "ada" not in listed.replace("add", "")


def test_background_writes_act_for_whoever_submitted_them(db_path):
    def responder(call):
        return {"ops": [{"action": "ADD", "content": "Ada lives in Lisbon.", "subject": "Ada"}]}

    with Memory(db_path, embedder=HashEmbedder(64), lm=scripted_lm(responder), actor="service") as memory:
        with memory.acting_as("support-bot", request_id="req-9"):
            memory.add("I moved to Lisbon.", user_id="ada", background=True)
        memory.flush()
        [ops] = memory.audit(operation="memory_ops")
    assert (ops.actor, ops.request_id) == ("support-bot", "req-9")


def test_swapped_rows_are_named_as_reordered(memory, db_path):
    for text in ("one", "two", "three"):
        memory.add(f"Ada said {text}.", user_id="ada")
    tamper(db_path, "UPDATE audit_log SET id = -id WHERE id IN (2, 3)")
    with Raw(db_path) as raw:
        raw.execute("UPDATE audit_log SET id = CASE id WHEN -2 THEN 3 ELSE 2 END WHERE id IN (-2, -3)")
    report = memory.verify_audit()
    assert [(p.id, p.kind) for p in report.problems[:2]] == [(2, "reordered"), (3, "reordered")]
    assert report.problems[0].detail == "it was written as entry 3"


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 0},
        {"limit": "10"},
        {"limit": True},
        {"operation": 5},
        {"since": "not a time"},
        {"user_id": ""},
    ],
)
def test_bad_audit_arguments_get_a_clear_error(memory, options):
    from dspy_memory.errors import DSPyMemoryError

    with pytest.raises(DSPyMemoryError):
        memory.audit(**options)


def test_a_garbled_head_is_reported_not_a_crash(memory, db_path):
    memory.add("Ada likes tea.", user_id="ada")
    with Raw(db_path) as raw:
        raw.execute("UPDATE meta SET value = 'garbage' WHERE key = 'audit_head'")
    report = memory.verify_audit()
    assert [(p.id, p.kind) for p in report.problems] == [(2, "head")]


def test_commands_act_as_the_login_running_them(db_path, monkeypatch, capsys):
    import getpass

    monkeypatch.delenv("DSPY_MEMORY_ACTOR", raising=False)
    assert main(["add", "Ada likes tea.", "--db", db_path, "--user", "ada", "--embedder", "test"]) == 0
    monkeypatch.setenv("DSPY_MEMORY_ACTOR", "ops-oncall")
    assert main(["delete-scope", "--db", db_path, "--user", "ada"]) == 0
    with Memory(db_path, embedder="test") as memory:
        actors = {entry.operation: entry.actor for entry in memory.audit(user_id="ada")}
    assert actors["add"] == f"cli:{getpass.getuser()}" and actors["erase_scope"] == "ops-oncall"


def test_file_commands_receipts_name_the_login_too(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPY_MEMORY_ACTOR", "ops-oncall")
    db = str(tmp_path / "m.db")
    with Memory(db, embedder=HashEmbedder(64)) as memory:
        memory.add("Ada likes tea.", user_id="ada")
    assert main(["backup", "--db", db, str(tmp_path / "m.bak")]) == 0
    assert main(["restore-backup", str(tmp_path / "m.bak"), "--db", str(tmp_path / "r.db")]) == 0
    actors = {}
    for path in (db, str(tmp_path / "r.db")):  # the backup's receipt is in its source
        with Memory(path, embedder=HashEmbedder(64)) as memory:
            actors |= {entry.operation: entry.actor for entry in memory.audit(limit=5)}
    assert actors["backup"] == actors["restore"] == "ops-oncall"
