"""Checking the audit log's hash chain (store/audit_log.py; docs/governance.md, "The audit log").

Every entry must hash to its stored hash, link to the hash of the entry before it, follow it
with the next id, and the newest entry must be the head recorded in `meta`. What is wrong is
named by entry id:
- changed: its content no longer matches its hash, or the next entry links to a hash it no
  longer has (rewritten with a fresh hash);
- removed: a gap in the ids, or fewer entries than the head says (the newest were cut off);
- reordered: its content matches its hash under another id, or it links to an entry that is
  not the one before it;
- head: the recorded head is missing, or entries were written past it around the store.
One pass, oldest first, keeping nothing per entry: a large log is checked in constant memory.
"""

from __future__ import annotations

from typing import Any

from dspy_memory.reports import AuditProblem, AuditVerification
from dspy_memory.store.audit_log import GENESIS, AuditLog, acting_as, current_context, entry_hash

# acting_as and current_context: for the CLI and the service, which import no store module.
__all__ = ["acting_as", "current_context", "verify_chain"]

_NEAR = 8  # how far from its place a moved entry is looked for


def verify_chain(log: AuditLog) -> AuditVerification:
    """Walk the chain oldest first; every problem found, the first one first."""
    problems: list[AuditProblem] = []
    expected_id, expected_prev = 1, GENESIS
    entries, last = 0, None
    for row in log.rows():
        entries += 1
        if row["id"] > expected_id:
            gap = f"{expected_id}" if row["id"] == expected_id + 1 else f"{expected_id}..{row['id'] - 1}"
            problems.append(AuditProblem(id=expected_id, kind="removed", detail=f"entry {gap} is missing"))
        if entry_hash(row) != row["hash"]:
            problems.append(_mismatch(log, row))
        elif row["prev_hash"] != expected_prev and row["id"] == expected_id:
            problems.append(_broken_link(log, row))
        expected_id, expected_prev = row["id"] + 1, row["hash"]
        last = (row["id"], row["hash"])
    head = log.head()
    if head is not None:
        head_id, head_hash = head
        if last is None or last[0] < head_id:
            first = 1 if last is None else last[0] + 1
            problems.append(
                AuditProblem(
                    id=first, kind="removed", detail=f"entries {first}..{head_id} (the newest) are missing"
                )
            )
        elif last[0] > head_id:
            problems.append(
                AuditProblem(
                    id=head_id + 1,
                    kind="head",
                    detail="entries after the recorded head were written around the store",
                )
            )
        elif last[1] != head_hash:
            problems.append(AuditProblem(id=last[0], kind="changed", detail="it is not the recorded head"))
    elif last is not None:
        problems.append(AuditProblem(id=last[0], kind="head", detail="the recorded head is missing"))
    problems.sort(key=lambda problem: problem.id)
    return AuditVerification(
        entries=entries,
        head_id=head[0] if head else None,
        head_hash=head[1] if head else None,
        problems=_unique(problems),
    )


def _mismatch(log: AuditLog, row: dict[str, Any]) -> AuditProblem:
    """An entry that does not match its hash: moved to another id (tried: the ids near it, and
    the one after the entry it links to), or changed."""
    before = 0 if row["prev_hash"] == GENESIS else log.id_of_hash(row["prev_hash"])
    nearby = range(max(1, row["id"] - _NEAR), row["id"] + _NEAR + 1)
    candidates = ([before + 1] if before is not None else []) + list(nearby)
    for original in dict.fromkeys(candidates):
        if original != row["id"] and entry_hash({**row, "id": original}) == row["hash"]:
            return AuditProblem(id=row["id"], kind="reordered", detail=f"it was written as entry {original}")
    return AuditProblem(id=row["id"], kind="changed", detail="its content does not match its hash")


def _broken_link(log: AuditLog, row: dict[str, Any]) -> AuditProblem:
    """An entry that matches its hash but does not link to the entry before it."""
    target = 0 if row["prev_hash"] == GENESIS else log.id_of_hash(row["prev_hash"])
    if target is not None:
        return AuditProblem(
            id=row["id"], kind="reordered", detail=f"it follows entry {target}, not {row['id'] - 1}"
        )
    before = row["id"] - 1
    return AuditProblem(
        id=before,
        kind="changed",
        detail=f"entry {row['id']} links to a hash entry {before} no longer has (it was rewritten)",
    )


def _unique(problems: list[AuditProblem]) -> list[AuditProblem]:
    seen: set[tuple[int, str]] = set()
    kept = []
    for problem in problems:
        if (problem.id, problem.kind) not in seen:
            seen.add((problem.id, problem.kind))
            kept.append(problem)
    return kept
