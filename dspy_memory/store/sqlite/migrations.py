"""Versioned schema migrations. Pending migrations run once, together in one transaction.

Append new migrations to MIGRATIONS; never edit one that has shipped. The first schema is in
store/sqlite/schema_v1.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dspy_memory.errors import SchemaError
from dspy_memory.store.sqlite.keywords import scope_tokens
from dspy_memory.store.sqlite.schema_compact import V10, V11, V12, V14
from dspy_memory.store.sqlite.schema_v1 import V1, sql_list
from dspy_memory.types import FEEDBACK_SOURCES, FEEDBACK_VERDICTS
from dspy_memory.util.timeutil import now_db


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


# The LM write path: links from an invalidated memory to the one that replaced it, the intent
# of an episode (inferred or raw) so replay processes it the way it was asked for, and an audit
# of every write-program run (mode, LM cost, rejected ops; reasons only, never content).
_V2 = (
    "ALTER TABLE memories ADD COLUMN superseded_by TEXT",
    "ALTER TABLE episodes ADD COLUMN infer INTEGER NOT NULL DEFAULT 0 CHECK (infer IN (0, 1))",
    """CREATE TABLE write_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        mode TEXT NOT NULL,
        episode_ids TEXT NOT NULL CHECK (json_valid(episode_ids)),
        lm TEXT,
        lm_calls INTEGER NOT NULL DEFAULT 0,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        ops_applied INTEGER NOT NULL DEFAULT 0,
        rejected TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(rejected)),
        error TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL
    )""",
    "CREATE INDEX write_runs_user ON write_runs (user_id, id)",
    "CREATE INDEX write_runs_agent ON write_runs (agent_id, id)",
    "CREATE INDEX write_runs_run ON write_runs (run_id, id)",
    "CREATE INDEX memories_predicate ON memories (predicate) WHERE predicate IS NOT NULL",
)

# Times the user gave (and dates derived from them) were written by 0.1 with strftime("%Y"),
# which does not pad years below 1000 on Linux ("999-06-01..."): such rows could not be read
# back and sorted wrongly as text. Pad them to the fixed width every reader expects.
_PADDED_YEARS = tuple(
    f"UPDATE {table} SET {column} = '{'0' * (4 - width)}' || {column} "
    f"WHERE {column} GLOB '{'[0-9]' * width}-*'"
    for table, column in (("episodes", "occurred_at"), ("memories", "valid_at"), ("memories", "invalid_at"))
    for width in (3, 2, 1)
)

# Episode claims: the writer processing an episode holds it (a token naming the process and an
# expiry), so replay and reprocess() in several processes never process one episode twice.
_V3 = (
    "ALTER TABLE episodes ADD COLUMN claimed_by TEXT",
    "ALTER TABLE episodes ADD COLUMN claim_expires_at TEXT",
    *_PADDED_YEARS,
)

# Raw turns found by text and time, across versions: the same text said in the same scope at
# the same time is one memory, also after it was corrected (a replay must not bring the wrong
# version back).
_V4 = ("CREATE INDEX memories_turns ON memories (content_hash, valid_at) WHERE kind = 'turn'",)

# Raw turns are found by their conversation too: the keyword index gets a `context` column
# (FTS5 tables cannot add one, so the index is rebuilt), and `turn_context` records which
# episodes each context quotes, so erasing an episode rebuilds the contexts that hold its words.
# Contexts are rewritten as conversations go on, so 'secure-delete' is on from now: a row's old
# terms leave the index segments at once. The contexts of existing turns are built by the Store
# right after this migration (store/turns.py).
_V5 = (
    """CREATE VIRTUAL TABLE memories_fts_v5 USING fts5(
        content, scope, context, tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
    "INSERT INTO memories_fts_v5 (rowid, content, scope, context) SELECT rowid, content, scope, '' FROM memories_fts",
    "DROP TABLE memories_fts",
    "ALTER TABLE memories_fts_v5 RENAME TO memories_fts",
    "INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1)",
    """CREATE TABLE turn_context (
        row_id INTEGER NOT NULL,
        episode_id TEXT NOT NULL,
        PRIMARY KEY (row_id, episode_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX turn_context_episode ON turn_context (episode_id)",
)

# The memory lifecycle (docs/lifecycle.md): maintenance archives memories that were forgotten
# (`archived_at`; restorable, never deleted), `pinned` ones never decay, RESTORE joins the event
# types (SQLite cannot alter a CHECK, so the event table is rebuilt with its ids), compaction
# settings are kept per scope, and consolidated memories are linked to what they condense.
_V6 = (
    "ALTER TABLE memories ADD COLUMN archived_at TEXT",
    "ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1))",
    "CREATE INDEX memories_archived ON memories (archived_at) WHERE archived_at IS NOT NULL",
    """CREATE TABLE memory_events_v6 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id TEXT NOT NULL,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        event TEXT NOT NULL
            CHECK (event IN ('ADD', 'UPDATE', 'INVALIDATE', 'DELETE', 'MERGE', 'DECAY', 'RESTORE')),
        version INTEGER,
        old_content TEXT,
        new_content TEXT,
        reason TEXT,
        actor TEXT NOT NULL,
        episode_id TEXT,
        metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
        created_at TEXT NOT NULL
    )""",
    "INSERT INTO memory_events_v6 SELECT id, memory_id, user_id, agent_id, run_id, event, version, "
    "old_content, new_content, reason, actor, episode_id, metadata, created_at FROM memory_events",
    "DROP TABLE memory_events",
    "ALTER TABLE memory_events_v6 RENAME TO memory_events",
    "CREATE INDEX memory_events_memory ON memory_events (memory_id, id)",
    "CREATE INDEX memory_events_user ON memory_events (user_id)",
    "CREATE INDEX memory_events_agent ON memory_events (agent_id)",
    "CREATE INDEX memory_events_run ON memory_events (run_id)",
    """CREATE TABLE lifecycle_settings (
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        settings TEXT NOT NULL CHECK (json_valid(settings)),
        updated_at TEXT NOT NULL
    )""",
    """CREATE UNIQUE INDEX lifecycle_settings_scope ON lifecycle_settings
        (ifnull(user_id, ''), ifnull(agent_id, ''), ifnull(run_id, ''))""",
    # What a consolidated memory was made from: erasing one erases what quotes it.
    """CREATE TABLE memory_links (
        memory_id TEXT NOT NULL,
        linked_id TEXT NOT NULL,
        relation TEXT NOT NULL CHECK (relation IN ('merged_from', 'summarizes')),
        PRIMARY KEY (memory_id, linked_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX memory_links_linked ON memory_links (linked_id)",
)

# The memory service's API keys (docs/server.md): only a hash of each secret is stored; a key
# is bound to one scope (a tenant), or is an admin key.
_V7 = (
    """CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL UNIQUE,
        name TEXT,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        admin INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
        created_at TEXT NOT NULL,
        revoked_at TEXT
    )""",
)

# The hash-chained audit log (store/audit_log.py): append-only, so UPDATE and DELETE are refused
# by triggers (defence in depth: raw SQL can drop them; `verify` finds what was changed anyway).
# Ids are given by the writer (the head's + 1), so a gap shows a removed entry.
_V8 = (
    """CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        operation TEXT NOT NULL,
        actor TEXT,
        role TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        version TEXT NOT NULL,
        request_id TEXT,
        user_hash TEXT,
        agent_hash TEXT,
        run_hash TEXT,
        counts TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(counts)),
        memory_ids TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(memory_ids)),
        details TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details)),
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    )""",
    "CREATE INDEX audit_log_user ON audit_log (user_hash, id)",
    "CREATE INDEX audit_log_at ON audit_log (at)",
    """CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
        BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END""",
    """CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
        BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END""",
)

# Learning from use (docs/feedback.md): feedback kept in the file, scoped like memories, and
# what each run of the write program saw and did, by ids only (never content, so erasing a
# memory need not touch them): the candidates it was shown by alias, and every operation it
# proposed with what it became (`applied`: the action applied, which validation may have
# changed; the memory id and version it made or changed) or the code of why it was refused.
# A write run gets a `uid` that export and import keep (its `id` is each store's own number);
# runs logged before this migration have none.
_V9 = (
    "ALTER TABLE write_runs ADD COLUMN uid TEXT",
    "CREATE UNIQUE INDEX write_runs_uid ON write_runs (uid)",
    """CREATE TABLE write_run_candidates (
        write_run_id TEXT NOT NULL,
        alias INTEGER NOT NULL,
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (write_run_id, alias)
    ) WITHOUT ROWID""",
    """CREATE TABLE write_run_ops (
        write_run_id TEXT NOT NULL,
        op_index INTEGER NOT NULL,
        action TEXT,
        target INTEGER,
        applied TEXT,
        memory_id TEXT,
        version INTEGER,
        refused TEXT,
        PRIMARY KEY (write_run_id, op_index)
    ) WITHOUT ROWID""",
    "CREATE INDEX write_run_candidates_memory ON write_run_candidates (memory_id, version)",
    "CREATE INDEX write_run_ops_memory ON write_run_ops (memory_id, version) WHERE memory_id IS NOT NULL",
    f"""CREATE TABLE feedback (
        id TEXT PRIMARY KEY,
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        source TEXT NOT NULL CHECK (source IN ({sql_list(FEEDBACK_SOURCES)})),
        verdict TEXT CHECK (verdict IN ({sql_list(FEEDBACK_VERDICTS)})),
        memory_id TEXT,
        memory_version INTEGER,
        write_run_id TEXT,
        op_index INTEGER,
        note TEXT,
        expected TEXT NOT NULL DEFAULT '{{}}' CHECK (json_valid(expected)),
        actor TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX feedback_user ON feedback (user_id, created_at)",
    "CREATE INDEX feedback_agent ON feedback (agent_id, created_at)",
    "CREATE INDEX feedback_run ON feedback (run_id, created_at)",
    "CREATE INDEX feedback_memory ON feedback (memory_id) WHERE memory_id IS NOT NULL",
)

# Retention (docs/governance.md#retention): when a memory or an episode is to be erased
# (`expires_at`; reads stop returning it at that moment, maintenance erases it), and retention
# policies per scope, kept like the lifecycle settings.
V15 = (
    "ALTER TABLE memories ADD COLUMN expires_at TEXT",
    "ALTER TABLE episodes ADD COLUMN expires_at TEXT",
    "CREATE INDEX memories_expiring ON memories (expires_at) WHERE expires_at IS NOT NULL",
    "CREATE INDEX episodes_expiring ON episodes (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE retention_settings (
        user_id TEXT,
        agent_id TEXT,
        run_id TEXT,
        settings TEXT NOT NULL CHECK (json_valid(settings)),
        updated_at TEXT NOT NULL
    )""",
    """CREATE UNIQUE INDEX retention_settings_scope ON retention_settings
        (ifnull(user_id, ''), ifnull(agent_id, ''), ifnull(run_id, ''))""",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", V1),
    Migration(2, "write path: superseded_by, episode intent, write runs", _V2),
    Migration(3, "episode claims; four-digit years", _V3),
    Migration(4, "raw turns by text and time", _V4),
    Migration(5, "raw turns indexed with their conversation context", _V5),
    Migration(6, "lifecycle: archived and pinned memories, RESTORE events, settings per scope, links", _V6),
    Migration(7, "API keys of the memory service", _V7),
    Migration(8, "the hash-chained audit log", _V8),
    Migration(9, "feedback; what each write run saw and did", _V9),
    Migration(
        10,
        "smaller indexes: agent and run ids only where set, raw turns by a hash prefix",
        V10,
    ),
    Migration(11, "turn context links by episode rowid", V11),
    Migration(12, "a keyword index that stores no text", V12),
    # PostgreSQL only (store/postgres/schema.py): its keyword index cuts words as FTS5 does.
    Migration(13, "PostgreSQL keyword words cut where FTS5 cuts them", ()),
    Migration(
        14,
        "source links by rowids; current memories by a hash prefix; events by agent or run only where set",
        V14,
    ),
    Migration(15, "retention: memories and episodes that expire, retention policies per scope", V15),
)
# The migration after which the Store builds the contexts of the turns the file already held.
TURN_CONTEXT_VERSION = 5
LATEST_VERSION = MIGRATIONS[-1].version


def current_version(conn: Any) -> int:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )"""
    )
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return row[0] or 0


def check_version(version: int, *, where: str) -> None:
    """Refuse to open a store read-only (nothing may be created or migrated) unless its schema
    is this version's; `version` 0: no schema at all."""
    latest = MIGRATIONS[-1].version
    advice = "open it once without read_only (on the primary server) to"
    if version == 0:
        raise SchemaError(
            f"{where} has no dspy-memory store yet: a read-only Memory opens an existing one; {advice} create it"
        )
    if version < latest:
        raise SchemaError(
            f"{where} has schema version {version}, older than this dspy-memory's ({latest}); a read-only "
            f"Memory does not migrate: {advice} upgrade it"
        )
    if version > latest:
        raise SchemaError(
            f"{where} has schema version {version}, newer than this dspy-memory understands ({latest}); "
            "upgrade with: pip install -U dspy-memory"
        )


def migrate(conn: Any, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Apply pending migrations; return the versions applied. `conn` is in autocommit mode."""
    conn.create_function("scope_tokens", 3, lambda *ids: " ".join(scope_tokens(*ids)), deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn)
        latest = migrations[-1].version if migrations else 0
        if version > latest:
            raise SchemaError(
                f"this memory file has schema version {version}, newer than this dspy-memory "
                f"understands ({latest}); upgrade with: pip install -U dspy-memory"
            )
        applied = []
        for migration in migrations:
            if migration.version <= version:
                continue
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, now_db()),
            )
            applied.append(migration.version)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return applied
