"""Compare-and-set for the LM write path: inside its write transaction, whether the memories an
LM acted on are still as it saw them (docs/write-path.md, "One truth per slot"). Mixed into
Store; joins the caller's transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dspy_memory.errors import WriteConflictError
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import now_db


class WriteConflicts:
    def transaction(self) -> Any:  # provided by Store
        raise NotImplementedError

    def check_unchanged(
        self,
        scope: Scope,
        *,
        versions: dict[str, int],
        after_row_id: int,
        seen: Sequence[str] = (),
        hashes: Sequence[str] = (),
        slots: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Compare-and-set for the write path, inside its write transaction. Raises
        WriteConflictError if a memory the LM acted on is no longer at the version it saw
        (`versions`: id -> version), if a memory it was not shown (id not in `seen`) and written
        after row `after_row_id` holds the same content (`hashes`), or if a current fact of a
        single-valued slot it writes (`slots`: normalized subject name, predicate) was not shown,
        whenever it was written: a retrieval miss is caught like a race. The error's `unseen`
        lists those facts, to show the LM next time."""
        with self.transaction() as conn:
            if versions:
                predicate = scope_predicate(Predicate(), scope)
                predicate.add("m.id IN (SELECT value FROM json_each(?))", json.dumps(list(versions)))
                current = dict(
                    conn.execute(
                        f"SELECT m.id, m.version FROM memories m WHERE {predicate.sql} AND m.expired_at IS NULL",
                        predicate.params,
                    ).fetchall()
                )
                changed = sorted(key for key, version in versions.items() if current.get(key) != version)
                if changed:
                    raise WriteConflictError(f"{len(changed)} memory(ies) changed since the LM read them")
            if not hashes and not slots:
                return
            predicate = scope_predicate(Predicate(), scope)
            predicate.add("m.kind != 'turn' AND m.expired_at IS NULL")
            predicate.add("m.invalid_at IS NULL OR m.invalid_at > ?", now_db())
            predicate.add("m.id NOT IN (SELECT value FROM json_each(?))", json.dumps(list(seen)))
            predicate.add(
                "(m.row_id > ? AND m.content_hash IN (SELECT value FROM json_each(?))) OR EXISTS (SELECT 1 "
                "FROM json_each(?) slot WHERE json_extract(slot.value, '$[0]') = subj.normalized_name "
                "AND json_extract(slot.value, '$[1]') = m.predicate)",
                after_row_id,
                json.dumps(list(hashes)),
                json.dumps([list(slot) for slot in slots]),
            )
            unseen = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT m.id FROM memories m LEFT JOIN entities subj ON subj.id = m.subject_id "
                    f"WHERE {predicate.sql} LIMIT 20",
                    predicate.params,
                )
            ]
            if unseen:
                raise WriteConflictError(
                    f"{len(unseen)} current fact(s) on the same subject the LM was not shown", unseen=unseen
                )
