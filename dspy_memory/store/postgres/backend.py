"""The PostgreSQL backend: pgvector for vectors, tsvector for keywords, psycopg 3 with a pool.

`Memory("postgresql://user@host/db")`. The URL may carry libpq options, e.g.
`?options=-csearch_path%3Dtenant_a,public` to keep a store in its own schema (pgvector's type
must stay on the search path)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from dspy_memory.errors import ExtensionLoadError, MemoryFileError, SchemaError
from dspy_memory.store.postgres.connection import Connections
from dspy_memory.store.postgres.keywords import KeywordIndex
from dspy_memory.store.postgres.schema import lock_key, migrate, schema_version
from dspy_memory.store.postgres.vectors import VectorIndex
from dspy_memory.store.sqlite.migrations import check_version

if TYPE_CHECKING:
    import psycopg

INSTALL = 'install the PostgreSQL backend with: pip install "dspy-memory[postgres]"'


def redacted(url: str) -> str:
    """`url` without its password (it is shown in errors and stats)."""
    url = re.sub(r"(://[^:/@?]*):[^@/?]*@", r"\1:***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url)


class PostgresJson:
    """Metadata filters with jsonb (see backend.JsonPaths). A JSON null reads as SQL NULL, as
    SQLite's json_extract does."""

    def value(self, key: str) -> tuple[str, list[Any]]:
        return "nullif(m.metadata::jsonb -> ?, 'null'::jsonb)", [key]

    def compare(self, value_sql: str, op: str) -> str:
        return f"{value_sql} {op} ?::jsonb"

    def param(self, operand: Any) -> Any:
        return json.dumps(operand)

    def one_of(self, value_sql: str, operands: list[Any], *, negate: bool) -> tuple[str, list[Any]]:
        return f"{value_sql} {'<> ALL' if negate else '= ANY'}(?::jsonb[])", [
            [json.dumps(x) for x in operands]
        ]

    def exists(self, key: str) -> tuple[str, list[Any]]:
        return "jsonb_exists(m.metadata::jsonb, ?)", [key]


def _value(raw: psycopg.Connection[tuple[Any, ...]], sql: str) -> Any:
    """The value of a query that always returns one row of one column."""
    row = raw.execute(sql).fetchone()
    assert row is not None, f"no row from {sql}"
    return row[0]


def probe(url: str) -> dict[str, Any]:
    """What `dspy-memory doctor` reports of a server, changing nothing: its version, pgvector
    (installed in the database, or only available), the store's schema version (None: none yet)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as raw:
        server = _value(raw, "SHOW server_version")
        installed = raw.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        available = raw.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        version = schema_version(raw) or None
    return {
        "server": server,
        "pgvector": installed[0] if installed else None,
        "pgvector_available": available[0] if available else None,
        "schema_version": version,
    }


class PostgresBackend:
    name = "postgres"
    json = PostgresJson()

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int,
        pool_size: int,
        partitions: int = 1,
        exact_max_rows: int = 20_000,
        read_only: bool = False,
    ) -> None:
        """`read_only`: open an existing store without DDL or writes, e.g. on a standby."""
        try:
            import pgvector  # noqa: F401
            import psycopg
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise ExtensionLoadError(
                f"{redacted(url)} needs psycopg, psycopg-pool and pgvector: {INSTALL}"
            ) from None
        self.path = redacted(url)
        self.driver_name = f"psycopg {psycopg.__version__}"
        self.partitions = partitions
        self.exact_max_rows = exact_max_rows
        self.vectors = VectorIndex(exact_max_rows=exact_max_rows)
        self.read_only = read_only
        try:
            with psycopg.connect(url, autocommit=True) as raw:
                # Before the pool opens: its connections register pgvector's type.
                self._ensure_vector(raw)
                key = lock_key(raw)
        except psycopg.OperationalError as exc:
            raise MemoryFileError(f"cannot connect to {self.path}: {str(exc).strip()}") from None
        self.conns = Connections(
            url,
            path=self.path,
            busy_timeout_ms=busy_timeout_ms,
            pool_size=pool_size,
            lock_key=key,
            read_only=read_only,
        )
        self.vectors.builds.start(self.conns.read)

    def _ensure_vector(self, raw: Any) -> None:
        import psycopg

        if raw.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        if self.read_only:
            raise SchemaError(
                f"{self.path} has no pgvector extension, so no dspy-memory store: a read-only Memory "
                "opens an existing one; open it once without read_only (on the primary server) to create it"
            )
        try:
            raw.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise ExtensionLoadError(
                f"{self.path} has no pgvector extension and this user cannot create it ({str(exc).strip()}); "
                "install pgvector on the server and run CREATE EXTENSION vector as a superuser"
            ) from None

    def migrate(self) -> list[int]:
        with self.conns.read() as conn:
            if self.read_only:
                check_version(schema_version(conn.raw), where=self.path)
                return []
            applied = migrate(conn.raw, partitions=self.partitions)
            self.vectors.ensure_indexes(conn.raw)
            return applied

    def vector_index(self, *, cache_min_rows: int, cache_max_rows: int) -> VectorIndex:
        return self.vectors

    def keyword_index(self, *, score_budget: int, context_weight: float) -> KeywordIndex:
        return KeywordIndex(context_weight=context_weight, score_budget=score_budget)

    def compact(self) -> int:
        """VACUUM the tables erasure changed, index cleanup forced: dead row versions leave the
        heap pages and every index (plain VACUUM skips index cleanup when few rows died, which
        left an erased vector inside the HNSW index), so no query or index scan finds them. What
        VACUUM does not do (docs/scaling.md, "Erasure"): zero the freed bytes inside pages, or
        reach WAL segments, replicas and backups that still hold them."""
        # A block build of this store holds a lock VACUUM waits for (and would time out on).
        self.vectors.builds.wait()
        with self.conns.read() as conn:
            for table in _ERASED_TABLES:
                conn.execute(f"VACUUM (INDEX_CLEANUP ON) {table}")
        return 0

    def reset_sequences(self, conn: Any) -> None:
        """Rows were inserted with their own ids (store/transfer.py): the identity columns
        would hand out those ids again, so they continue after the largest one."""
        for table, column in _IDENTITY_COLUMNS:
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), max({column})) "
                f"FROM {table} HAVING max({column}) IS NOT NULL"
            )

    def integrity(self, conn: Any) -> list[str]:
        # PostgreSQL checks its pages as it reads them (and with data checksums, if enabled).
        return ["ok"]

    def index_rows(self, conn: Any) -> dict[str, int]:
        return {
            "vectors": conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0],
            "keyword_entries": conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0],
        }

    def open_error(self, exc: BaseException) -> Exception | None:
        return None

    def close(self) -> None:
        self.vectors.builds.close()
        self.conns.close()


_ERASED_TABLES = (
    "memories", "memory_vectors", "memory_terms", "memory_events", "memory_sources", "episodes",
    "entities", "turn_context", "memory_links", "write_runs", "blocks", "block_versions", "feedback",
    "write_run_ops", "write_run_candidates",
)  # fmt: skip
_IDENTITY_COLUMNS = (
    ("episodes", "rowid"),
    ("memories", "row_id"),
    ("memory_events", "id"),
    ("write_runs", "id"),
)
