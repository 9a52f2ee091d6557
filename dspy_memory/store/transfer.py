"""Moving a whole store between backends: `migrate_store(source, destination)`, and
`dspy-memory migrate --from SRC --to DST` (docs/cli.md). SQLite file to PostgreSQL, back, or
file to file.

- Rows keep their keys, memory row ids included: the vectors, the keyword entries and
  `turn_context` are keyed by them. Tables are copied in the order of their foreign keys.
- The indexes are never copied row by row (their tables differ per backend): each memory row's
  vector goes through the destination's `VectorIndex.insert` and its keyword entry through
  `KeywordIndex.insert`, in the transaction that inserts the row, so a row and its index
  entries arrive together or not at all. A raw turn's keyword context is the text of the
  episodes its `turn_context` links name (what `TurnContext` indexed it with), so superseded
  turns keep theirs too and the source's window settings need not be known.
- Resumable: each batch is one destination transaction that skips the keys the destination
  already holds, so a run that was interrupted is finished by running it again.
- Verified: row counts and checksums per table on both sides (store/checksums.py); the
  keyword index by its row count.
- Every row, with every column: memories and episodes that expired but are not erased yet are
  copied with their `expires_at` (a copy must match its source), so no read returns them there
  either and the destination's maintain() erases them; retention policies come along.

What the destination may hold (rows of two stores are never merged): nothing (a new file or
schema), an interrupted copy of this source (marked in its `meta`, unmarked once verified), or
a finished copy of it (verified again, nothing copied). Anything else is refused. The source is
read in one snapshot, so the copy is of one moment: stop writers first, or what they write
after the start is not copied (and a resumed run finds the source changed and says so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.store import checksums
from dspy_memory.store.checksums import TABLES, Table
from dspy_memory.store.exchange_import import insert_rows, keyword_entries
from dspy_memory.store.store import Store
from dspy_memory.util.progress import OnProgress, report
from dspy_memory.util.text import is_postgres_url

BATCH_SIZE = 1000
MARKER = "migrating_from"  # meta key of a destination the copy is not finished in


class MigrationError(DSPyMemoryError):
    """A migration was refused, or its copy does not match the source. `report` holds the
    per-table comparison when the copy was made."""

    def __init__(self, message: str, *, report: MigrationReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class TableCheck:
    """One table on both sides. The keyword index is compared by rows only (no checksum)."""

    table: str
    source_rows: int
    destination_rows: int
    copied: int
    source_checksum: str | None
    destination_checksum: str | None

    @property
    def ok(self) -> bool:
        return self.source_rows == self.destination_rows and self.source_checksum == self.destination_checksum


@dataclass(frozen=True)
class MigrationReport:
    source: str
    destination: str
    resumed: bool  # an interrupted copy was continued
    checks: tuple[TableCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def copied(self) -> int:
        return sum(check.copied for check in self.checks)

    @property
    def mismatched(self) -> list[str]:
        return [check.table for check in self.checks if not check.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "resumed": self.resumed,
            "ok": self.ok,
            "copied": self.copied,
            "tables": [asdict(check) | {"ok": check.ok} for check in self.checks],
        }


def migrate_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[str], None] | None = None,
    on_progress: OnProgress | None = None,
) -> MigrationReport:
    """Copy every row of the store at `source` (a SQLite file or a postgresql:// URL) into
    `destination` (created if missing), verify the copy table by table and return the
    comparison. Raises MigrationError when the destination holds other data, or the copy does
    not match. `progress` gets a line per table copied; `on_progress` the source rows done of
    all of them after each batch, with how many were copied and how many were there already
    (an interrupted copy's); verifying comes after the last batch."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise MigrationError(f"batch_size must be a positive integer, got {batch_size!r}")
    _check_locations(source, destination)
    src = Store(source)
    try:
        dst = Store(destination)
        try:
            return _Transfer(src, dst, batch_size, progress or (lambda line: None), on_progress).run()
        finally:
            dst.close()
    finally:
        src.close()


def _check_locations(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
    def where(location: str | os.PathLike[str]) -> str:
        return str(location) if is_postgres_url(location) else os.path.realpath(location)

    if not is_postgres_url(source) and not os.path.isfile(source):
        raise MigrationError(f"no memory file at {os.fspath(source)!r}: --from names the store to copy")
    if where(source) == where(destination):
        raise MigrationError("the source and the destination are the same store; name another --to")


class _Transfer:
    def __init__(
        self,
        src: Store,
        dst: Store,
        batch_size: int,
        progress: Callable[[str], None],
        on_progress: OnProgress | None,
    ) -> None:
        self.src, self.dst = src, dst
        self.batch_size = batch_size
        self.progress = progress
        self.on_progress = on_progress
        self.rows_total: int | None = None  # every table's, counted only when on_progress is given
        self.rows_done = self.rows_copied = 0
        self.sconn: Any = None  # the source snapshot every read of the source goes through
        self.columns: dict[str, list[str]] = {}

    def run(self) -> MigrationReport:
        with self.src.snapshot() as sconn:
            self.sconn = sconn
            self._check_schemas()
            identity = self._identity()
            with self.dst.snapshot() as dconn:
                marker = _meta(dconn, MARKER)
                holds_rows = any(_has_rows(dconn, table.name) for table in TABLES)
            if marker is not None and marker != identity:
                raise MigrationError(
                    f"{self.dst.path} holds an interrupted copy of another store; migrate into an empty "
                    "database (a new file, or a new PostgreSQL schema)"
                )
            if marker is None and holds_rows:
                report = self._verify({}, resumed=False)
                if not report.ok:
                    raise MigrationError(
                        f"{self.dst.path} already holds memories that are not a copy of {self.src.path} "
                        f"(differing: {', '.join(report.mismatched)}); migrate into an empty database "
                        "(a new file, or a new PostgreSQL schema)"
                    )
                self.progress(f"{self.dst.path} is already a complete copy of {self.src.path}")
                return report
            self._bind_embedder()
            with self.dst.transaction() as conn:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", (MARKER, identity)
                )
            if self.on_progress is not None:
                self.rows_total = sum(_count(self.sconn, table.name) for table in TABLES)
            self._tell()
            copied = {table.name: self._copy(table) for table in TABLES}
            copied["vectors"] = copied["keyword index"] = copied["memories"]
            with self.dst.transaction() as conn:
                self.dst.backend.reset_sequences(conn)
                # The audit log goes on where the source's left off, with the same scope hashes.
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [row for row in checksums.meta_rows(self.sconn) if row[0].startswith("audit_")],
                )
            report = self._verify(copied, resumed=marker is not None)
        if not report.ok:
            raise MigrationError(
                f"the copy in {self.dst.path} differs from {self.src.path} in {', '.join(report.mismatched)}: "
                "the source changed since the copy began, or the destination was written meanwhile; "
                "migrate again into an empty database",
                report=report,
            )
        with self.dst.transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = ?", (MARKER,))
        return report

    # -- checks before copying ----------------------------------------------------------------

    def _check_schemas(self) -> None:
        with self.dst.snapshot() as dconn:
            versions = [_version(conn) for conn in (self.sconn, dconn)]
            if versions[0] != versions[1]:
                raise MigrationError(
                    f"{self.src.path} has schema version {versions[0]} but {self.dst.path} has "
                    f"{versions[1]}; open both with the same dspy-memory"
                )
            for table in TABLES:
                mine, theirs = (
                    checksums.column_names(self.sconn, table.name),
                    checksums.column_names(dconn, table.name),
                )
                if mine != theirs:
                    raise MigrationError(
                        f"table {table.name} has columns {mine} in {self.src.path} but {theirs} in "
                        f"{self.dst.path}; open both with the same dspy-memory"
                    )
                self.columns[table.name] = mine

    def _identity(self) -> str:
        """What tells this source from another store: when its schema was created, and its
        embedder (a moved or renamed file stays the same source)."""
        created = self.sconn.execute("SELECT min(applied_at) FROM schema_migrations").fetchone()[0]
        return json.dumps({"created": created, "embedder": self.src.embedder_info()})

    def _bind_embedder(self) -> None:
        mine, theirs = self.src.embedder_info(), self.dst.embedder_info()
        if theirs is not None and theirs != mine:
            raise MigrationError(
                f"{self.dst.path} is bound to embedder {theirs[0]!r} ({theirs[1]} dimensions) but "
                f"{self.src.path} to {'none' if mine is None else f'{mine[0]!r} ({mine[1]} dimensions)'}; "
                "migrate into an empty database"
            )
        if mine is not None:
            self.dst.bind_embedder(*mine)

    # -- copying ---------------------------------------------------------------------------------

    def _copy(self, table: Table) -> int:
        """Copy the rows the destination lacks, a batch per transaction; returns how many."""
        columns = self.columns[table.name]
        copied = read = 0
        for rows in checksums.pages(self.sconn, table, columns, self.batch_size):
            keys = [table.key_of(row) for row in rows]
            with self.dst.transaction() as conn:
                held = _held(conn, table, keys)
                new = [row for row, key in zip(rows, keys) if key not in held]
                if new:
                    insert_rows(conn, table.name, columns, new)
                    if table.name == "memories":
                        self._index(conn, new)
            copied += len(new)
            read += len(rows)
            self.rows_done += len(rows)
            self.rows_copied += len(new)
            self._tell()
        self.progress(f"{table.name}: {read} rows, {copied} copied")
        return copied

    def _tell(self) -> None:
        done, copied = self.rows_done, self.rows_copied
        report(self.on_progress, done, self.rows_total, "rows", copied=copied, already=done - copied)

    def _index(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        """The vectors and keyword entries of new memory rows, inside their transaction."""
        ids = json.dumps([row["row_id"] for row in rows])
        vectors = self.sconn.execute(
            "SELECT row_id, partition_key, agent_id, run_id, embedding FROM memory_vectors "
            "WHERE row_id IN (SELECT value FROM json_each(?)) ORDER BY row_id",
            (ids,),
        ).fetchall()
        if vectors:
            self.dst.vectors.insert(
                conn,
                [row["row_id"] for row in vectors],
                [row["partition_key"] for row in vectors],
                [row["agent_id"] for row in vectors],
                [row["run_id"] for row in vectors],
                np.stack([self.src.vectors.decode(row["embedding"]) for row in vectors]),
            )
        # The turn contexts are read from the source: its `turn_context` rows come later.
        self.dst.keywords.insert(conn, keyword_entries(self.sconn, rows))

    # -- verification ----------------------------------------------------------------------------

    def _verify(self, copied: dict[str, int], *, resumed: bool) -> MigrationReport:
        checks = []

        def compare(name: str, found: list[tuple[int, str | None]]) -> None:
            (rows, checksum), (their_rows, their_checksum) = found
            checks.append(TableCheck(name, rows, their_rows, copied.get(name, 0), checksum, their_checksum))

        with self.dst.snapshot() as dconn:
            sides = ((self.sconn, self.src), (dconn, self.dst))
            compare("meta", [checksums.embedder_digest(conn) for conn, _ in sides])
            for table in TABLES:
                columns = self.columns[table.name]
                compare(
                    table.name, [checksums.digest(conn, table, columns, self.batch_size) for conn, _ in sides]
                )
            compare(
                "vectors", [checksums.vector_digest(conn, s.vectors, self.batch_size) for conn, s in sides]
            )
            compare("keyword index", [(s.keywords.count(conn), None) for conn, s in sides])
        return MigrationReport(self.src.path, self.dst.path, resumed, tuple(checks))


# -- SQL helpers (shared SQL: both backends read it) ---------------------------------------------


def _meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _count(conn: Any, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _has_rows(conn: Any, table: str) -> bool:
    return conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None


def _version(conn: Any) -> int:
    return int(conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0)


def _held(conn: Any, table: Table, keys: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    """The keys the destination already holds between the first and last keys of a batch (with
    a `lead`, of the batch's first key values: a range of a view is read whole)."""
    if table.lead is not None:
        rows = conn.execute(
            f"SELECT {table.key_sql} FROM {table.name} WHERE {table.key[0]} IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted({key[0] for key in keys})),),
        ).fetchall()
        return {tuple(row) for row in rows}
    first, last = keys[0], keys[-1]
    marks = ", ".join("?" * len(table.key))
    rows = conn.execute(
        f"SELECT {table.key_sql} FROM {table.name} "
        f"WHERE ({table.key_sql}) >= ({marks}) AND ({table.key_sql}) <= ({marks})",
        [*first, *last],
    ).fetchall()
    return {tuple(row) for row in rows}
