"""The SQL of migrations 10-12: the same data in a smaller file (docs/benchmarks.md, "Disk per
memory"). Shipped migrations are never edited; store/sqlite/migrations.py lists them."""

from __future__ import annotations

# Smaller indexes (docs/benchmarks.md, "Disk per memory"). Rows without an agent or a run are
# the common case and no query looks them up by that empty column (scopes filter with
# `agent_id = ?`, which a partial index serves), so those indexes leave them out. A raw turn is
# found by its text's hash and time: the hash's first 16 hex digits (64 bits) pick the rows, and
# the query compares the whole hash; 48 bytes less a turn.
V10 = (
    *(
        statement
        for table in ("memories", "episodes")
        for column in ("agent", "run")
        for statement in (
            f"DROP INDEX {table}_{column}",
            f"CREATE INDEX {table}_{column} ON {table} ({column}_id, "
            f"{'created_at' if table == 'memories' else 'occurred_at'}) WHERE {column}_id IS NOT NULL",
        )
    ),
    "DROP INDEX memories_turns",
    "CREATE INDEX memories_turns ON memories (substr(content_hash, 1, 16), valid_at) WHERE kind = 'turn'",
)

# The turn context links keyed by integers (docs/benchmarks.md, "Disk per memory"): a link names
# the quoted episode by its rowid (stable: copies and exports carry it, store/checksums.py)
# instead of its 36-character id, in the table and in its index, ~250 bytes a turn less.
# `turn_context` stays, as a view with the ids, for what reads or adds links by id (export,
# import, transfer, checksums, store/turns.py); an erased episode takes its links with it, so
# no link outlives its episode to point at a later one given the same rowid. Erasure therefore
# finds the contexts quoting an episode before it deletes it (store/erase.py).
V11 = (
    """CREATE TABLE turn_context_links (
        row_id INTEGER NOT NULL,
        episode_row INTEGER NOT NULL,
        PRIMARY KEY (row_id, episode_row)
    ) WITHOUT ROWID""",
    "INSERT INTO turn_context_links (row_id, episode_row) "
    "SELECT c.row_id, e.rowid FROM turn_context c JOIN episodes e ON e.id = c.episode_id",
    "DROP TABLE turn_context",
    "CREATE INDEX turn_context_links_episode ON turn_context_links (episode_row)",
    """CREATE VIEW turn_context (row_id, episode_id) AS
        SELECT c.row_id, e.id FROM turn_context_links c JOIN episodes e ON e.rowid = c.episode_row""",
    """CREATE TRIGGER turn_context_insert INSTEAD OF INSERT ON turn_context BEGIN
        INSERT INTO turn_context_links (row_id, episode_row)
        SELECT NEW.row_id, rowid FROM episodes WHERE id = NEW.episode_id ON CONFLICT DO NOTHING;
    END""",
    """CREATE TRIGGER turn_context_delete INSTEAD OF DELETE ON turn_context BEGIN
        DELETE FROM turn_context_links WHERE row_id = OLD.row_id AND episode_row =
            (SELECT rowid FROM episodes WHERE id = OLD.episode_id);
    END""",
    """CREATE TRIGGER episodes_unlink AFTER DELETE ON episodes BEGIN
        DELETE FROM turn_context_links WHERE episode_row = OLD.rowid;
    END""",
)

