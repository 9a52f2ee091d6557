"""PostgreSQL dense search with pgvector: float vectors, cosine distance, an exact scan for small
partitions and HNSW for large ones.

A partition is one `partition_key` (a user id, NO_USER for memories without one). Its HNSW
index is partial (`WHERE hashtext(partition_key) = <its hash>`, so no user id is written into
the catalog) and exists only once the partition has outgrown `exact_max_rows`: below that a
search scans the partition exactly anyway, and an index would make every insert pay a graph
insertion (~3 ms at 100k rows) and every erasure an HNSW vacuum. The index is built after the
write that took the partition past the threshold commits (see `_build`); a partition that
shrinks below it keeps its index, and an emptied one loses it.

An HNSW scan in pgvector 0.6 returns at most `hnsw.ef_search` rows and the filters (scope,
time, kind) apply after it, so the scan's `ef_search` is at least the coarse candidate count,
widened (and finally scanned exactly) while the filters reject too many. Distances are exact
cosine either way, so there is nothing to rescore.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate

logger = logging.getLogger("dspy_memory")

EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search
LEGACY_INDEX = "memory_vectors_hnsw"  # the table-wide index of stores made before issue 30
# An HNSW build keeps its graph in maintenance_work_mem (64 MB by default: a 40k-row build
# took 33 s there against 15 s with 512 MB, measured with 384-dim vectors).
BUILD_MEMORY = "512MB"


def index_name(key_hash: int) -> str:
    """The name of the HNSW index of the partition whose hashtext(partition_key) is `key_hash`."""
    return f"memory_vectors_hnsw_{'n' if key_hash < 0 else 'p'}{abs(key_hash)}"


class VectorIndex:
    def __init__(self, *, exact_max_rows: int) -> None:
        self.dim: int | None = None
        self.exact_max_rows = exact_max_rows
        # Partitions with a valid HNSW index, as hashtext(partition_key), learned from the
        # catalog. Stale only if another process dropped one (its partition was emptied): a
        # search through a missing index is then an exact scan, still correct.
        self._indexed: dict[str, int] = {}

    @staticmethod
    def decode(stored: Any) -> np.ndarray:
        return np.asarray(stored.to_numpy() if hasattr(stored, "to_numpy") else stored, dtype=np.float32)

    def create(self, conn: Any, dim: int) -> None:
        """Give the vector column its dimension; the HNSW indexes come later, per partition."""
        conn.execute(f"ALTER TABLE memory_vectors ALTER COLUMN embedding TYPE vector({int(dim)})")
        self.dim = dim

    def insert(
        self,
        conn: Any,
        row_ids: list[int],
        partitions: list[str],
        agent_ids: list[str],
        run_ids: list[str],
        embeddings: np.ndarray,
    ) -> None:
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        conn.executemany(
            "INSERT INTO memory_vectors (row_id, partition_key, agent_id, run_id, embedding) VALUES (?, ?, ?, ?, ?)",
            [
                (row_id, partition, agent, run, embeddings[i])
                for i, (row_id, partition, agent, run) in enumerate(
                    zip(row_ids, partitions, agent_ids, run_ids)
                )
            ],
        )
        counts: dict[str, int] = {}
        for partition in partitions:
            counts[partition] = counts.get(partition, 0) + 1
        conn.executemany(
            "INSERT INTO vector_partitions (partition_key, row_count) VALUES (?, ?) "
            "ON CONFLICT (partition_key) DO UPDATE SET row_count = vector_partitions.row_count + excluded.row_count",
            sorted(counts.items()),
        )
        unindexed = [partition for partition in counts if partition not in self._indexed]
        if not unindexed:
            return
        grown = conn.execute(
            "SELECT partition_key FROM vector_partitions "
            "WHERE partition_key IN (SELECT value FROM json_each(?)) AND row_count > ?",
            (json.dumps(unindexed), self.exact_max_rows),
        ).fetchall()
        for (partition,) in grown:
            conn.after_commit(lambda raw, partition=partition: self._safely(self._build, raw, partition))

    def delete(self, conn: Any, row_ids: list[int]) -> int:
        if not row_ids:
            return 0
        deleted = conn.execute(
            "DELETE FROM memory_vectors WHERE row_id IN (SELECT value FROM json_each(?)) RETURNING partition_key",
            (json.dumps(row_ids),),
        ).fetchall()
        counts: dict[str, int] = {}
        for row in deleted:
            counts[row[0]] = counts.get(row[0], 0) + 1
        conn.executemany(
            "UPDATE vector_partitions SET row_count = row_count - ? WHERE partition_key = ?",
            [(count, partition) for partition, count in sorted(counts.items())],
        )
        # An empty partition's row would keep the user id after a purge; its index goes too.
        emptied = conn.execute("DELETE FROM vector_partitions WHERE row_count <= 0 RETURNING partition_key")
        for (partition,) in emptied.fetchall():
            conn.after_commit(lambda raw, partition=partition: self._safely(self._drop, raw, partition))
        return len(deleted)

    # -- the partitions' HNSW indexes ---------------------------------------------------------

    @staticmethod
    def _state(raw: Any, partition: str) -> tuple[int, bool | None]:
        """(hashtext of the partition key, whether its index is valid; None: there is none)."""
        key_hash = raw.execute("SELECT hashtext(%s)", (partition,)).fetchone()[0]
        row = raw.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (index_name(key_hash),)
        ).fetchone()
        return key_hash, None if row is None else bool(row[0])

    def _build(self, raw: Any, partition: str) -> None:
        """Build the partition's HNSW index, unless another session is building it.

        It runs after the write that grew the partition has committed, on the writer's
        connection, as CREATE INDEX CONCURRENTLY: a plain CREATE INDEX inside the write
        transaction would hold the write lock (every other writer waits, and times out after
        busy_timeout) and a SHARE lock on the table for the whole build (seconds at 20k rows).
        CONCURRENTLY cannot run inside a transaction, so it cannot be part of the write; if it
        fails (the index is left invalid) the next write to the partition builds it again. A
        session advisory lock per partition lets one session build and the others skip: they
        search exactly until the index is valid."""
        key_hash, valid = self._state(raw, partition)
        if valid:
            self._indexed[partition] = key_hash
            return
        lock = raw.execute("SELECT hashtext('dspy_memory:hnsw:' || current_schema() || %s)", (str(key_hash),))
        lock_id = lock.fetchone()[0]
        if not raw.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()[0]:
            return
        try:
            key_hash, valid = self._state(raw, partition)  # another session may have built it
            if valid is False:  # left by a build that failed
                raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(key_hash)}")
            if not valid:
                # The leaf table holding the partition (the table itself unless split by hash).
                leaf = raw.execute(
                    "SELECT tableoid::regclass::text FROM memory_vectors WHERE partition_key = %s LIMIT 1",
                    (partition,),
                ).fetchone()
                if leaf is None:
                    return
                raw.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
                try:
                    raw.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index_name(key_hash)} ON {leaf[0]} "
                        f"USING hnsw (embedding vector_cosine_ops) WHERE hashtext(partition_key) = {int(key_hash)}"
                    )
                finally:
                    raw.execute("RESET maintenance_work_mem")
            self._indexed[partition] = key_hash
        finally:
            raw.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))

    def _safely(self, action: Any, raw: Any, partition: str) -> None:
        """`action(raw, partition)` (a build or a drop), run after a write committed or on
        opening: the write stands whatever happens, so a failure (a lock timeout, a cancelled
        build) is logged, not raised, and the next write to the partition tries again."""
        import psycopg

        try:
            action(raw, partition)
        except psycopg.Error as exc:
            logger.warning(
                "the HNSW index of a vector partition could not be %s (%s); the next write to it tries "
                "again (searches there scan exactly meanwhile)",
                "built" if action == self._build else "dropped",
                str(exc).strip(),
            )

    def _drop(self, raw: Any, partition: str) -> None:
        """Drop the index of a partition emptied by an erasure (its rows are gone)."""
        self._indexed.pop(partition, None)
        key_hash = raw.execute("SELECT hashtext(%s)", (partition,)).fetchone()[0]
        if raw.execute("SELECT 1 FROM vector_partitions WHERE partition_key = %s", (partition,)).fetchone():
            return  # refilled meanwhile: its index serves again
        raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(key_hash)}")

    def ensure_indexes(self, raw: Any) -> None:
        """On opening: every partition past `exact_max_rows` gets its index (a build that failed
        is retried), and a store made before per-partition indexes loses its table-wide one once
        they exist. `raw`: a psycopg connection in autocommit mode."""
        grown = raw.execute(
            "SELECT partition_key FROM vector_partitions WHERE row_count > %s ORDER BY partition_key",
            (self.exact_max_rows,),
        ).fetchall()
        for (partition,) in grown:
            self._safely(self._build, raw, partition)
        if raw.execute("SELECT to_regclass(%s) IS NOT NULL", (LEGACY_INDEX,)).fetchone()[0]:
            if all(partition in self._indexed for (partition,) in grown):
                raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {LEGACY_INDEX}")

    def _index_of(self, conn: Any, partition: str) -> int | None:
        """hashtext of the partition key if the partition has a valid HNSW index, else None."""
        if partition not in self._indexed:
            key_hash, valid = self._state(conn.raw, partition)
            if not valid:
                return None
            self._indexed[partition] = key_hash
        return self._indexed[partition]

    def sizes(self, conn: Any, partition: str | None) -> tuple[int, int]:
        total, rows = conn.execute(
            "SELECT coalesce(sum(row_count), 0), "
            "coalesce(sum(CASE WHEN partition_key = ? THEN row_count END), 0) FROM vector_partitions",
            (partition,),
        ).fetchone()
        return int(total), int(total if partition is None else rows)

    @staticmethod
    def nearest_query(
        query: np.ndarray,
        count: int,
        *,
        partition: str | None,
        agent_id: str | None,
        run_id: str | None,
        key_hash: int | None,
    ) -> tuple[str, list[Any]]:
        """The SQL (shared style) of the `count` nearest rows: through the partition's HNSW index
        when `key_hash` (its hashtext) is given, else an exact scan."""
        where, params = [], []
        for column, value in (("partition_key", partition), ("agent_id", agent_id), ("run_id", run_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if key_hash is not None:
            # The partial index's predicate, as a literal, so the planner can match it.
            where.append(f"hashtext(partition_key) = {int(key_hash)}")
        # An expression the HNSW index cannot order by makes the scan exact; each row's distance
        # is computed once (ordered by the output column).
        distance = "embedding <=> ?" if key_hash is not None else "(embedding <=> ?) + 0"
        return (
            f"SELECT row_id, {distance} AS distance FROM memory_vectors "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY distance LIMIT ?",
            [query, *params, count],
        )

    def nearest(
        self,
        conn: Any,
        query: np.ndarray,
        count: int,
        *,
        partition: str | None,
        agent_id: str | None,
        run_id: str | None,
        key_hash: int | None,
    ) -> list[tuple[int, float]]:
        """Up to `count` (row_id, cosine distance) pairs nearest to `query`."""
        if key_hash is not None:
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(count, EF_SEARCH_MAX))}")
        sql, params = self.nearest_query(
            query, count, partition=partition, agent_id=agent_id, run_id=run_id, key_hash=key_hash
        )
        return [(row[0], float(row[1])) for row in conn.execute(sql, params).fetchall()]

    @staticmethod
    def _kept(
        conn: Any, row_ids: list[int], n: int, *, predicate: str, params: list[Any], reference: str
    ) -> list[Any]:
        """Signal rows of the nearest `row_ids` (best first) that satisfy `predicate`: checked a
        chunk at a time from the nearest, until `n` are kept. The distances are exact already,
        so the n best kept rows are the n nearest that pass. Measured at 100k memories: 128
        candidates cost 1.9-2.7 ms in the predicate query, the 60 nearest ~1 ms."""
        kept: list[Any] = []
        step = max(2 * n, 32)
        for start in range(0, len(row_ids), step):
            kept += conn.execute(
                f"SELECT {SIGNAL_COLUMNS} FROM {CANDIDATES_FROM} WHERE {predicate}",
                [reference, json.dumps(row_ids[start : start + step]), *params],
            ).fetchall()
            if len(kept) >= n:
                break
        return kept

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
    ) -> list[Candidate]:
        """The `n` rows most cosine-similar to `query` among rows that satisfy `predicate`
        (SQL over `memories m`), best first. `conn` is inside a snapshot (SET LOCAL)."""
        if n <= 0:
            return []
        _, row_count = self.sizes(conn, partition)
        if row_count == 0:
            return []
        query = np.ascontiguousarray(query, dtype=np.float32)
        # A search over every partition (an any-user scope) has no index to use: it scans exactly.
        key_hash = (
            self._index_of(conn, partition)
            if partition is not None and row_count > self.exact_max_rows
            else None
        )
        exact = key_hash is None
        count = min(max(coarse, n), row_count)
        while True:
            near = self.nearest(
                conn,
                query,
                count,
                partition=partition,
                agent_id=agent_id,
                run_id=run_id,
                key_hash=None if exact else key_hash,
            )
            distance = dict(near)
            kept = self._kept(
                conn, list(distance), n, predicate=predicate, params=params, reference=reference
            )
            if len(kept) >= n or count >= row_count:
                break
            if len(near) < count and not exact:  # the graph gave out before the filters were met
                exact = True
                continue
            if len(near) < count:
                break
            count = min(count * 4, row_count)
            if not exact and count > EF_SEARCH_MAX:
                exact = True
        hits = [Candidate(row[0], 1.0 - distance[row[0]], *row[1:]) for row in kept]
        hits.sort(key=lambda hit: -hit.score)
        return hits[:n]
