"""The file's first schema (migration 1 of store/sqlite/migrations.py): episodes, entities,
memories, sources, events, blocks, the keyword index and the vectors' tables. Shipped: never
edited; later migrations change it."""

from __future__ import annotations

from dspy_memory.types import EPISODE_SOURCES, MEMORY_KINDS


def sql_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


V1 = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    f"""CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        source TEXT NOT NULL CHECK (source IN ({sql_list(EPISODE_SOURCES)})),
        role TEXT,
        name TEXT,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{{}}' CHECK (json_valid(metadata)),
        occurred_at TEXT NOT NULL,
        ingested_at TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX episodes_user ON episodes (user_id, occurred_at)",
    "CREATE INDEX episodes_agent ON episodes (agent_id, occurred_at)",
    "CREATE INDEX episodes_run ON episodes (run_id, occurred_at)",
    "CREATE INDEX episodes_unfinished ON episodes (status, ingested_at) WHERE status != 'done'",
    """CREATE TABLE entities (
        id TEXT PRIMARY KEY,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        name TEXT NOT NULL,
        normalized_name TEXT NOT NULL,
        type TEXT,
        summary TEXT,
        metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    """CREATE UNIQUE INDEX entities_scope_name ON entities
        (ifnull(user_id, ''), ifnull(agent_id, ''), ifnull(run_id, ''), normalized_name)""",
    # One row per version of a memory; `id` is stable across versions. Rows change only to
    # set expired_at (the system stopped believing this version) and access statistics.
    # AUTOINCREMENT: row ids are never reused, which the vector code cache relies on.
    f"""CREATE TABLE memories (
        row_id INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL,
        version INTEGER NOT NULL DEFAULT 1,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        content TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'fact' CHECK (kind IN ({sql_list(MEMORY_KINDS)})),
        subject_id TEXT REFERENCES entities (id) ON DELETE SET NULL,
        predicate TEXT,
        object_id TEXT REFERENCES entities (id) ON DELETE SET NULL,
        confidence REAL NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0 AND 1),
        importance REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
        strength REAL NOT NULL DEFAULT 1.0 CHECK (strength > 0),
        access_count INTEGER NOT NULL DEFAULT 0,
        last_accessed_at TEXT,
        content_hash TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{{}}' CHECK (json_valid(metadata)),
        valid_at TEXT,
        invalid_at TEXT,
        created_at TEXT NOT NULL,
        expired_at TEXT,
        UNIQUE (id, version)
    )""",
    "CREATE INDEX memories_user ON memories (user_id, created_at)",
    "CREATE INDEX memories_agent ON memories (agent_id, created_at)",
    "CREATE INDEX memories_run ON memories (run_id, created_at)",
    "CREATE INDEX memories_hash ON memories (content_hash) WHERE expired_at IS NULL",
    "CREATE INDEX memories_subject ON memories (subject_id) WHERE subject_id IS NOT NULL",
    "CREATE INDEX memories_object ON memories (object_id) WHERE object_id IS NOT NULL",
    """CREATE TABLE memory_sources (
        memory_id TEXT NOT NULL,
        episode_id TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        PRIMARY KEY (memory_id, episode_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX memory_sources_episode ON memory_sources (episode_id)",
    """CREATE TABLE memory_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id TEXT NOT NULL,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        event TEXT NOT NULL
            CHECK (event IN ('ADD', 'UPDATE', 'INVALIDATE', 'DELETE', 'MERGE', 'DECAY')),
        version INTEGER,
        old_content TEXT,
        new_content TEXT,
        reason TEXT,
        actor TEXT NOT NULL,
        episode_id TEXT,
        metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX memory_events_memory ON memory_events (memory_id, id)",
    "CREATE INDEX memory_events_user ON memory_events (user_id)",
    "CREATE INDEX memory_events_agent ON memory_events (agent_id)",
    "CREATE INDEX memory_events_run ON memory_events (run_id)",
    """CREATE TABLE blocks (
        id TEXT PRIMARY KEY,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        label TEXT NOT NULL,
        value TEXT NOT NULL DEFAULT '',
        char_limit INTEGER NOT NULL DEFAULT 2000 CHECK (char_limit > 0),
        read_only INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
        description TEXT,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (length(value) <= char_limit)
    )""",
    """CREATE UNIQUE INDEX blocks_scope_label ON blocks
        (ifnull(user_id, ''), ifnull(agent_id, ''), ifnull(run_id, ''), label)""",
    """CREATE TABLE block_versions (
        block_id TEXT NOT NULL REFERENCES blocks (id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        value TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (block_id, version)
    ) WITHOUT ROWID""",
    # Keyword index. `scope` holds opaque per-id tokens so MATCH can restrict to a scope
    # before ranking; the SQL join on memories still enforces the scope exactly.
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
        content, scope, tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
    # Float vectors for exact rescoring and sign-bit codes for the in-process code cache.
    # The vec0 index itself is created when an embedder is bound (it needs the dimension).
    """CREATE TABLE memory_vectors (
        row_id INTEGER PRIMARY KEY,
        partition_key TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        code BLOB NOT NULL,
        embedding BLOB NOT NULL
    )""",
    "CREATE INDEX memory_vectors_partition ON memory_vectors (partition_key, row_id)",
    # Per-partition counts; with the global `vector_deletions` counter in `meta` they tell the
    # code cache whether it is current (see store/sqlite/vectors.py).
    """CREATE TABLE vector_partitions (
        partition_key TEXT PRIMARY KEY,
        row_count INTEGER NOT NULL DEFAULT 0,
        max_row_id INTEGER NOT NULL DEFAULT 0
    )""",
)
