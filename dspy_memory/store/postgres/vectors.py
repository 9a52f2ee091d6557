"""PostgreSQL dense search with pgvector: float vectors, cosine distance, HNSW for large
partitions and an exact scan for small ones.

An HNSW scan in pgvector 0.6 returns at most `hnsw.ef_search` rows and the filters (scope,
time, kind) apply after it, so a small tenant inside a large table could get fewer hits than
exist. The per-partition row counts decide instead: a partition of up to `exact_max_rows`
rows is scanned exactly (ordered by an expression the index cannot serve), a larger one through
HNSW with `ef_search` at least the coarse candidate count, widened (and finally scanned
exactly) while the filters reject too many. A partition that holds at least half of the table's
vectors loses little to filtering after the graph, so from EXACT_ALWAYS_ROWS rows it goes
through HNSW too: measured at 10k MiniLM vectors in one scope, 1.6-2.2 ms against 6.4-7.7 ms
exact, recall@10 0.999 (ef_search 128). Distances are exact cosine either way, so there is
nothing to rescore.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate

EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search
EXACT_ALWAYS_ROWS = 4096  # a partition this small is scanned exactly, whatever its share


class VectorIndex:
    def __init__(self, *, exact_max_rows: int) -> None:
        self.dim: int | None = None
        self.exact_max_rows = exact_max_rows

    @staticmethod
    def decode(stored: Any) -> np.ndarray:
        return np.asarray(stored.to_numpy() if hasattr(stored, "to_numpy") else stored, dtype=np.float32)

    def create(self, conn: Any, dim: int) -> None:
        conn.execute(f"ALTER TABLE memory_vectors ALTER COLUMN embedding TYPE vector({int(dim)})")
        conn.execute(
            "CREATE INDEX IF NOT EXISTS memory_vectors_hnsw ON memory_vectors "
            "USING hnsw (embedding vector_cosine_ops)"
        )
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
        # An empty partition's row would keep the user id after a purge.
        conn.execute("DELETE FROM vector_partitions WHERE row_count <= 0")
        return len(deleted)

    def sizes(self, conn: Any, partition: str | None) -> tuple[int, int]:
        total, rows = conn.execute(
            "SELECT coalesce(sum(row_count), 0), "
            "coalesce(sum(CASE WHEN partition_key = ? THEN row_count END), 0) FROM vector_partitions",
            (partition,),
        ).fetchone()
        return int(total), int(total if partition is None else rows)

    def nearest(
        self,
        conn: Any,
        query: np.ndarray,
        count: int,
        *,
        partition: str | None,
        agent_id: str | None,
        run_id: str | None,
        exact: bool,
    ) -> list[tuple[int, float]]:
        """Up to `count` (row_id, cosine distance) pairs nearest to `query`."""
        where, params = [], []
        for column, value in (("partition_key", partition), ("agent_id", agent_id), ("run_id", run_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        # An expression the HNSW index cannot order by makes the scan exact; each row's distance
        # is computed once (ordered by the output column).
        distance = "(embedding <=> ?) + 0" if exact else "embedding <=> ?"
        if not exact:
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(count, EF_SEARCH_MAX))}")
        rows = conn.execute(
            f"SELECT row_id, {distance} AS distance FROM memory_vectors "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY distance LIMIT ?",
            [query, *params, count],
        ).fetchall()
        return [(row[0], float(row[1])) for row in rows]

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
        total, row_count = self.sizes(conn, partition)
        if row_count == 0:
            return []
        query = np.ascontiguousarray(query, dtype=np.float32)
        dominant = row_count > EXACT_ALWAYS_ROWS and 2 * row_count >= total
        exact = row_count <= self.exact_max_rows and not dominant
        count = min(max(coarse, n), row_count)
        while True:
            near = self.nearest(
                conn, query, count, partition=partition, agent_id=agent_id, run_id=run_id, exact=exact
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
