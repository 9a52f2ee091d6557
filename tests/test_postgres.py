"""What is particular to the PostgreSQL backend: the schema agrees with the SQLite file's, the
shared SQL means the same on both, filters and large partitions behave as on SQLite, and
connection errors are clear. (The store, memory, write-path, purge, concurrency and isolation
suites run on both backends: tests marked `backends`.)"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import MemoryFileError
from dspy_memory.store import Store
from dspy_memory.store.postgres.dialect import prepared, translate
from dspy_memory.store.sqlite.migrations import MIGRATIONS

from .pg import Raw, fresh_schema


@pytest.fixture
def pg_url(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    return url


def columns(raw: Raw, table: str) -> set[str]:
    if raw.postgres:
        sql = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
        return {row[0] for row in raw.execute(sql, (table,))}
    return {row[1] for row in raw.execute(f"PRAGMA table_info({table})")}


# Tables both backends keep row for row (the search indexes differ by design).
SHARED_TABLES = (
    "meta", "episodes", "entities", "memories", "memory_sources", "memory_events", "blocks",
    "block_versions", "write_runs", "turn_context", "lifecycle_settings", "memory_links", "api_keys",
    "schema_migrations", "write_run_candidates", "write_run_ops", "feedback", "retention_settings",
)  # fmt: skip


def test_the_schema_is_the_sqlite_files_with_the_same_versions(pg_url, tmp_path):
    Store(pg_url).close()
    Store(str(tmp_path / "m.db")).close()
    with Raw(pg_url) as pg, Raw(str(tmp_path / "m.db")) as lite:
        for table in SHARED_TABLES:
            extra = {"rowid"} if table == "episodes" else set()  # SQLite's is implicit
            assert columns(pg, table) == columns(lite, table) | extra, table
        versions = [
            tuple(row) for row in pg.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        ]
    assert versions == [(m.version, m.name) for m in MIGRATIONS]


def test_reopening_applies_nothing_and_a_newer_schema_is_refused(pg_url):
    from dspy_memory import SchemaError

    Store(pg_url).close()
    store = Store(pg_url)
    assert store.backend.migrate() == []
    store.close()
    with Raw(pg_url) as raw:
        raw.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 'x')")
    with pytest.raises(SchemaError, match="newer than this dspy-memory"):
        Store(pg_url)


@pytest.mark.parametrize(
    "sql, params, expected_sql, expected_params",
    [
        ("SELECT ? WHERE a = '?' AND b LIKE '5%'", (1,), "SELECT %s WHERE a = '?' AND b LIKE '5%%'", [1]),
        (
            "x IS ? AND y IS NOT ? AND z = ?",
            (None, 2, 3),
            "x IS NULL AND y <> %s AND z = %s",
            [2, 3],
        ),
        ("x IS ? AND y IS NOT ?", ("a", None), "x = %s AND y IS NOT NULL", ["a"]),
        (
            "m.id IN (SELECT value FROM json_each(?)) AND k NOT IN (SELECT value FROM json_each(?))",
            ('["a", "b"]', "[]"),
            "m.id = ANY(%s) AND k <> ALL(%s)",
            [["a", "b"], []],
        ),
        (
            "SELECT 1 FROM json_each(?) AS c CROSS JOIN memories m ON m.row_id = c.value",
            ("[3, 1]",),
            "SELECT 1 FROM unnest(%s::bigint[]) AS c(value) JOIN memories m ON m.row_id = c.value",
            [[3, 1]],
        ),
        (
            "EXISTS (SELECT 1 FROM json_each(w.episode_ids) e WHERE e.value = ?)",
            ("x",),
            "EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.episode_ids::jsonb) AS e(value) WHERE e.value = %s)",
            ["x"],
        ),
        (
            "SELECT * FROM memories m INDEXED BY memories_turns WHERE 1",
            (),
            "SELECT * FROM memories m WHERE 1",
            [],
        ),
    ],
)
def test_the_shared_sql_as_postgresql_reads_it(sql, params, expected_sql, expected_params):
    got_sql, got_params = prepared(translate(sql), params)
    assert got_sql == expected_sql
    assert list(got_params) == expected_params


TIMES = (
    "2024-03-01T12:30:00.000000Z",
    "0999-06-01T00:00:00.000000Z",
    "0001-01-01T00:00:00.000000Z",
    "9999-12-31T23:59:59.999999Z",
    "2024-02-29T23:59:59.123456Z",
)


def test_sqlite_functions_give_sqlites_answers(pg_url, tmp_path):
    Store(pg_url).close()
    path = str(tmp_path / "m.db")
    Store(path).close()
    queries = [
        *(("SELECT julianday(?)", (t,)) for t in TIMES),
        ("SELECT instr('hello world', 'o w')", ()),
        ("SELECT instr('hello', 'z')", ()),
        ('SELECT json_extract(\'{"a": "x", "b": 2}\', \'$.a\')', ()),
        ("SELECT json_extract('{\"superseded_by\": \"id-1\"}', '$.superseded_by')", ()),
        ("SELECT json_extract('[\"ada\", \"lives_in\"]', '$[1]')", ()),
        ("SELECT json_extract('{\"a\": 1}', '$.missing')", ()),
        ("SELECT json_array_length('[1, 2, 3]')", ()),
        (
            "SELECT json_extract(json_remove('{\"a\": 1, \"content\": \"x\", \"b\": 2}', '$.content', '$.a'), '$.b')",
            (),
        ),
        ("SELECT json_extract(json_remove('{\"a\": 1, \"content\": \"x\"}', '$.content'), '$.content')", ()),
    ]
    with Raw(pg_url) as pg, Raw(path) as lite:
        for sql, params in queries:
            got, want = pg.execute(sql, params).fetchone()[0], lite.execute(sql, params).fetchone()[0]
            if isinstance(want, float):
                assert got == pytest.approx(want, abs=1e-6), sql  # SQLite keeps milliseconds
            else:
                assert (None if got is None else str(got)) == (None if want is None else str(want)), sql


FILTERS = (
    {"n": 2},
    {"n": {"$gt": 1.5}},
    {"n": {"$lte": 2}},
    {"tag": {"$in": ["a", "c"]}},
    {"tag": {"$nin": ["a"]}},
    {"tag": None},
    {"tag": {"$exists": False}},
    {"tag": {"$exists": True}},
    {"flag": True},
    {"tag": {"$ne": "a"}},
    {"name": "Ada", "n": {"$gte": 1}},
)


def test_metadata_filters_select_the_same_memories_on_both_backends(pg_url, tmp_path):
    rows = [
        ("one", {"n": 1, "tag": "a", "name": "Ada"}),
        ("two", {"n": 2, "tag": "b", "flag": True}),
        ("three", {"n": 3, "tag": None}),
        ("four", {"n": 2.5, "tag": "c", "name": "Ada", "flag": False}),
        ("five", {}),
    ]
    chosen = {}
    for location in (pg_url, str(tmp_path / "m.db")):
        with Memory(location, embedder=HashEmbedder(64)) as memory:
            for text, metadata in rows:
                memory.add(text, user_id="ada", metadata=metadata)
            chosen[location] = [
                sorted(record.content for record in memory.get_all(user_id="ada", filters=f)) for f in FILTERS
            ]
    assert chosen[pg_url] == chosen[str(tmp_path / "m.db")]
    assert chosen[pg_url][0] == ["two"] and chosen[pg_url][3] == ["four", "one"]


def test_a_small_tenant_in_a_large_hnsw_partition_gets_every_hit(postgres_server, request):
    """HNSW returns at most ef_search rows before filters; when the filters reject most of them
    the search widens and ends exact, so a scope's rows are never missed."""
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    with Memory(url, embedder=HashEmbedder(64), postgres={"exact_max_rows": 50, "partitions": 4}) as memory:
        memory.add(
            [f"note number {i} about gardening" for i in range(400)], user_id="ada", run_id="big", infer=False
        )
        memory.add(
            [f"note {i} about a rare orchid" for i in range(3)], user_id="ada", run_id="small", infer=False
        )
        assert memory.store.vectors.wait_for_builds(
            60
        )  # through the blocks' indexes, built in the background
        hits = memory.search("gardening", user_id="ada", run_id="small", recipe="dense", k=10)
        assert sorted(hit.memory.content for hit in hits) == [
            f"note {i} about a rare orchid" for i in range(3)
        ]
        hits = memory.search("gardening", user_id="ada", recipe="dense", k=10)
        assert len(hits) == 10 and all("gardening" in hit.memory.content for hit in hits)
        with Raw(url) as raw:
            assert (
                raw.execute(
                    "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent WHERE c.relname = ?",
                    ("memory_vectors",),
                ).fetchone()[0]
                == 4
            )


