"""The HNSW indexes of PostgreSQL's vector partitions, one per block of a partition's rows.

A partition (a user's vectors) is indexed in blocks of `block_rows` rows in row_id order: each
block is a partial HNSW index over a fixed row_id range (`Block.predicate`), named after the
range (`Block.name`), so the catalog is the blocks' only record. The rows after the last block
(the tail, fewer than `block_rows` unless a build is pending) are scanned exactly. A block is
built once the tail fills it, after the write that filled it has committed, in the background
(`build`, store/postgres/hnsw_builds.py); a block an erasure empties loses its index (`prune`).
Searches (store/postgres/vectors.py) go through `ranges`: every block, every gap between blocks
and the tail, so no row is out of reach.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

logger = logging.getLogger("dspy_memory")

LEGACY_INDEX = "memory_vectors_hnsw"  # the table-wide index of stores made before issue 30
# An HNSW build keeps its graph in maintenance_work_mem (64 MB by default: a 40k-row build
# took 33 s there against 15 s with 512 MB, measured with 384-dim vectors).
BUILD_MEMORY = "512MB"
BLOCK_NAME = re.compile(r"mv_hnsw_([np])(\d+)_(\d+)_(\d+)")


def index_name(key_hash: int) -> str:
    """The name of a partition's single HNSW index, as stores made before blocks have it."""
    return f"memory_vectors_hnsw_{_hash_tag(key_hash)}"


def _key_hash(raw: Any, partition: str) -> int:
    """PostgreSQL's hashtext of a partition key: what block index names and locks are keyed by."""
    return int(raw.execute("SELECT hashtext(%s)", (partition,)).fetchone()[0])


def _hash_tag(key_hash: int) -> str:
    return f"{'n' if key_hash < 0 else 'p'}{abs(key_hash)}"


class Block(NamedTuple):
    """Rows of one partition with `first < row_id <= last` (first 0: from the partition's first
    row), and whether their HNSW index is valid (False: a build failed or is running)."""

    first: int
    last: int
    valid: bool = True

    def name(self, key_hash: int) -> str:
        # At most 8 + 11 + 2 + 2 x 19 = 59 characters: within PostgreSQL's 63 for any bigint.
        return f"mv_hnsw_{_hash_tag(key_hash)}_{self.first}_{self.last}"

    def predicate(self, key_hash: int) -> str:
        """The partial index's predicate, as literals, so that a query repeating it is planned
        through the index."""
        lower = f" AND row_id > {int(self.first)}" if self.first else ""
        return f"hashtext(partition_key) = {int(key_hash)}{lower} AND row_id <= {int(self.last)}"


