"""PostgreSQL connections: a psycopg 3 pool, with the transactions of backend.Connections.

Writers are serialized by a transaction-level advisory lock (one per schema), so a write
transaction sees every earlier commit and nothing commits under it: the compare-and-set of the
write path and the atomic episode claims mean on PostgreSQL what they mean on SQLite, across
any number of processes and hosts. Reads never wait for it. Statements run in autocommit mode
outside transactions; a read snapshot is a REPEATABLE READ transaction.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dspy_memory.errors import InvalidInputError, MemoryClosedError, ReadOnlyError
from dspy_memory.store.faults import postgres_storage_error as storage_error
from dspy_memory.store.postgres.dialect import number, prepared, row_factory, translate

_ID_TYPE = "bigint"  # of the identity columns (store/postgres/schema.py)
_COPY_MIN_ROWS = 8  # batches this small are inserted by one INSERT


class Connection:
    """A pooled psycopg connection that takes the shared SQL (store/postgres/dialect.py)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.depth = 0  # write transactions open on it (nested calls join the outermost)
        self.snapshot = False
        self._after_commit: list[Callable[[Any], None]] = []

    def after_commit(self, action: Callable[[Any], None]) -> None:
        """Run `action(raw connection)` once the write transaction commits, outside it (for
        statements that cannot run in a transaction); dropped if it rolls back."""
        self._after_commit.append(action)

    def execute(self, sql: str, params: Any = None) -> Any:
        with _nul_refused():
            return self.raw.execute(*prepared(translate(sql), params))

    def executemany(self, sql: str, seq: Any) -> Any:
        translated = translate(sql)
        cursor = self.raw.cursor()
        # Consecutive rows that resolve to the same SQL go in one batch (in their order).
        for text, rows in itertools.groupby(
            (prepared(translated, params) for params in seq), key=lambda p: p[0]
        ):
            with _nul_refused():
                cursor.executemany(text, [row for _, row in rows])
        return cursor


@contextmanager
def _nul_refused() -> Iterator[None]:
    """PostgreSQL's text (and jsonb) cannot hold U+0000, which SQLite stores: refuse it as bad
    input, clearly, instead of a driver error (the transaction rolls back: nothing is stored)."""
    import psycopg

    try:
        yield
    except (psycopg.DataError, psycopg.errors.UntranslatableCharacter) as exc:
        if "0x00" not in str(exc) and "\\u0000" not in str(exc):
            raise
        raise InvalidInputError(
            "PostgreSQL cannot store the character U+0000 (NUL) in text or JSON: remove it from the "
            "input (a SQLite store keeps it)"
        ) from None


def _configure(raw: Any, *, lock_timeout_ms: int, read_only: bool) -> None:
    from pgvector.psycopg import register_vector
    from psycopg.adapt import Loader

    class NumberLoader(Loader):
        def load(self, data: Any) -> Any:
            from decimal import Decimal

            return number(Decimal(bytes(data).decode()))

    raw.row_factory = row_factory
    raw.adapters.register_loader("numeric", NumberLoader)
    register_vector(raw)
    raw.execute("SET TIME ZONE 'UTC'")
    # A writer waits this long for the write lock (SQLite: busy_timeout), then fails.
    # (0 would mean forever on PostgreSQL; SQLite's busy_timeout 0 means not at all.)
    raw.execute(f"SET lock_timeout = {max(1, int(lock_timeout_ms))}")
    if read_only:
        # Belt and braces: the server refuses any write a read path might still attempt.
        raw.execute("SET default_transaction_read_only = on")