def test_dense_search_matches_exact_cosine_through_hnsw(postgres_server, request):
    url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    embedder = HashEmbedder(64)
    texts = [f"memory {i} of {i % 7} kind {i % 13}" for i in range(300)]
    with Memory(url, embedder=embedder, postgres={"exact_max_rows": 10}) as memory:
        memory.add(texts, user_id="ada", infer=False)
        assert memory.store.vectors.wait_for_builds(60)
        query = "memory 42 of 0 kind 3"
        hits = memory.search(query, user_id="ada", recipe="dense", k=5)
    vectors = embedder.embed(texts)
    q = embedder.embed([query])[0]
    scores = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    best = {texts[i] for i in np.argsort(-scores)[:5]}
    assert len({hit.memory.content for hit in hits} & best) >= 4  # HNSW is approximate


def test_a_password_never_shows_and_an_unreachable_server_is_a_clear_error(tmp_path):
    url = f"postgresql://ada:s3cret-pw@/nodb?host={tmp_path}&port=1"
    with pytest.raises(MemoryFileError) as caught:
        Memory(url, embedder=HashEmbedder(64))
    assert "cannot connect" in str(caught.value) and "s3cret-pw" not in str(caught.value)


def test_stats_name_the_backend_without_the_password(pg_url):
    with Memory(pg_url, embedder=HashEmbedder(64)) as memory:
        stats = memory.stats()
    assert stats["backend"] == "postgres" and stats["driver"].startswith("psycopg")