class Blocks:
    """The blocks of every partition this process has searched or written, and their builds."""

    def __init__(self, block_rows: int) -> None:
        self.block_rows = block_rows
        # Per partition: (hashtext of its key, its blocks with a valid index), from the catalog.
        # Stale only when another process built or dropped one: a block missing here is in the
        # tail or a gap, scanned exactly; a dropped index's range is scanned exactly by the
        # planner (no index matches it). Slower, never wrong.
        self._blocks: dict[str, tuple[int, list[Block]]] = {}

    def filled(self, raw: Any, partition: str, row_count: int) -> bool:
        """Whether the partition's tail may have filled a block: the blocks hold at most
        `block_rows` rows each (erasures only shrink them), so it has when this holds; the
        catalog is read again when it does (another process may have built blocks)."""
        if row_count < self.block_rows * (len(self.known(raw, partition)[1]) + 1):
            return False
        return row_count >= self.block_rows * (len(self.load(raw, partition)[1]) + 1)

    @staticmethod
    def _catalog(raw: Any, key_hash: int) -> list[Block]:
        """The blocks of the partitions whose hashtext is `key_hash`, valid or not, in row order."""
        rows = raw.execute(
            "SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE %s",
            (f"mv\\_hnsw\\_{_hash_tag(key_hash)}\\_%",),
        ).fetchall()
        blocks = []
        for name, valid in rows:
            match = BLOCK_NAME.fullmatch(name)
            if match and f"{match[1]}{match[2]}" == _hash_tag(key_hash):
                blocks.append(Block(int(match[3]), int(match[4]), bool(valid)))
        return sorted(blocks)

    def load(self, raw: Any, partition: str) -> tuple[int, list[Block]]:
        key_hash = _key_hash(raw, partition)
        self._blocks[partition] = (key_hash, [b for b in self._catalog(raw, key_hash) if b.valid])
        return self._blocks[partition]

    def indexed(self, raw: Any, partition: str) -> bool:
        """Whether the partition has any block index, valid or not (read from the catalog)."""
        return bool(self._catalog(raw, _key_hash(raw, partition)))

    def known(self, raw: Any, partition: str) -> tuple[int, list[Block]]:
        return self._blocks[partition] if partition in self._blocks else self.load(raw, partition)

    @staticmethod
    @contextmanager
    def _locked(raw: Any, key_hash: int) -> Iterator[bool]:
        """A session advisory lock on the blocks of `key_hash`: True if this session holds it
        (the others skip: one builds, no two build or drop the same index)."""
        lock = raw.execute("SELECT hashtext('dspy_memory:hnsw:' || current_schema() || %s)", (str(key_hash),))
        lock_id = lock.fetchone()[0]
        if not raw.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()[0]:
            yield False
            return
        try:
            yield True
        finally:
            raw.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))

    def build(self, raw: Any, partition: str) -> None:
        """Index every block the partition's tail has filled, and rebuild a block's index that a
        failed build left invalid, unless another session holds the partition's lock.

        It runs after the write that filled a block has committed, in the store's background
        worker (store/postgres/hnsw_builds.py; on opening, in `ensure`), as CREATE INDEX
        CONCURRENTLY: a plain CREATE INDEX inside the write transaction would hold the write lock
        (every other writer waits, and times out after busy_timeout) and a SHARE lock on the
        table for the whole build. CONCURRENTLY cannot run inside a transaction, so it cannot be
        part of the write; if it fails or is cancelled (the index is left invalid, its range
        scanned exactly meanwhile) the next write to the partition builds it again."""
        key_hash = _key_hash(raw, partition)
        with self._locked(raw, key_hash) as locked:
            if not locked:
                return
            # The leaf table holding the partition (the table itself unless split by hash).
            leaf = raw.execute(
                "SELECT tableoid::regclass::text FROM memory_vectors WHERE partition_key = %s LIMIT 1",
                (partition,),
            ).fetchone()
            if leaf is None:
                return
            blocks = self._catalog(raw, key_hash)
            for block in blocks:
                if not block.valid:
                    raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {block.name(key_hash)}")
                    if self._holds_rows(raw, key_hash, block):
                        self.create(raw, leaf[0], key_hash, block)
            last = max((block.last for block in blocks), default=0)
            while True:
                end = raw.execute(
                    "SELECT row_id FROM memory_vectors WHERE partition_key = %s AND row_id > %s "
                    "ORDER BY row_id OFFSET %s LIMIT 1",
                    (partition, last, self.block_rows - 1),
                ).fetchone()
                if end is None:
                    break
                self.create(raw, leaf[0], key_hash, Block(last, end[0]))
                last = end[0]
            # A store made before blocks had one index over the whole partition.
            if raw.execute("SELECT to_regclass(%s) IS NOT NULL", (index_name(key_hash),)).fetchone()[0]:
                raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(key_hash)}")
            self.load(raw, partition)

    @staticmethod
    def create(raw: Any, leaf: str, key_hash: int, block: Block) -> None:
        raw.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
        try:
            raw.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {block.name(key_hash)} ON {leaf} "
                f"USING hnsw (embedding vector_cosine_ops) WHERE {block.predicate(key_hash)}"
            )
        finally:
            raw.execute("RESET maintenance_work_mem")

    @staticmethod
    def _holds_rows(raw: Any, key_hash: int, block: Block) -> bool:
        """Whether any partition hashed to `key_hash` has rows in `block`'s range."""
        return (
            raw.execute(
                "SELECT 1 FROM memory_vectors WHERE partition_key IN "
                "(SELECT partition_key FROM vector_partitions WHERE hashtext(partition_key) = %s) "
                "AND row_id > %s AND row_id <= %s LIMIT 1",
                (key_hash, block.first if block.first else -(2**63), block.last),
            ).fetchone()
            is not None
        )

    def prune(self, raw: Any, partition: str, erased: list[int]) -> None:
        """Drop the indexes of the blocks an erasure emptied (every block of an emptied
        partition): their rows are gone, and so is any copy of them in the index."""
        key_hash = _key_hash(raw, partition)
        with self._locked(raw, key_hash) as locked:
            if not locked:
                return  # a build holds it; the next erasure in the block drops it
            for block in self._catalog(raw, key_hash):
                touched = any((not block.first or block.first < row) and row <= block.last for row in erased)
                if touched and not self._holds_rows(raw, key_hash, block):
                    raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {block.name(key_hash)}")
            if not raw.execute(
                "SELECT 1 FROM vector_partitions WHERE partition_key = %s", (partition,)
            ).fetchone():
                raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(key_hash)}")
            self.load(raw, partition)

    def safely(self, what: str, action: Callable[..., None], raw: Any, *args: Any) -> None:
        """`action(raw, *args)` (a build or a drop), run after a write committed or on opening:
        the write stands whatever happens, so a failure (a lock timeout, a cancelled build) is
        logged, not raised, and the next write to the partition tries again."""
        import psycopg

        try:
            action(raw, *args)
        except psycopg.Error as exc:
            logger.warning(
                "an HNSW index of a vector partition could not be %s (%s); the next write to it tries "
                "again (its rows are scanned exactly meanwhile)",
                what,
                str(exc).strip(),
            )

    def ensure(self, raw: Any) -> None:
        """On opening: every partition's filled blocks get their index (a build that failed is
        retried), and the HNSW indexes of a store made before blocks (one per partition, or one
        for the whole table) are dropped. `raw`: a psycopg connection in autocommit mode."""
        grown = raw.execute(
            "SELECT partition_key FROM vector_partitions WHERE row_count >= %s ORDER BY partition_key",
            (self.block_rows,),
        ).fetchall()
        for (partition,) in grown:
            self.safely("built", self.build, raw, partition)
        older = raw.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relnamespace = current_schema()::regnamespace "
            "AND (c.relname = %s OR c.relname LIKE 'memory\\_vectors\\_hnsw\\_%%')",
            (LEGACY_INDEX,),
        ).fetchall()
        for (name,) in older:
            self.safely(
                "dropped",
                lambda raw, name=name: raw.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"),
                raw,
            )

    def searchable(self, raw: Any, partition: str, row_count: int) -> tuple[int, list[Block]]:
        """(hashtext of the partition key, its blocks with a valid index), the catalog read again
        when the rows outnumber what the known blocks and a tail can hold (another process may
        have built blocks)."""
        key_hash, blocks = self.known(raw, partition)
        if row_count >= self.block_rows * (len(blocks) + 1):
            key_hash, blocks = self.load(raw, partition)
        return key_hash, blocks

    @staticmethod
    def ranges(blocks: list[Block]) -> list[tuple[int, int | None, bool]]:
        """(first, last, through an index) ranges of row ids that cover a partition: each block,
        each gap between blocks (an emptied block's, or one being rebuilt) and the tail, scanned
        exactly. `last` None: no end; `first` 0: no start."""
        ranges: list[tuple[int, int | None, bool]] = []
        covered = 0
        for block in blocks:
            if block.first < covered:  # overlaps one taken already: its rows are scanned exactly
                continue
            if block.first > covered:
                ranges.append((covered, block.first, False))
            ranges.append((block.first, block.last, True))
            covered = block.last
        return [*ranges, (covered, None, False)]
