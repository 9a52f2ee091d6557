"""Verified backups, restore and the file commands (docs/governance.md, "Backups and restore")."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlean

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import BackupError, InvalidInputError, MemoryFolderMissingError, VerificationError
from dspy_memory.governance.backup import backup, manifest_path, restore, sha256_of, verify_file
from dspy_memory.util.timeutil import set_clock

from . import backup_workers
from .leakscan import leaks, markers


def open_memory(path):
    return Memory(str(path), embedder=HashEmbedder(64))


def filled(path, count=40, user="ada"):
    memory = open_memory(path)
    for i in range(count):
        memory.add(f"{user} note {i} about the garden and the river", user_id=user, infer=False)
    return memory


def raw_rows(path, sql):
    conn = sqlean.connect(str(path))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def hits(memory, query, user="ada"):
    """Search at a fixed moment, so that recency scores compare exactly."""
    set_clock(lambda: datetime(2030, 1, 1, tzinfo=timezone.utc))
    try:
        return [(hit.memory.id, hit.memory.content, hit.score) for hit in memory.search(query, user_id=user)]
    finally:
        set_clock(None)


# -- backup -------------------------------------------------------------------------------------


def test_backup_writes_a_verified_copy_and_its_manifest(tmp_path):
    with filled(tmp_path / "a.db") as memory:
        manifest = memory.backup(tmp_path / "a.bak")
        (receipt,) = memory.audit(operation="backup")
    assert receipt.details == {"file": "a.bak", "sha256": manifest.sha256, "encrypted": False}
    assert receipt.counts == {"memories": 40, "bytes": manifest.size}
    assert manifest.sha256 == sha256_of(tmp_path / "a.bak")
    assert manifest.tables["memories"] == 40 and manifest.tables["episodes"] == 40
    assert manifest.indexes == {"vectors": 40, "keyword_entries": 40, "vector_index": 40}
    assert (manifest.embedder, manifest.dimension, manifest.encrypted) == ("test-hash-v1:64", 64, False)
    on_disk = json.loads(Path(manifest_path(tmp_path / "a.bak")).read_text())
    assert on_disk["sha256"] == manifest.sha256 and on_disk["schema_version"] == manifest.schema_version
    check = verify_file(tmp_path / "a.bak")
    assert check.ok, check.problems
    assert check.manifest == manifest_path(tmp_path / "a.bak")
    # A backup is one file: no -wal or temporary file is left next to it.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("a.bak")) == [
        "a.bak",
        "a.bak.manifest.json",
    ]


def test_backup_refuses_an_existing_destination_a_missing_folder_and_postgresql(tmp_path):
    with filled(tmp_path / "a.db", count=3) as memory:
        memory.backup(tmp_path / "a.bak")
        before = sha256_of(tmp_path / "a.bak")
        with pytest.raises(BackupError, match="exists; give a new name, or overwrite=True"):
            memory.backup(tmp_path / "a.bak")
        assert sha256_of(tmp_path / "a.bak") == before
        memory.add("one more", user_id="ada", infer=False)
        assert memory.backup(tmp_path / "a.bak", overwrite=True).tables["memories"] == 4
        with pytest.raises(MemoryFolderMissingError, match="does not exist"):
            memory.backup(tmp_path / "nowhere" / "a.bak")
        with pytest.raises(BackupError, match="the memory file itself"):
            memory.backup(tmp_path / "a.db", overwrite=True)
        for bad in (5, None, "", "  ", "a\x00b", str(tmp_path)):
            with pytest.raises(InvalidInputError):
                memory.backup(bad)
    for bad in (5, "", str(tmp_path)):
        with pytest.raises(InvalidInputError):
            Memory.restore_backup(tmp_path / "a.bak", bad)
        with pytest.raises(InvalidInputError):
            verify_file(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bak", "a.bak.manifest.json", "a.db"]
    postgres = SimpleNamespace(backend_name="postgres", path="postgresql://db/x")
    with pytest.raises(BackupError, match="pg_dump, or use memory.export"):
        backup(postgres, tmp_path / "pg.bak")


def min_per_writer(path):
    counts = dict(raw_rows(path, "SELECT user_id, count(*) FROM memories GROUP BY user_id"))
    return min(counts.get(f"writer{writer}", 0) for writer in range(2))


def test_backup_taken_while_two_processes_write_is_consistent(tmp_path):
    # The writers go on until the backup is done, and commit after it, however slow the machine:
    # the copy is always taken while both write.
    path, notes = str(tmp_path / "busy.db"), 100_000
    open_memory(path).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, backup_done = ctx.Barrier(3), ctx.Event()
    writers = [
        ctx.Process(target=backup_workers.add_notes, args=(path, w, notes, barrier, backup_done))
        for w in range(2)
    ]
    for process in writers:
        process.start()
    try:
        barrier.wait(timeout=60)
        deadline = time.monotonic() + 60
        while min_per_writer(path) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        with open_memory(path) as memory:
            manifest = memory.backup(tmp_path / "busy.bak")
    finally:
        backup_done.set()
        for process in writers:
            process.join(timeout=120)
    assert all(process.exitcode == 0 for process in writers)
    total = raw_rows(path, "SELECT count(*) FROM memories")[0][0]
    copied = manifest.tables["memories"]
    assert copied < total and min_per_writer(tmp_path / "busy.bak") >= 20, "taken while both wrote"
    check = verify_file(tmp_path / "busy.bak")
    assert check.ok and check.integrity == "ok", check.problems
    assert set(check.indexes.values()) == {copied}
    # Each writer committed its notes in order: a consistent copy holds a prefix of each.
    contents = [row[0] for row in raw_rows(tmp_path / "busy.bak", "SELECT content FROM memories")]
    for writer in range(2):
        mine = sorted(c for c in contents if c.startswith(f"writer{writer} "))
        assert len(mine) < notes and mine == [backup_workers.note(writer, i) for i in range(len(mine))]
    with open_memory(tmp_path / "busy.bak") as copy:
        assert copy.search("garden", user_id="writer0", k=3)


def plant(memory, secret_words, user):
    """Memories of `user` holding `secret_words`, and the float32 bytes of their vectors."""
    records = []
    for word in secret_words:
        records += memory.add(f"the vault code of {user} is {word}", user_id=user, infer=False).memories
    return [memory.embedder.embed([record.content])[0].tobytes() for record in records]


ERASED_USER = "eve-vqxsecret"


def test_a_backup_after_an_erasure_holds_none_of_the_erased_bytes(tmp_path):
    path = str(tmp_path / "a.db")
    scope_words, one_word = markers(6, seed=18), markers(1, seed=81)
    with filled(path, count=60) as memory:
        vectors = plant(memory, scope_words, ERASED_USER)
        single = memory.add(f"ada's locker code is {one_word[0]}", user_id="ada", infer=False).memories[0]
        vectors += [memory.embedder.embed([single.content])[0].tobytes()]
        memory.backup(tmp_path / "before.bak")
        memory.delete_scope(user_id=ERASED_USER)
        memory.delete(single.id, user_id="ada")
        memory.backup(tmp_path / "after.bak")
    erased = (*scope_words, *one_word, ERASED_USER)
    assert leaks(str(tmp_path / "after.bak"), erased, vectors) == []
    # The scan is real: it finds every erased word and vector in the backup taken before.
    found = leaks(str(tmp_path / "before.bak"), erased, vectors)
    assert {f"file: {word}" for word in (*scope_words, *one_word)} <= set(found)
    assert {f"file: vector {i}" for i in range(len(vectors))} <= set(found)
    assert verify_file(tmp_path / "after.bak").ok


# -- verify -------------------------------------------------------------------------------------


@pytest.fixture
def a_backup(tmp_path):
    with filled(tmp_path / "a.db") as memory:
        memory.backup(tmp_path / "a.bak")
    return tmp_path / "a.bak"


def test_verify_fails_on_a_tampered_manifest(a_backup):
    manifest = Path(manifest_path(a_backup))
    data = json.loads(manifest.read_text())
    data["tables"]["memories"] = 39
    manifest.write_text(json.dumps(data))
    check = verify_file(a_backup)
    assert not check.ok and check.problems == [
        "rows differ from the manifest's (memories: manifest 39, file 40)"
    ]
    data["tables"]["memories"], data["sha256"] = 40, "0" * 64
    manifest.write_text(json.dumps(data))
    assert "differs from the manifest's" in verify_file(a_backup).problems[0]
    manifest.write_text("{not json")
    assert (
        "the manifest" in verify_file(a_backup).problems[0]
        and "cannot be read" in verify_file(a_backup).problems[0]
    )


def test_verify_fails_on_a_changed_or_truncated_backup(a_backup, tmp_path):
    data = a_backup.read_bytes()
    truncated = tmp_path / "truncated.bak"
    truncated.write_bytes(data[: len(data) // 2])
    check = verify_file(truncated)
    assert not check.ok and "cannot be read as a memory file" in check.problems[0]
    # One byte changed inside the file: the manifest's sha256 no longer matches.
    changed = tmp_path / "changed.bak"
    changed.write_bytes(data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])
    shutil.copy(manifest_path(a_backup), manifest_path(changed))
    assert any("sha256" in problem for problem in verify_file(changed).problems)


def test_verify_fails_on_a_file_that_is_not_a_backup(a_backup, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello " * 1000)
    assert "cannot be read as a memory file" in verify_file(text).problems[0]
    other = tmp_path / "other.db"
    conn = sqlean.connect(str(other))
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert verify_file(other).problems == [
        "a SQLite file, but not a memory file (no schema version, no memories table)"
    ]
    assert verify_file(tmp_path / "missing.bak").problems == [f"no such file: {tmp_path / 'missing.bak'}"]
    # Another store's backup next to this one's manifest.
    with filled(tmp_path / "b.db", count=5, user="bob") as memory:
        memory.backup(tmp_path / "b.bak")
    shutil.copy(tmp_path / "b.bak", a_backup)
    problems = verify_file(a_backup).problems
    assert "sha256" in problems[0] and "rows differ" in problems[1]


def test_verify_finds_an_index_out_of_step_with_the_rows(a_backup, tmp_path):
    broken = tmp_path / "broken.bak"
    shutil.copy(a_backup, broken)
    conn = sqlean.connect(str(broken))
    # The keyword index stores no text (FTS5 cannot delete a row from it without that text):
    # an entry no memory row has.
    conn.execute("INSERT INTO memories_fts (rowid, content) VALUES (999999, 'stray')")
    conn.commit()
    conn.close()
    assert verify_file(broken, manifest=False).problems == [
        "the index keyword_entries holds 41 entries for 40 memory rows"
    ]


def test_verify_never_changes_the_file(a_backup, tmp_path):
    # A backup (rollback journal) and a closed memory file (WAL mode) alike.
    for path in (a_backup, tmp_path / "a.db"):
        before = sha256_of(path), os.stat(path).st_mtime_ns
        assert verify_file(path).ok
        assert (sha256_of(path), os.stat(path).st_mtime_ns) == before
        assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(("-wal", "-shm", "-journal"))]


# -- restore ------------------------------------------------------------------------------------


def test_restore_brings_back_the_backup_and_answers_searches_identically(tmp_path):
    path = tmp_path / "a.db"
    with filled(path) as memory:
        memory.backup(tmp_path / "a.bak")
        answers = hits(memory, "garden river note 7"), hits(memory, "note 12", user="ada")
        memory.add("a later note about the garden", user_id="ada", infer=False)
        memory.delete_scope(user_id="ada")
    check = Memory.restore_backup(tmp_path / "a.bak", path)
    assert check.ok and check.path == str(path) and check.sha256 == sha256_of(tmp_path / "a.bak")
    with open_memory(path) as memory:
        assert (hits(memory, "garden river note 7"), hits(memory, "note 12")) == answers
        assert memory.check().ok
        # Receipts: the restored file says where it came from; the backup, when it was taken
        # (the backup's receipt is written after the copy, so it is not in the copy itself).
        (restored,) = memory.audit(operation="restore")
        assert restored.details == {"file": "a.bak", "sha256": check.sha256}
        assert restored.counts == {"memories": 40}
        assert memory.audit(operation="backup") == []
        assert memory.verify_audit().ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bak", "a.bak.manifest.json", "a.db"]


def test_restore_into_a_new_path(tmp_path, a_backup):
    check = restore(a_backup, tmp_path / "fresh.db")
    assert check.ok and check.tables["memories"] == 40


def test_restore_refuses_a_corrupt_source_without_touching_the_target(tmp_path, a_backup):
    path = tmp_path / "target.db"
    with filled(path, count=3, user="bob"):
        pass
    before = sha256_of(path)
    data = a_backup.read_bytes()
    middle = len(data) // 2
    # Not zeros: the middle of a file can be zeros already (the unused end of a page).
    a_backup.write_bytes(data[:middle] + b"\x5a" * 4096 + data[middle + 4096 :])
    with pytest.raises(VerificationError, match="the backup .* failed verification: .*sha256") as refused:
        Memory.restore_backup(a_backup, path)
    assert "\n" not in str(refused.value)  # one line, whatever SQLite's integrity check says
    Path(manifest_path(a_backup)).unlink()
    a_backup.write_bytes(data[: len(data) // 3])
    with pytest.raises(VerificationError, match="cannot be read as a memory file"):
        Memory.restore_backup(a_backup, path)
    assert sha256_of(path) == before
    assert not [p for p in tmp_path.iterdir() if "restoring" in p.name]


def test_restore_refuses_a_target_that_is_open(tmp_path, a_backup):
    path = tmp_path / "target.db"
    with filled(path, count=3, user="bob") as memory:
        with pytest.raises(BackupError, match="is open in another connection or process"):
            Memory.restore_backup(a_backup, path)
        assert [hit.memory.content for hit in memory.search("note 1", user_id="bob", k=1)]
    assert not [p for p in tmp_path.iterdir() if "restoring" in p.name]


def test_restore_over_a_file_with_a_left_over_wal(tmp_path, a_backup):
    """A crashed process leaves committed pages in -wal: replacing the file must not leave that
    WAL next to the new file, where SQLite would replay it into the restored copy."""
    crashed = tmp_path / "crashed.db"
    with filled(tmp_path / "live.db", count=30, user="bob") as memory:
        memory.add("the last note, only in the WAL", user_id="bob", infer=False)
        shutil.copy(tmp_path / "live.db", crashed)
        shutil.copy(str(tmp_path / "live.db") + "-wal", str(crashed) + "-wal")
    assert Path(str(crashed) + "-wal").stat().st_size > 0
    Memory.restore_backup(a_backup, crashed)
    assert not Path(str(crashed) + "-wal").exists()
    with open_memory(crashed) as memory:
        assert memory.check().ok
        assert len(memory.get_all(user_id="ada", limit=100)) == 40
        assert memory.get_all(user_id="bob") == []


# -- the command line ---------------------------------------------------------------------------


def test_cli_backup_verify_restore_backup(tmp_path, capsys):
    db, dest = str(tmp_path / "a.db"), str(tmp_path / "a.bak")
    filled(db, count=5).close()
    assert main(["backup", "--db", db, dest]) == 0
    assert re.search(r"backed up .* \(\d+ bytes, 5 memory rows, verified\)", capsys.readouterr().out)
    assert main(["backup", "--db", db, dest]) == 2
    assert "exists; give a new name" in capsys.readouterr().err
    assert main(["verify", dest]) == 0
    assert "ok: " in capsys.readouterr().out
    assert main(["verify", "--json", dest]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["restore-backup", dest, "--db", db]) == 0
    assert "restored" in capsys.readouterr().out
    Path(dest).write_bytes(Path(dest).read_bytes()[:5000])
    assert main(["verify", dest]) == 1
    assert "FAILED: " in capsys.readouterr().err
    assert main(["restore-backup", dest, "--db", db]) == 1
    assert "nothing was replaced" in capsys.readouterr().err
    assert verify_file(db, manifest=False).ok