def test_doctor_reports_the_server_pgvector_and_the_schema(pg_url, tmp_path):
    from dspy_memory.doctor import run_checks

    def postgres_line(db):
        checks = run_checks(db=db, embedder="test", lm="openai/gpt-4o-mini", probe=False)
        return next(check for check in checks if check.name == "postgres")

    before = postgres_line(pg_url)
    assert before.status == "ok" and "pgvector" in before.detail and "no store yet" in before.detail
    Memory(pg_url, embedder=HashEmbedder(64)).close()
    assert f"schema version {MIGRATIONS[-1].version}" in postgres_line(pg_url).detail
    down = postgres_line(f"postgresql://ada:pw@/nodb?host={tmp_path}&port=1")
    assert down.status == "fail" and "cannot connect" in down.detail and "pw" not in down.detail


def test_an_erased_vector_leaves_the_hnsw_index_file(pg_url):
    """An erased vector is gone from the HNSW index file once delete() returns (the file is read
    from the test server's data folder). compact() forces index cleanup because plain VACUUM
    skips it when few rows died (seen at 100k memories; this small table does not reach that).
    One-hot vectors: unit length already, so the index (which normalizes for cosine) stores
    exactly these bytes; the secret's is the only one with its 1.0 in the last place. Ada's
    first two rows (the secret the second) fill a block of exact_max_rows, so they have an HNSW
    index, which keeps the other row when the secret is erased."""
    from dspy_memory import CallableEmbedder

    def one_hot(texts):
        return [
            [1.0 if i == (63 if "secret" in text else 1 + len(text) % 62) else 0.0 for i in range(64)]
            for text in texts
        ]

    embedder = CallableEmbedder(one_hot, name="one-hot-v1")
    with Memory(pg_url, embedder=embedder, postgres={"exact_max_rows": 2}) as memory:
        memory.add([f"background note {'x' * (i % 90)} {i}" for i in range(200)], user_id="bob", infer=False)
        memory.add("Ada likes tea.", user_id="ada", infer=False)
        [record] = memory.add("Ada's secret is zanzibarquartz.", user_id="ada", infer=False).memories
        memory.add("Ada reads maps.", user_id="ada", infer=False)
        assert memory.store.vectors.wait_for_builds(60)  # the block's index is built in the background
        vector = np.array(one_hot(["secret"])[0], dtype=np.float32).tobytes()
        with Raw(pg_url) as raw:
            folder = raw.execute("SHOW data_directory").fetchone()[0]
            if not pathlib.Path(folder).is_dir():
                pytest.skip("the server's files are not on this machine")
            tag = raw.execute("SELECT replace(hashtext(?)::text, '-', 'n')", ("ada",)).fetchone()[0]
            [(relative,)] = raw.execute(
                "SELECT pg_relation_filepath(oid) FROM pg_class WHERE relname LIKE ? AND relkind = 'i'",
                (f"mv_hnsw_{tag if tag.startswith('n') else 'p' + tag}_%",),
            ).fetchall()
            raw.execute("CHECKPOINT")
            index_file = pathlib.Path(folder) / relative
            assert vector in index_file.read_bytes(), "the scan must see the vector before the erasure"
            memory.delete(record.id, user_id="ada")
            raw.execute("CHECKPOINT")
            assert vector not in index_file.read_bytes()
