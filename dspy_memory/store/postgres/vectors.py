"""PostgreSQL dense search with pgvector: float vectors, cosine distance, HNSW indexes per block
of a partition's rows and an exact scan of the rest.

A partition is one `partition_key` (a user id, NO_USER for memories without one). Its rows are
indexed in blocks of `exact_max_rows` rows in row_id order, each a partial HNSW index over a
fixed range of row ids (store/postgres/hnsw_blocks.py). Row ids only grow, so a new row belongs
to the tail after the last block: an insert pays no graph insertion, and each row goes into a
graph once, by a bulk build of its block (~10x cheaper per row than inserting into a live
graph). A search takes the nearest rows of each block through its index and of the rest (the
tail, a gap, a block without a valid index) by an exact scan, merged by distance.

An HNSW scan in pgvector 0.6 returns at most `hnsw.ef_search` rows and the filters (scope, time,
kind) apply after it, so the scan's `ef_search` is at least the coarse candidate count, widened
(and finally scanned exactly) while the filters reject too many; a block whose scan returned
fewer rows than asked for is scanned exactly instead. Distances are exact cosine either way, so
there is nothing to rescore.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dspy_memory.errors import ConfigError
from dspy_memory.store.postgres.connection import Connections
from dspy_memory.store.postgres.hnsw_blocks import Block, Blocks
from dspy_memory.store.postgres.hnsw_builds import BackgroundBuilds
from dspy_memory.store.queries import CANDIDATES_FROM, SIGNAL_COLUMNS, Candidate

EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search


class VectorIndex:
    def __init__(self, *, exact_max_rows: int) -> None:
        if exact_max_rows < 1:
            raise ConfigError(
                f"postgres.exact_max_rows is {exact_max_rows}; it must be at least 1: it is the number of "
                "a user's vectors indexed together (one HNSW block), and below it a user is scanned exactly",
                settings=["postgres.exact_max_rows"],
            )
        self.dim: int | None = None
        self.blocks = Blocks(exact_max_rows)
        self.builds = BackgroundBuilds(self.blocks)

    def wait_for_builds(self, timeout: float | None = None) -> bool:
        """Wait until the HNSW block builds that writes asked for have finished (they run in the
        background); False if `timeout` seconds passed first."""
        return self.builds.wait(timeout)

    @staticmethod
    def decode(stored: Any) -> np.ndarray:
        return np.asarray(stored.to_numpy() if hasattr(stored, "to_numpy") else stored, dtype=np.float32)

    def create(self, conn: Any, dim: int) -> None:
        """Give the vector column its dimension; the HNSW indexes come later, per block."""
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
        Connections.insert_rows(
            conn,
            "memory_vectors",
            ("row_id", "partition_key", "agent_id", "run_id", "embedding"),
            [
                (row_id, partition, agent, run, embeddings[i])
                for i, (row_id, partition, agent, run) in enumerate(
                    zip(row_ids, partitions, agent_ids, run_ids)
                )
            ],
            types=("bigint", "text", "text", "text", "vector"),
        )
        if self.builds.wrote(conn.raw, len(row_ids)):
            conn.after_commit(lambda raw: self.builds.request(None))
        counts: dict[str, int] = {}
        for partition in partitions:
            counts[partition] = counts.get(partition, 0) + 1
        conn.executemany(
            "INSERT INTO vector_partitions (partition_key, row_count) VALUES (?, ?) "
            "ON CONFLICT (partition_key) DO UPDATE SET row_count = vector_partitions.row_count + excluded.row_count",
            sorted(counts.items()),
        )
        grown = conn.execute(
            "SELECT partition_key, row_count FROM vector_partitions "
            "WHERE partition_key IN (SELECT value FROM json_each(?)) AND row_count >= ?",
            (json.dumps(sorted(counts)), self.blocks.block_rows),
        ).fetchall()
        for partition, row_count in grown:
            if self.blocks.filled(conn.raw, partition, row_count):
                # Built in the background once the write has committed (store/postgres/hnsw_builds.py).
                conn.after_commit(lambda raw, p=partition: self.builds.request(p))

    def delete(self, conn: Any, row_ids: list[int]) -> int:
        if not row_ids:
            return 0
        deleted = conn.execute(
            "DELETE FROM memory_vectors WHERE row_id IN (SELECT value FROM json_each(?)) "
            "RETURNING partition_key, row_id",
            (json.dumps(row_ids),),
        ).fetchall()
        erased: dict[str, list[int]] = {}
        for partition, row_id in deleted:
            erased.setdefault(partition, []).append(row_id)
        conn.executemany(
            "UPDATE vector_partitions SET row_count = row_count - ? WHERE partition_key = ?",
            [(len(ids), partition) for partition, ids in sorted(erased.items())],
        )
        # An empty partition's row would keep the user id after a purge.
        conn.execute("DELETE FROM vector_partitions WHERE row_count <= 0")
        for partition, ids in sorted(erased.items()):
            if not self.builds.pending() and not self.blocks.indexed(conn.raw, partition):
                continue
            conn.after_commit(lambda raw, p=partition, ids=ids: self._prune(raw, p, ids))
        return len(deleted)

    def _prune(self, raw: Any, partition: str, erased: list[int]) -> None:
        """After an erasure committed: drop the indexes of the blocks it emptied, once this
        store's builds are done (a build holds the partition's lock, and would have the drop
        skipped). Not inside the erasure's transaction: a build waits for it to end."""
        self.builds.wait()
        if self.blocks.indexed(raw, partition):
            self.blocks.safely("dropped", self.blocks.prune, raw, partition, erased)

    def ensure_indexes(self, raw: Any) -> None:
        """On opening (`raw`: a psycopg connection in autocommit mode): see Blocks.ensure."""
        self.blocks.ensure(raw)

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
        count: int | list[int],
        *,
        partition: str | None,
        agent_id: str | None,
        run_id: str | None,
        key_hash: int | None,
        ranges: list[tuple[int, int | None, bool]],
    ) -> tuple[str, list[Any]]:
        """The SQL (shared style) of the `count` nearest rows of each range of row ids (`count[i]`
        of range i, given a list), each row with its range's position: through the block's
        partial HNSW index for an indexed range, else an exact scan."""
        scoped, scope_params = [], []
        for column, value in (("partition_key", partition), ("agent_id", agent_id), ("run_id", run_id)):
            if value is not None:
                scoped.append(f"{column} = ?")
                scope_params.append(value)
        parts, params = [], []
        for position, (first, last, indexed) in enumerate(ranges):
            where = list(scoped)
            if indexed and key_hash is not None and last is not None:
                # The partial index's predicate, as literals, so the planner can match it.
                where.append(Block(first, last).predicate(key_hash))
            else:
                where += [f"row_id > {int(first)}"] if first else []
                where += [f"row_id <= {int(last)}"] if last is not None else []
            # An expression the HNSW index cannot order by makes the scan exact; each row's
            # distance is computed once (ordered by the output column).
            distance = "embedding <=> ?" if indexed else "(embedding <=> ?) + 0"
            parts.append(
                f"(SELECT row_id, {distance} AS distance, {position} AS part FROM memory_vectors "
                f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY distance LIMIT ?)"
            )
            params += [query, *scope_params, count if isinstance(count, int) else count[position]]
        return " UNION ALL ".join(parts), params

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
        blocks: list[Block],
    ) -> list[tuple[int, float]]:
        """Up to `count` (row_id, cosine distance) pairs nearest to `query`: the nearest of each
        block (through its index) and of the rest (exactly), merged by distance.

        An HNSW search costs about its `ef_search`, so each of several blocks is first asked for
        twice its share of `count` (at least 40): a user's nearest rows spread over its blocks
        unless they cluster in time, and a block whose rows all rank within the merged `count`
        may hold more, so it is asked again for `count`. Measured with 5 blocks of 20k (count
        128): 17-21 ms for shares of 40 against 36-38 ms for 128 each (one index: 11-13 ms)."""
        ranges = Blocks.ranges(blocks) if blocks and key_hash is not None else [(0, None, False)]
        scope = {"partition": partition, "agent_id": agent_id, "run_id": run_id, "key_hash": key_hash}
        indexed = sum(1 for *_, through_index in ranges if through_index)
        share = count if indexed <= 1 else min(count, max(40, -(-2 * count // indexed)))
        asked = [share if through_index else count for *_, through_index in ranges]
        found = self._each(conn, query, scope, list(enumerate(ranges)), asked)
        merged = sorted((row for rows in found.values() for row in rows), key=lambda row: row[1])
        cutoff = merged[count - 1][1] if len(merged) >= count else float("inf")
        again = [i for i, rows in found.items() if len(rows) == asked[i] < count and rows[-1][1] <= cutoff]
        if again:
            found |= self._each(conn, query, scope, [(i, ranges[i]) for i in again], [count] * len(again))
            merged = sorted((row for rows in found.values() for row in rows), key=lambda row: row[1])
        return [(row[0], float(row[1])) for row in merged[:count]]

    def _each(
        self,
        conn: Any,
        query: np.ndarray,
        scope: dict[str, Any],
        targets: list[tuple[int, tuple[int, int | None, bool]]],
        asked: list[int],
    ) -> dict[int, list[Any]]:
        """{position: its nearest rows, best first} for each (position, range) of `targets`, up
        to `asked` rows each. An indexed range whose index gave fewer rows than asked (the
        filters rejected rows its `ef_search` reached, or it holds fewer) is scanned exactly
        instead, so that no row it holds is missed."""
        ranges = [target for _, target in targets]
        widest = max((n for n, (*_, through_index) in zip(asked, ranges) if through_index), default=0)
        if widest:
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(widest, EF_SEARCH_MAX))}")
        found: dict[int, list[Any]] = {position: [] for position, _ in targets}
        for row in conn.execute(*self.nearest_query(query, asked, **scope, ranges=ranges)).fetchall():
            found[targets[row[2]][0]].append(row)
        short = [
            j
            for j, (*_, through_index) in enumerate(ranges)
            if through_index and len(found[targets[j][0]]) < asked[j]
        ]
        if short:
            exact = [(ranges[j][0], ranges[j][1], False) for j in short]
            sql, params = self.nearest_query(query, [asked[j] for j in short], **scope, ranges=exact)
            for j in short:
                found[targets[j][0]] = []
            for row in conn.execute(sql, params).fetchall():
                found[targets[short[row[2]]][0]].append(row)
        return {position: sorted(rows, key=lambda row: row[1]) for position, rows in found.items()}

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
        key_hash, blocks = (
            self.blocks.searchable(conn.raw, partition, row_count)
            if partition is not None and row_count >= self.blocks.block_rows
            else (None, [])
        )
        count = min(max(coarse, n), row_count)
        while True:
            near = self.nearest(
                conn,
                query,
                count,
                partition=partition,
                agent_id=agent_id,
                run_id=run_id,
                key_hash=key_hash,
                blocks=blocks,
            )
            distance = dict(near)
            kept = self._kept(
                conn, list(distance), n, predicate=predicate, params=params, reference=reference
            )
            # Fewer than `count` near rows: every row of the scope was reached (short blocks are
            # scanned exactly), so widening finds no more.
            if len(kept) >= n or count >= row_count or len(near) < count:
                break
            count = min(count * 4, row_count)
            if count > EF_SEARCH_MAX:  # past pgvector's ef_search: scan everything exactly
                blocks = []
        hits = [Candidate(row[0], 1.0 - distance[row[0]], *row[1:]) for row in kept]
        hits.sort(key=lambda hit: -hit.score)
        return hits[:n]
