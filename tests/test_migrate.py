"""`dspy-memory migrate` / `migrate_store`: a whole store moved between SQLite and PostgreSQL and
back keeps every row, index entry and search result; an interrupted copy is finished by running
it again; a destination with other data is refused."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.store import NewMemory, transfer
from dspy_memory.store.transfer import TABLES, MigrationError, migrate_store
from dspy_memory.types import Scope
from dspy_memory.util.text import content_hash
from dspy_memory.util.timeutil import now_db, set_clock

from .pg import Raw, fresh_schema
from .scripted import alias_of, fused_lm

CHAT = [
    {"role": "user", "name": "Bob", "content": "Should we plan the hike for Saturday?"},
    {"role": "assistant", "content": "Yes, the weather looks dry then."},
    {"role": "user", "name": "Bob", "content": "Great, I will bring the sandwiches."},
    {"role": "user", "name": "Bob", "content": "My sister Carla lives in Lisbon."},
]


def moves(turns, existing):
    """Ada says where she lives; a new city invalidates the old one."""
    city = next(city for city in ("Boston", "Denver") if city in turns[-1]["text"])
    op = {"content": f"Ada lives in {city}.", "subject": "Ada", "predicate": "lives in", "object": city}
    home = alias_of(existing, "Ada lives in")
    if home is None:
        return [{"action": "ADD", **op, "valid_at": "2024-01-10"}]
    return [{"action": "INVALIDATE", "target": home, "reason": "Ada moved", **op, "valid_at": "2024-03-08"}]


def build_source(path: str) -> None:
    """A store with something in every table: LM facts with entities and write runs, raw turns in
    a conversation (turn contexts), an update, a delete, blocks, settings, keys, a pin, an
    archived memory, a summary linked to what it condenses, feedback (the update's
    correction, a verdict) naming the runs that made what it judges, a raw turn that expires
    (in ten years) and a retention policy."""
    with Memory(path, embedder=HashEmbedder(64), lm=fused_lm(moves)) as memory:
        memory.add("Ada here: I live in Boston now.", user_id="ada", at="2024-01-10")
        denver = memory.add("Ada here: I live in Denver now.", user_id="ada", at="2024-03-08").ops[0]
        memory.feedback(denver.memory_id, "useful", note="the move is right", user_id="ada")
        turns = memory.add(CHAT, user_id="bob", at="2024-04-01T10:00:00", infer=False).memories
        memory.update(turns[2].id, "Bob will bring the sandwiches and lemonade.", user_id="bob")
        memory.delete(turns[3].id, user_id="bob")
        memory.add("Bob's gym locker is number 31.", user_id="bob", infer=False, expires_in="3650d")
        notes = [
            memory.add(
                text, user_id="cy", agent_id="helper", metadata={"topic": "food", "n": 1.5}, infer=False
            )
            for text in ("Cy likes green tea.", "Cy is allergic to peanuts.", "Cy drinks tea at five.")
        ]
        memory.add("A note without a user.", agent_id="helper", infer=False)
        memory.pin(notes[1].memories[0].id, user_id="cy", agent_id="helper")
        store = memory.store
        row_id = store.current_row_id(notes[2].memories[0].id, scope=None)
        store.archive([(row_id, {"retention": 0.01})], actor="maintenance", reason="forgotten", at=now_db())
        sources = [store.get_memory(notes[0].memories[0].id), store.get_memory(notes[2].memories[0].id)]
        summary = "Cy drinks green tea."
        store.consolidate(
            sources,
            NewMemory(
                id="11111111-2222-3333-4444-555555555555",
                content=summary,
                content_hash=content_hash(summary),
                embedding=np.asarray(HashEmbedder(64).embed([summary])[0], dtype=np.float32),
                user_id="cy",
                agent_id="helper",
            ),
            relation="summarizes",
            actor="maintenance",
            reason="tea",
            metadata={"program": "test"},
        )
        memory.blocks.set("persona", "Ada likes maps.", user_id="ada")
        memory.blocks.set("persona", "Ada likes maps and trains.", user_id="ada")
        memory.lifecycle_settings(user_id="ada", min_age_days=90, strategy="archive")
        memory.retention(user_id="ada", erase_after="3650d", kinds=["turn"])
        store.keys.create(Scope.of("ada"), name="ada's app")
        store.keys.create(None, admin=True, name="ops")


def rows(path: str) -> dict[str, list[dict]]:
    """Every table (and the search tables) of a store, row by row, by column name."""
    with Raw(path) as raw:
        found = {}
        for table in TABLES:
            order = ", ".join(f"coalesce({c}, '')" if table.scoped else c for c in table.key)
            columns = "rowid, *" if table.name == "episodes" and not raw.postgres else "*"
            cursor = raw.execute(f"SELECT {columns} FROM {table.name} ORDER BY {order}")
            names = [column[0] for column in cursor.description]
            found[table.name] = [dict(zip(names, row)) for row in cursor.fetchall()]
        if not raw.postgres:
            import sqlite_vec

            raw.conn.enable_load_extension(True)
            sqlite_vec.load(raw.conn)
            for name, sql in {
                "memory_vectors": "SELECT row_id, partition_key, agent_id, run_id, code, embedding "
                "FROM memory_vectors ORDER BY row_id",
                "vector_partitions": "SELECT partition_key, row_count FROM vector_partitions ORDER BY partition_key",
                "memories_fts": "SELECT rowid, content, scope, context FROM memories_fts ORDER BY rowid",
                "memory_vec": "SELECT rowid, partition_key, agent_id, run_id FROM memory_vec ORDER BY rowid",
                "embedder": "SELECT key, value FROM meta WHERE key LIKE 'embedder%' ORDER BY key",
            }.items():
                found[name] = [tuple(row) for row in raw.execute(sql).fetchall()]
    return found


def search_ids(path: str, query: str, scope: dict, recipe: str) -> list[str]:
    with Memory(path, embedder=HashEmbedder(64), track_access=False) as memory:
        return [hit.id for hit in memory.search(query, recipe=recipe, k=20, **scope)]


@pytest.fixture
def pg_url(postgres_server, request):
    def make() -> str:
        url, drop = fresh_schema(postgres_server)
        request.addfinalizer(drop)
        return url

    return make


def test_sqlite_to_postgres_and_back_keeps_every_row_and_search(tmp_path, pg_url):
    first, second, third = str(tmp_path / "first.db"), pg_url(), str(tmp_path / "third.db")
    build_source(first)
    there = migrate_store(first, second)
    back = migrate_store(second, third, batch_size=3)
    for report in (there, back):
        assert report.ok and not report.resumed and report.mismatched == []
        counts = {check.table: check.source_rows for check in report.checks}
        assert counts["memories"] == counts["vectors"] == counts["keyword index"] > 10
        assert all(counts[name] > 0 for name in counts), counts  # every table had rows to copy
        assert {check.table: check.copied for check in report.checks}["memories"] == counts["memories"]
    assert rows(first) == rows(third)
    # PostgreSQL holds the same rows (JSON text and floats included) under the same ids.
    logical = {name: table for name, table in rows(first).items() if name in {t.name for t in TABLES}}
    assert rows(second) == logical
    # Expiry and retention policies travel: as the API reads them, the same on every copy.
    kept = []
    for path in (first, second, third):
        with Memory(path, embedder=HashEmbedder(64)) as memory:
            [locker] = [r for r in memory.get_all(user_id="bob") if "gym locker" in r.content]
            kept.append((memory.retention(user_id="ada"), locker.id, locker.expires_at))
    assert kept[0] == kept[1] == kept[2] and kept[0][0].kinds == ("turn",) and kept[0][2] is not None

    queries = [
        ("where does Ada live", {"user_id": "ada"}),
        ("hike Saturday", {"user_id": "bob"}),
        ("tea", {"user_id": "cy", "agent_id": "helper"}),
        ("note", {"agent_id": "helper"}),
    ]
    for query, scope in queries:
        for recipe in ("hybrid", "dense", "keyword"):
            ids = [search_ids(path, query, scope, recipe) for path in (first, second, third)]
            assert ids[0] == ids[2], (query, recipe)
            # Keyword ranks differ by engine (BM25, ts_rank); dense search is exact cosine on both.
            assert (ids[1] == ids[0]) if recipe == "dense" else (set(ids[1]) == set(ids[0])), (query, recipe)
    # A raw turn is found by the words of the turns around it (its keyword context), everywhere.
    dry = [search_ids(path, "weather dry", {"user_id": "bob"}, "keyword") for path in (first, second, third)]
    assert len(dry[0]) >= 2 and all(set(found) == set(dry[0]) for found in dry)
    for path in (first, second, third):
        with Memory(path, embedder=HashEmbedder(64)) as memory:
            assert memory.check().ok, path


@pytest.mark.parametrize("target", ["sqlite", "postgres"])
def test_an_interrupted_migration_finishes_when_run_again(tmp_path, pg_url, monkeypatch, target):
    source = str(tmp_path / "source.db")
    destination = str(tmp_path / "copy.db") if target == "sqlite" else pg_url()
    build_source(source)
    insert = transfer.insert_rows
    calls = []

    def cut_after_first_memory_batch(conn, table, columns, new_rows):
        if table == "memories":
            calls.append(len(new_rows))
            if len(calls) == 2:
                raise KeyboardInterrupt  # the batch's transaction rolls back, as after Ctrl-C
        insert(conn, table, columns, new_rows)

    monkeypatch.setattr(transfer, "insert_rows", cut_after_first_memory_batch)
    with pytest.raises(KeyboardInterrupt):
        migrate_store(source, destination, batch_size=4)
    monkeypatch.setattr(transfer, "insert_rows", insert)
    with Raw(destination) as raw:
        assert raw.execute("SELECT count(*) FROM memories").fetchone()[0] == 4
        assert raw.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 4
        assert raw.execute("SELECT value FROM meta WHERE key = ?", (transfer.MARKER,)).fetchone() is not None

    report = migrate_store(source, destination, batch_size=4)
    assert report.ok and report.resumed
    checks = {check.table: check for check in report.checks}
    assert checks["memories"].copied == checks["memories"].source_rows - 4
    assert checks["episodes"].copied == 0  # copied before the interruption, not again
    assert all(check.source_rows == check.destination_rows for check in report.checks)
    with Raw(destination) as raw:
        assert raw.execute("SELECT count(*), count(DISTINCT row_id) FROM memories").fetchone() == (
            checks["memories"].source_rows,
            checks["memories"].source_rows,
        )
        assert raw.execute("SELECT value FROM meta WHERE key = ?", (transfer.MARKER,)).fetchone() is None
    # Run again on a finished copy: nothing is copied, everything is compared again.
    again = migrate_store(source, destination)
    assert again.ok and again.copied == 0 and not again.resumed
    # The copy takes new writes: ids continue after the copied ones (PostgreSQL's identities too).
    with Raw(destination) as raw:
        last = raw.execute("SELECT max(row_id) FROM memories").fetchone()[0]
    with Memory(destination, embedder=HashEmbedder(64)) as memory:
        added = memory.add("A new fact after the move.", user_id="bob", infer=False)
        memory.update(added.memories[0].id, "A corrected fact after the move.", user_id="bob")
        assert memory.check().ok
    with Raw(destination) as raw:
        assert raw.execute("SELECT max(row_id) FROM memories").fetchone()[0] == last + 2


def test_a_source_changed_after_an_interruption_is_reported(tmp_path, monkeypatch):
    source, destination = str(tmp_path / "source.db"), str(tmp_path / "copy.db")
    build_source(source)
    insert = transfer.insert_rows

    def cut(conn, table, columns, new_rows):
        if table == "memory_events":
            raise KeyboardInterrupt
        insert(conn, table, columns, new_rows)

    monkeypatch.setattr(transfer, "insert_rows", cut)
    with pytest.raises(KeyboardInterrupt):
        migrate_store(source, destination)
    monkeypatch.setattr(transfer, "insert_rows", insert)
    with Memory(source, embedder=HashEmbedder(64)) as memory:
        [note] = memory.get_all(user_id="cy", agent_id="helper", limit=1)
        memory.update(note.id, "Cy changed her mind.", user_id="cy", agent_id="helper")
    with pytest.raises(MigrationError, match="differs from .* in memories") as caught:
        migrate_store(source, destination)
    assert caught.value.report is not None and "memories" in caught.value.report.mismatched


def test_a_destination_with_other_data_is_refused(tmp_path, pg_url):
    source, other = str(tmp_path / "source.db"), pg_url()
    build_source(source)
    with Memory(other, embedder=HashEmbedder(64)) as memory:
        memory.add("Someone else's memory.", user_id="zed", infer=False)
    with pytest.raises(
        MigrationError, match="already holds memories that are not a copy of .*empty database"
    ):
        migrate_store(source, other)
    with Raw(other) as raw:
        assert raw.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
        assert raw.execute("SELECT count(*) FROM meta WHERE key = ?", (transfer.MARKER,)).fetchone()[0] == 0

    wrong_embedder = str(tmp_path / "wide.db")
    Memory(wrong_embedder, embedder=HashEmbedder(128)).close()
    with pytest.raises(MigrationError, match="bound to embedder .*128 dimensions"):
        migrate_store(source, wrong_embedder)
    with pytest.raises(MigrationError, match="same store"):
        migrate_store(source, str(tmp_path / "." / "source.db"))
    with pytest.raises(MigrationError, match="no memory file at"):
        migrate_store(str(tmp_path / "missing.db"), str(tmp_path / "x.db"))
    assert not (tmp_path / "x.db").exists()


def test_cli_migrate_prints_the_report_per_table(tmp_path, capsys):
    source, destination = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    build_source(source)
    assert main(["migrate", "--from", source, "--to", destination, "--batch-size", "5"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["table", "source", "destination", "copied", "checksum"]
    for name in ["meta", *(table.name for table in TABLES), "vectors"]:
        [line] = [line for line in lines if line.startswith(f"{name} ")]
        assert line.split()[-1] == "ok"
    assert "every table matches" in lines[-1] and "memories: " in captured.err
    assert main(["migrate", "--from", source, "--to", destination, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["copied"] == 0 and len(report["tables"]) == len(TABLES) + 3

    with Memory(str(tmp_path / "c.db"), embedder=HashEmbedder(64)) as memory:
        memory.add("Another store.", user_id="zed", infer=False)
    assert main(["migrate", "--from", source, "--to", str(tmp_path / "c.db")]) == 2
    assert "dspy-memory migrate: " in capsys.readouterr().err


def test_an_encrypted_file_migrates_to_postgresql_with_the_key_in_the_environment(tmp_path, pg_url):
    """$DSPY_MEMORY_ENCRYPTION_KEY opens the encrypted source; the PostgreSQL destination, which
    dspy-memory does not encrypt (the server's job), opens as usual. Run in a child process: an
    encrypted file needs sqlcipher3 as the process's SQLite library (this one's is sqlean)."""
    pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
    import os
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from dspy_memory import Memory\n"
        "from dspy_memory.cli import main\n"
        "from dspy_memory.embed import HashEmbedder\n"
        "with Memory(sys.argv[1], embedder=HashEmbedder(64)) as memory:\n"
        "    memory.add(['Ada moved to Porto.', 'Ada likes tea.'], user_id='ada')\n"
        "sys.exit(main(['migrate', '--from', sys.argv[1], '--to', sys.argv[2]]))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSPY_MEMORY_")}
    env["DSPY_MEMORY_ENCRYPTION_KEY"] = "a migration passphrase"
    url = pg_url()
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "secret.db"), url],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "secret.db").read_bytes()[:16] != b"SQLite format 3\x00"
    with Memory(url, embedder=HashEmbedder(64)) as moved:
        assert moved.search("where does Ada live", user_id="ada", k=1)[0].content == "Ada moved to Porto."


def test_what_expired_is_copied_with_its_expiry_and_comes_back_nowhere(tmp_path, pg_url):
    """A copy is of every row, expired ones not yet erased too: their `expires_at` travels, so
    no read returns them on the destination either, and its maintain() erases them."""
    start = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    now = [start]
    set_clock(lambda: now[0])
    try:
        source, destination = str(tmp_path / "source.db"), pg_url()
        with Memory(source, embedder=HashEmbedder(64)) as memory:
            gone = memory.add("Ada's door code is 7788.", user_id="ada", infer=False, expires_in="1h")
            stays = memory.add("Ada likes tea.", user_id="ada", infer=False).memories[0]
        now[0] = start + timedelta(hours=2)
        assert migrate_store(source, destination).ok
        with Memory(destination, embedder=HashEmbedder(64)) as memory:
            assert [r.id for r in memory.get_all(user_id="ada")] == [stays.id]
            assert memory.get(gone.memories[0].id, user_id="ada") is None
            assert "7788" not in repr(memory.search("door code", user_id="ada"))
            erased = memory.maintain(all_scopes=True).erased
            assert erased["memories"] == 1 and erased["episodes"] == 1
        with Raw(destination) as raw:
            assert raw.execute("SELECT count(*) FROM memories WHERE content LIKE '%7788%'").fetchone()[0] == 0
    finally:
        set_clock(None)