# The keyword index stores no text (docs/benchmarks.md, "Disk per memory"): a contentless FTS5
# table, ~300 bytes a memory less. The text it indexes is the memory row's and, for a raw turn,
# that of the episodes its links name (store/exchange_import.py, `keyword_entries`), and FTS5
# removes a row's entry given exactly that text ('delete' with 'secure-delete' on: no term is
# left in the segments). So the index is filled from that text here, not from its old copy
# (`scope_tokens` is defined on the connection by `migrate`).
V12 = (
    """CREATE VIRTUAL TABLE memories_fts_v12 USING fts5(
        content, scope, context, content = '', tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
    """INSERT INTO memories_fts_v12 (rowid, content, scope, context)
        SELECT m.row_id, m.content, scope_tokens(m.user_id, m.agent_id, m.run_id), coalesce((
            SELECT group_concat(line, char(10)) FROM (
                SELECT CASE WHEN e.name IS NULL OR e.name = '' THEN e.content
                    ELSE e.name || ': ' || e.content END AS line
                FROM turn_context_links c JOIN episodes e ON e.rowid = c.episode_row
                WHERE c.row_id = m.row_id ORDER BY e.occurred_at, e.rowid
            )
        ), '')
        FROM memories m""",
    "DROP TABLE memories_fts",
    "ALTER TABLE memories_fts_v12 RENAME TO memories_fts",
    "INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1)",
)

# Source links and the current-hash index keyed by less (docs/benchmarks.md, "Disk per memory",
# third round). A memory's link to an episode it came from names the memory by the row id of its
# first version and the episode by its rowid: two integers instead of two 36-character ids, in
# the table and in its episode index, ~160 bytes a memory less. A memory's versions are erased
# together (store/erase.py), so its first row lives as long as the memory; row ids are never
# reused (AUTOINCREMENT) and episode rowids only after their episode is erased, which takes its
# links (trigger). `memory_sources` stays, as a view by ids, for the shared SQL and PostgreSQL
# (which keeps its table); the view takes INSERT and DELETE. A link to a memory or an episode
# that does not exist is refused, as the foreign key of the table refused it. Current memories
# are found by the first 16 hex digits of their hash (the queries compare the whole hash), and
# events, like memories and episodes in V10, only by the agent or run they have.
V14 = (
    """CREATE TABLE memory_source_links (
        memory_row INTEGER NOT NULL,
        episode_row INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (memory_row, episode_row)
    ) WITHOUT ROWID""",
    """INSERT INTO memory_source_links (memory_row, episode_row, created_at)
        SELECT first.row_id, e.rowid, s.created_at FROM memory_sources s
        JOIN episodes e ON e.id = s.episode_id
        JOIN (SELECT id, min(row_id) AS row_id FROM memories GROUP BY id) first ON first.id = s.memory_id""",
    "DROP TABLE memory_sources",
    "CREATE INDEX memory_source_links_episode ON memory_source_links (episode_row)",
    """CREATE VIEW memory_sources (memory_id, episode_id, created_at) AS
        SELECT m.id, e.id, s.created_at FROM memory_source_links s
        JOIN memories m ON m.row_id = s.memory_row JOIN episodes e ON e.rowid = s.episode_row""",
    """CREATE TRIGGER memory_sources_insert INSTEAD OF INSERT ON memory_sources BEGIN
        SELECT RAISE(ABORT, 'memory_sources: no memory with this id')
            WHERE NOT EXISTS (SELECT 1 FROM memories WHERE id = NEW.memory_id);
        SELECT RAISE(ABORT, 'memory_sources: no episode with this id')
            WHERE NOT EXISTS (SELECT 1 FROM episodes WHERE id = NEW.episode_id);
        INSERT INTO memory_source_links (memory_row, episode_row, created_at)
            SELECT (SELECT min(row_id) FROM memories WHERE id = NEW.memory_id), rowid, NEW.created_at
            FROM episodes WHERE id = NEW.episode_id ON CONFLICT DO NOTHING;
    END""",
    """CREATE TRIGGER memory_sources_delete INSTEAD OF DELETE ON memory_sources BEGIN
        DELETE FROM memory_source_links
            WHERE memory_row = (SELECT min(row_id) FROM memories WHERE id = OLD.memory_id)
            AND episode_row = (SELECT rowid FROM episodes WHERE id = OLD.episode_id);
    END""",
    """CREATE TRIGGER memories_unsource AFTER DELETE ON memories BEGIN
        DELETE FROM memory_source_links WHERE memory_row = OLD.row_id;
    END""",
    """CREATE TRIGGER episodes_unsource AFTER DELETE ON episodes BEGIN
        DELETE FROM memory_source_links WHERE episode_row = OLD.rowid;
    END""",
    *(
        statement
        for column in ("agent", "run")
        for statement in (
            f"DROP INDEX memory_events_{column}",
            f"CREATE INDEX memory_events_{column} ON memory_events ({column}_id) WHERE {column}_id IS NOT NULL",
        )
    ),
    "DROP INDEX memories_hash",
    "CREATE INDEX memories_hash ON memories (substr(content_hash, 1, 16)) WHERE expired_at IS NULL",
)
