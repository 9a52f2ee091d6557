"""Where a memory file's bytes go: pages per table and index (SQLite's dbstat), grouped into the
parts of the store, and the text the keyword index stores.

    python -m evals.disk_usage agent.db

Pages are counted whole (a half-empty page costs 4 kB on disk too); the file's free pages are
their own line. The bytes of the keyword index's stored columns are summed from its content
table, to show what each column's copy of the text costs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evals.report import table

# Tables and indexes by part of the store, matched on their names' prefixes, first match wins.
PARTS = (
    ("keyword index: stored text (content, scope, context)", ("memories_fts_content",)),
    ("keyword index: row sizes (docsize)", ("memories_fts_docsize",)),
    ("keyword index: segments (postings)", ("memories_fts_data", "memories_fts_idx", "memories_fts_config")),
    ("turn context links", ("turn_context_links", "turn_context")),
    ("vectors: float32 + code (memory_vectors)", ("memory_vectors",)),
    ("vectors: vec0 code chunks", ("memory_vec_vector_chunks",)),
    ("vectors: vec0 metadata, rowids, partitions", ("memory_vec", "vector_partitions")),
    ("memories and their indexes", ("memories",)),
    ("memories: unique (id, version) index", ("sqlite_autoindex_memories",)),
    ("episodes and their indexes", ("episodes", "sqlite_autoindex_episodes")),
    ("memory events", ("memory_events",)),
    ("memory sources", ("memory_sources", "sqlite_autoindex_memory_sources", "memory_source_links")),
    ("audit log", ("audit_log",)),
)


def part_of(name: str) -> str:
    for part, prefixes in PARTS:
        if any(name == prefix or name.startswith(prefix) for prefix in prefixes):
            return part
    return "other tables"


def pages_by_name(conn: Any) -> dict[str, int]:
    """{table or index: bytes of its pages} (dbstat's 'aggregated' rows: one per b-tree)."""
    return {
        name: int(size) for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
    }


def usage(path: str) -> dict[str, Any]:
    """Bytes per part of the store, per memory row, and the stored keyword text per column."""
    from dspy_memory.store.sqlite.connection import resolve_driver

    conn = resolve_driver().connect(path)
    try:
        memories = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        page_size, free = (
            int(conn.execute(f"PRAGMA {p}").fetchone()[0]) for p in ("page_size", "freelist_count")
        )
        by_name = pages_by_name(conn)
        parts: dict[str, int] = {}
        for name, size in by_name.items():
            parts[part_of(name)] = parts.get(part_of(name), 0) + size
        parts["free pages"] = free * page_size
        columns = [row[1] for row in conn.execute("PRAGMA table_info(memories_fts_content)")]
        stored = {
            column: int(
                conn.execute(
                    f"SELECT coalesce(sum(length(CAST({column} AS BLOB))), 0) FROM memories_fts_content"
                ).fetchone()[0]
            )
            for column in columns
            if column != "id"
        }
    finally:
        conn.close()
    files = sum(p.stat().st_size for p in Path(path).parent.glob(Path(path).name + "*"))
    return {"memories": memories, "file_bytes": files, "parts": parts, "tables": by_name, "fts_text": stored}


def report(result: dict[str, Any]) -> str:
    n = max(result["memories"], 1)
    total = sum(result["parts"].values())
    rows = [
        [part, size / 1e6, size / n, 100 * size / total]
        for part, size in sorted(result["parts"].items(), key=lambda item: -item[1])
    ]
    rows.append(["total (pages)", total / 1e6, total / n, 100.0])
    rows.append(["files on disk (with -wal)", result["file_bytes"] / 1e6, result["file_bytes"] / n, ""])
    out = [f"{result['memories']} memory rows", ""]
    out.append(table(["part", "MB", "bytes per memory", "%"], rows))
    if result["fts_text"]:
        out += ["", "Text stored by the keyword index, per column (bytes per memory):", ""]
        out.append(table(["column", "bytes per memory"], [[c, b / n] for c, b in result["fts_text"].items()]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", help="a SQLite memory file")
    result = usage(parser.parse_args(argv).path)
    print(report(result))
    return result


if __name__ == "__main__":
    main()