class Connections:
    def __init__(
        self,
        url: str,
        *,
        path: str,
        busy_timeout_ms: int,
        pool_size: int,
        lock_key: int,
        read_only: bool = False,
    ) -> None:
        from psycopg_pool import ConnectionPool

        self.path = path
        self.read_only = read_only
        self._lock_key = lock_key
        self._lock_timeout_ms = max(1, int(busy_timeout_ms))
        self._local = threading.local()
        self._closed = False
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=lambda raw: _configure(raw, lock_timeout_ms=busy_timeout_ms, read_only=read_only),
            timeout=max(30.0, busy_timeout_ms / 1000),
            open=True,
        )

    @contextmanager
    def _borrowed(self) -> Iterator[Connection]:
        """This thread's connection; every statement runs inside one of these, where the
        server's storage faults (disk full, I/O errors) become StorageErrors naming the database."""
        import psycopg

        try:
            current = getattr(self._local, "conn", None)
            if current is not None:
                yield current
                return
            self.check_open()
            with self._pool.connection() as raw:
                conn = Connection(raw)
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except psycopg.Error as exc:
            error = storage_error(self.path, exc)
            if error is None:
                raise
            raise error from exc

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._borrowed() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        with self._borrowed() as conn:
            if conn.depth or conn.snapshot:
                yield conn
                return
            conn.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            conn.snapshot = True
            try:
                yield conn
            except BaseException:
                conn.raw.execute("ROLLBACK")
                raise
            else:
                conn.raw.execute("COMMIT")
            finally:
                conn.snapshot = False

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self._borrowed() as conn:
            if conn.depth:
                yield from self._joined(conn)
                return
            if conn.snapshot:
                raise RuntimeError("a write transaction cannot start inside a read snapshot")
            self._begin_locked(conn, wait=True)
            yield from self._outermost(conn)

    @contextmanager
    def transaction_if_free(self) -> Iterator[Connection | None]:
        with self._borrowed() as conn:
            if conn.depth:
                yield from self._joined(conn)
            elif conn.snapshot or not self._begin_locked(conn, wait=False):
                yield None
            else:
                yield from self._outermost(conn)

    def _begin_locked(self, conn: Connection, *, wait: bool) -> bool:
        """BEGIN and take the write lock, waiting for it (up to lock_timeout) or not; False,
        with nothing left open, when another writer holds it."""
        if self.read_only:
            raise ReadOnlyError.for_path(self.path)
        conn.raw.execute("BEGIN")
        try:
            # Also per transaction: behind PgBouncer in transaction mode the session's SET may
            # belong to another client's server connection.
            conn.raw.execute(f"SET LOCAL lock_timeout = {self._lock_timeout_ms}")
            if wait:
                conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                return True
            taken = conn.raw.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._lock_key,)).fetchone()[0]
        except BaseException:
            conn.raw.execute("ROLLBACK")
            raise
        if not taken:
            conn.raw.execute("ROLLBACK")
        return bool(taken)

    @staticmethod
    def _joined(conn: Connection) -> Iterator[Connection]:
        conn.depth += 1
        try:
            yield conn
        finally:
            conn.depth -= 1

    @staticmethod
    def _outermost(conn: Connection) -> Iterator[Connection]:
        conn.depth = 1
        try:
            yield conn
        except BaseException:
            conn.raw.execute("ROLLBACK")
            raise
        else:
            conn.raw.execute("COMMIT")
        finally:
            conn.depth = 0
            actions, conn._after_commit = conn._after_commit, []
        for action in actions:
            action(conn.raw)

    @staticmethod
    def insert_rows(
        conn: Connection,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        generated: str | None = None,
        types: Sequence[str] | None = None,
    ) -> list[int]:
        """Insert `rows` (values in the order of `columns`) into `table` inside the caller's
        transaction, by COPY; with `generated` (an identity column), the ids it gave the rows,
        in their order. `types` (the columns' type names): COPY in binary, which takes vectors
        as bytes instead of text (store/backend.py, Connections.insert_rows).

        A multi-row INSERT of a batch has ~20,000 placeholders: psycopg parsed each such text
        anew (12% of an add of 1,000 raw turns), where COPY sends rows with no statement to
        parse. COPY has no RETURNING, so the ids are drawn from the column's sequence first, in
        order, as the column's default would draw them."""
        if not rows:
            return []
        if len(rows) <= _COPY_MIN_ROWS:
            # A few rows (one message's): one INSERT, one round trip, its text prepared after 5
            # runs. COPY takes three (the ids, COPY, its end): +10% on an add of one message.
            values = "(" + ", ".join(["%s"] * len(columns)) + ")"
            returning = f" RETURNING {generated}" if generated is not None else ""
            with _nul_refused():
                returned = conn.raw.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([values] * len(rows))}{returning}",
                    [value for row in rows for value in row],
                )
                # The identity is drawn row by row in the rows' order (writers are serialized).
                return sorted(row[0] for row in returned.fetchall()) if generated is not None else []
        ids: list[int] = []
        if generated is not None:
            ids = [
                row[0]
                for row in conn.raw.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s) ORDER BY 1",
                    (table, generated, len(rows)),
                ).fetchall()
            ]
            columns = (generated, *columns)
            types = (_ID_TYPE, *types) if types is not None else None
            rows = [(row_id, *row) for row_id, row in zip(ids, rows)]
        binary = " WITH (FORMAT BINARY)" if types is not None else ""
        with (
            _nul_refused(),
            conn.raw.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN{binary}") as copy,
        ):
            if types is not None:
                copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)
        return ids

    def in_transaction(self) -> bool:
        current = getattr(self._local, "conn", None)
        return bool(current is not None and current.depth)

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise MemoryClosedError.for_path(self.path)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()
