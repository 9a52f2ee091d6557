"""What search reads of a few memory rows beyond their scores: their text and who said them.
Mixed into Store."""

from __future__ import annotations

import json
from collections.abc import Sequence

from dspy_memory.store.backend import Connections


class MemoryTexts:
    _conns: Connections

    def contents(self, row_ids: Sequence[int]) -> dict[int, str]:
        """{row id: content} of these memory rows."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT m.row_id, m.content FROM memories m WHERE m.row_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(row_ids)),),
            ).fetchall()
        return {row["row_id"]: row["content"] for row in rows}

    def speakers(self, row_ids: Sequence[int]) -> dict[int, set[str]]:
        """{row id: the names of its source episodes' speakers} of these memory rows, for those
        whose input came with a name (a message's `name`)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT m.row_id, e.name FROM memories m JOIN memory_sources s ON s.memory_id = m.id "
                "JOIN episodes e ON e.id = s.episode_id "
                "WHERE m.row_id IN (SELECT value FROM json_each(?)) AND e.name IS NOT NULL",
                (json.dumps(list(row_ids)),),
            ).fetchall()
        names: dict[int, set[str]] = {}
        for row in rows:
            names.setdefault(row["row_id"], set()).add(row["name"])
        return names
