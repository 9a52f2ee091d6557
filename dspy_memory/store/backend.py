"""The contract between the Store and a database backend (SQLite or PostgreSQL).

Everything above this line is shared: the Store, the write and read paths, erasure, lifecycle
rows, episodes, blocks and keys speak one SQL (the subset SQLite and PostgreSQL share; the
PostgreSQL backend translates what differs mechanically: placeholders, null-safe equality,
list parameters). A backend supplies what cannot be one SQL text: connections and
transactions, the schema, the vector and keyword indexes, the JSON predicates of metadata
filters, and what erasure must do to the database files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from dspy_memory.store.queries import Candidate
from dspy_memory.util.text import is_postgres_url

NO_USER = ""  # the vector partition of memories without a user_id (never a valid user id)
# The schema version after which the Store builds the keyword contexts of the raw turns a
# database already held (SQLite files made before it; a new database has none).
TURN_CONTEXT_VERSION = 5


class Connections(Protocol):
    """Connections with the transactions every backend gives the same meaning:
    - `read()`: a connection for reads (inside this thread's transaction when there is one);
    - `snapshot()`: a read transaction, every statement sees one committed state;
    - `transaction()`: a write transaction; writers are serialized (one at a time, across
      processes), so a compare-and-set inside it is exact; nested calls join the outer one;
    - `transaction_if_free()`: the same, or None at once when another writer holds the lock.
    Opened read-only (`read_only`), both transactions raise ReadOnlyError."""

    path: str
    read_only: bool

    def read(self) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def transaction(self) -> AbstractContextManager[Any]: ...
    def transaction_if_free(self) -> AbstractContextManager[Any | None]: ...
    def in_transaction(self) -> bool: ...
    def insert_rows(
        self,
        conn: Any,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        generated: str | None = None,
    ) -> list[int]:
        """Insert `rows` (values in the order of `columns`) into `table` in the caller's
        transaction `conn`, the batch as the backend writes batches fastest (SQLite: prepared
        statements; PostgreSQL: COPY); with `generated`, the ids that column gave the rows, in
        the rows' order."""
        ...

    def check_open(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...


class VectorIndex(Protocol):
    """Vectors of memory rows. Both backends keep them in `memory_vectors (row_id, embedding)`
    for shared SQL that reads them; `decode` turns a read `embedding` into a float32 array."""

    dim: int | None

    def decode(self, stored: Any) -> np.ndarray: ...

    def create(self, conn: Any, dim: int) -> None: ...
    def insert(
        self,
        conn: Any,
        row_ids: list[int],
        partitions: list[str],
        agent_ids: list[str],
        run_ids: list[str],
        embeddings: np.ndarray,
    ) -> None: ...
    def delete(self, conn: Any, row_ids: list[int]) -> int: ...
    def sizes(self, conn: Any, partition: str | None) -> tuple[int, int]:
        """(rows in the whole index, rows in `partition`; every partition if None)."""
        ...

    def search(
        self,
        conn: Any,
        query: np.ndarray,
        n: int,
        *,
        partition: str | None,
        agent_id: str | None,
        run_id: str | None,
        predicate: str,
        params: list[Any],
        coarse: int,
        reference: str,
    ) -> list[Candidate]: ...


class KeywordIndex(Protocol):
    def insert(
        self, conn: Any, rows: list[tuple[int, str, str, str | None, str | None, str | None]]
    ) -> None: ...
    def set_contexts(self, conn: Any, contexts: list[tuple[int, str]]) -> None: ...
    def erase(self, conn: Any, row_ids: list[int], *, total_rows: int) -> int:
        """Delete rows so that none of their terms stays in the index."""
        ...

    def count(self, conn: Any) -> int: ...
    def clear_cache(self) -> None: ...
    def search(
        self,
        conn: Any,
        terms: list[str],
        scope: tuple[str | None, str | None, str | None],
        n: int,
        *,
        predicate: str,
        params: list[Any],
        scope_rows: int | None,
        total_rows: int,
        reference: str,
    ) -> list[Candidate]: ...


class JsonPaths(Protocol):
    """SQL for metadata filters (store/queries.py::metadata_predicate builds and checks them):
    `value(key)` is the key's value in `m.metadata` (SQL NULL when missing or JSON null),
    comparable with `param(x)`; `exists(key)` is true when the key is present."""

    def value(self, key: str) -> tuple[str, list[Any]]: ...
    def compare(self, value_sql: str, op: str) -> str: ...
    def param(self, operand: Any) -> Any: ...
    def one_of(self, value_sql: str, operands: list[Any], *, negate: bool) -> tuple[str, list[Any]]: ...
    def exists(self, key: str) -> tuple[str, list[Any]]: ...


class Backend(Protocol):
    """One database: `name` is "sqlite" or "postgres"; `path` says where it is (a file, or a
    URL without its password). Its members are read-only (properties): each backend has its
    own Connections and JsonPaths, which a settable member would have to be exactly."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def driver_name(self) -> str: ...
    @property
    def conns(self) -> Connections: ...
    @property
    def json(self) -> JsonPaths: ...

    def migrate(self) -> list[int]:
        """Create or upgrade the schema; opened read-only, only check that it is this version's."""
        ...

    def vector_index(self, *, cache_min_rows: int, cache_max_rows: int) -> VectorIndex: ...
    def keyword_index(self, *, score_budget: int, context_weight: float) -> KeywordIndex: ...
    def compact(self) -> int:
        """After an erasure: make the erased bytes unreachable in the database's files, as far
        as the engine allows (docs/scaling.md, "Erasure")."""
        ...

    def reset_sequences(self, conn: Any) -> None:
        """After rows were inserted with explicit ids (a migration): new rows get larger ones."""
        ...

    def integrity(self, conn: Any) -> list[str]: ...
    def index_rows(self, conn: Any) -> dict[str, int]: ...
    def open_error(self, exc: BaseException) -> Exception | None: ...
    def close(self) -> None: ...


def open_backend(location: str | os.PathLike[str], **options: Any) -> Backend:
    """The backend for a file path (SQLite) or a postgresql:// URL. `encryption_key` (else
    $DSPY_MEMORY_ENCRYPTION_KEY) encrypts a SQLite file (store/sqlite/cipher.py)."""
    from dspy_memory.store.sqlite.cipher import given_key, postgres_key_error

    if is_postgres_url(location):
        from dspy_memory.store.postgres.backend import PostgresBackend

        # A key given for this store is refused; the environment's is for the process's SQLite
        # files (e.g. the encrypted source of a `migrate` to PostgreSQL).
        if options.get("encryption_key") not in (None, False):
            raise postgres_key_error()

        return PostgresBackend(
            str(location),
            busy_timeout_ms=options.get("busy_timeout_ms", 10_000),
            pool_size=options.get("pool_size", 10),
            partitions=options.get("partitions", 1),
            exact_max_rows=options.get("exact_max_rows", 20_000),
            read_only=options.get("read_only", False),
        )
    from dspy_memory.store.sqlite.backend import SqliteBackend

    encryption_key = given_key(options.get("encryption_key"))
    return SqliteBackend(
        os.fspath(location),
        busy_timeout_ms=options.get("busy_timeout_ms", 10_000),
        driver=options.get("driver"),
        encryption_key=encryption_key,
        read_only=options.get("read_only", False),
    )
