"""Checking the audit log's hash chain (store/audit_log.py; docs/governance.md, "The audit log").

Every entry must hash to its stored hash (else it was changed), link to the hash of the entry
before it, follow it with the next id (a gap: entries were removed), and the newest entry must
be the head recorded in `meta` (fewer: the newest were removed). An entry whose own hash holds
but whose link points at another entry was moved (reordered); a link to no entry at all means
the entry before it was replaced, hash and all.
"""

from __future__ import annotations

from typing import Any

from dspy_memory.store.audit_log import GENESIS, AuditLog, acting_as, entry_hash
from dspy_memory.types import AuditProblem, AuditVerification

__all__ = ["acting_as", "verify_chain"]


def verify_chain(log: AuditLog) -> AuditVerification:
    """Walk the chain oldest first; every problem found, the first one first."""
    problems: list[AuditProblem] = []
    expected_id, expected_prev = 1, GENESIS
    hashes: dict[str, int] = {}  # stored hash -> id, to tell a moved entry from a replaced one
    rows: list[dict[str, Any]] = []
    for row in log.rows():
        rows.append({"id": row["id"], "prev_hash": row["prev_hash"], "hash": row["hash"]})
        hashes[row["hash"]] = row["id"]
        if row["id"] != expected_id:
            gap = f"{expected_id}" if row["id"] == expected_id + 1 else f"{expected_id}..{row['id'] - 1}"
            problems.append(AuditProblem(id=expected_id, kind="removed", detail=f"entry {gap} is missing"))
        if entry_hash(row) != row["hash"]:
            problems.append(
                AuditProblem(id=row["id"], kind="changed", detail="its content does not match its hash")
            )
        elif row["prev_hash"] != expected_prev and row["id"] == expected_id:
            problems.append(_broken_link(row, expected_prev))
        expected_id, expected_prev = row["id"] + 1, row["hash"]
    for row in rows:  # a link to an entry that comes later: the entries were swapped
        later = hashes.get(row["prev_hash"])
        if later is not None and later >= row["id"]:
            problems.append(
                AuditProblem(
                    id=row["id"], kind="reordered", detail=f"it links to entry {later}, which comes after it"
                )
            )
    head = log.head()
    last = rows[-1] if rows else None
    if head is not None:
        head_id, head_hash = head
        if last is None or last["id"] < head_id:
            first = 1 if last is None else last["id"] + 1
            problems.append(
                AuditProblem(
                    id=first, kind="removed", detail=f"entries {first}..{head_id} (the newest) are missing"
                )
            )
        elif last["id"] > head_id:
            problems.append(
                AuditProblem(
                    id=head_id + 1,
                    kind="head",
                    detail="entries after the recorded head were written around the store",
                )
            )
        elif last["hash"] != head_hash:
            problems.append(AuditProblem(id=last["id"], kind="changed", detail="it is not the recorded head"))
    elif last is not None:
        problems.append(AuditProblem(id=last["id"], kind="head", detail="the recorded head is missing"))
    problems.sort(key=lambda problem: problem.id)
    return AuditVerification(
        entries=len(rows),
        head_id=head[0] if head else None,
        head_hash=head[1] if head else None,
        problems=_unique(problems),
    )


def _broken_link(row: dict[str, Any], expected_prev: str) -> AuditProblem:
    before = row["id"] - 1
    return AuditProblem(
        id=before,
        kind="changed",
        detail=f"entry {row['id']} links to a hash entry {before} no longer has (entry {before} was rewritten)",
    )


def _unique(problems: list[AuditProblem]) -> list[AuditProblem]:
    seen: set[tuple[int, str]] = set()
    kept = []
    for problem in problems:
        if (problem.id, problem.kind) not in seen:
            seen.add((problem.id, problem.kind))
            kept.append(problem)
    return kept
