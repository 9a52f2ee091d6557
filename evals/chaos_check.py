"""Recovery and verification of `python -m evals.chaos`: the file, reopened and reprocessed as
a restarted app would, checked against the writers' logs with SQL of its own (an oracle that
does not share the code it checks; `Memory.check()` is reported beside it)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.chaos_processes import MOVE, chaos_responder, open_memory

# -- recovery and verification -----------------------------------------------------------------------


def read_logs(work: Path) -> dict[str, Any]:
    acks, add_errors, search_errors, faults, degraded = [], Counter(), Counter(), Counter(), Counter()
    search_ms: list[float] = []
    move_calls: list[dict[str, Any]] = []
    violations = searches = torn = 0
    for path in sorted(work.glob("*.jsonl")):
        last_faults: dict[str, int] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # the line a kill cut short
                torn += 1
                continue
            kind = record.pop("type")
            if kind == "ack":
                acks.append(record)
                if record["error"]:
                    degraded[_error_kind(record["error"])] += 1
            elif kind == "error":
                add_errors[f"{record['where']}: {record['error']}"] += 1
            elif kind == "faults":
                last_faults = record
            elif kind == "move_call":
                move_calls.append(record)
            elif kind == "search":
                search_ms += record["ms"]
                search_errors.update(record["errors"])
                violations += record["violations"]
                searches += record["searches"]
        faults.update(last_faults)
    return {
        "acks": acks,
        "add_errors": add_errors,
        "search_errors": search_errors,
        "faults": faults,
        "degraded": degraded,
        "search_ms": search_ms,
        "violations": violations,
        "searches": searches,
        "torn_lines": torn,
        "move_calls": move_calls,
    }


def _error_kind(error: str) -> str:
    for needle, kind in (
        ("did not answer", "LM timeout"),
        ("failed", "LM failed every attempt"),
        ("did not hold still", "write conflicts"),
        ("took over", "claim lost"),
    ):
        if needle in error:
            return kind
    return error.split(":")[0][:60]


def recover(db: str) -> tuple[Any, dict[str, Any]]:
    """Open the file as a restarted app would, with a reliable LM; flush and reprocess until
    nothing is unfinished (at most 10 rounds)."""
    from dspy_memory.testing import scripted_lm

    errors, start, rounds = Counter(), time.monotonic(), 0
    memory = open_memory(db, lm=scripted_lm(chaos_responder(seed=0)), lm_timeout=60, pending_grace_seconds=0)
    while rounds < 10:
        rounds += 1
        for step in (memory.flush, memory.reprocess, memory.flush):
            try:
                step()
            except Exception as exc:
                errors[f"{step.__name__}: {type(exc).__name__}"] += 1
        with memory.store.snapshot() as conn:
            if not conn.execute("SELECT count(*) FROM episodes WHERE status != 'done'").fetchone()[0]:
                break
    return memory, {"rounds": rounds, "seconds": time.monotonic() - start, "errors": errors}


_PER_MESSAGE = """
WITH acked AS (SELECT json_extract(value, '$[0]') AS eid, json_extract(value, '$[1]') AS uid,
                      json_extract(value, '$[2]') AS tok FROM json_each(:acked))
SELECT a.eid, a.uid, a.tok, e.status, e.user_id AS owner,
  EXISTS (SELECT 1 FROM memory_sources s JOIN memories m ON m.id = s.memory_id
          WHERE s.episode_id = a.eid AND m.expired_at IS NULL) AS has_memory,
  EXISTS (SELECT 1 FROM memories m WHERE m.user_id = a.uid AND m.expired_at IS NULL
          AND instr(m.content, a.tok) > 0) AS findable,
  EXISTS (SELECT 1 FROM memories m WHERE m.user_id IS NOT a.uid AND instr(m.content, a.tok) > 0) AS elsewhere,
  (SELECT count(DISTINCT m.id) FROM memories m WHERE m.expired_at IS NULL AND m.kind != 'turn'
          AND instr(m.content, a.tok) > 0) AS facts
FROM acked a LEFT JOIN episodes e ON e.id = a.eid"""
_CURRENT = "m.expired_at IS NULL AND (m.invalid_at IS NULL OR m.invalid_at > :now) AND m.kind != 'turn'"
_SLOTS = f"""SELECT m.user_id, m.subject_id, count(DISTINCT m.id) AS n, max(m.content) AS content
FROM memories m WHERE {_CURRENT} AND m.predicate = 'lives_in' GROUP BY m.user_id, m.subject_id"""
_TWICE_INVALIDATED = """SELECT count(*) FROM (SELECT m.id FROM memories m GROUP BY m.id
HAVING (SELECT count(*) FROM memory_events v WHERE v.memory_id = m.id AND v.event = 'INVALIDATE') > 1
    OR count(DISTINCT CASE WHEN m.invalid_at IS NOT NULL THEN m.row_id END) > 1)"""
# An episode processed twice: the source of one fact twice, or in two write runs that succeeded.
_PROCESSED_TWICE = f"""SELECT s.episode_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id
WHERE {_CURRENT} GROUP BY s.episode_id, m.content_hash HAVING count(DISTINCT m.id) > 1
UNION SELECT value FROM write_runs, json_each(write_runs.episode_ids)
WHERE write_runs.error IS NULL GROUP BY value HAVING count(*) > 1"""
# A home the LM should have been shown: current at system time :t (a move call's time minus
# HOME_MARGIN_S, so a home committed while the candidates were being read does not count).
_HOME_AT = """SELECT EXISTS (SELECT 1 FROM memories m WHERE m.user_id = :user AND m.predicate = 'lives_in'
AND m.kind != 'turn' AND m.invalid_at IS NULL AND m.created_at <= :t AND (m.expired_at IS NULL OR m.expired_at > :t))"""
HOME_MARGIN_S = 0.25
_LATEST_MOVE = """SELECT user_id, content FROM episodes e WHERE content LIKE 'I moved to %' AND
occurred_at = (SELECT max(occurred_at) FROM episodes f WHERE f.user_id = e.user_id AND f.content LIKE 'I moved to %')"""


def verify(memory: Any, logs: dict[str, Any], *, seed: int, sample: int = 100) -> dict[str, Any]:
    """The file against the writers' logs (see docs/benchmarks.md, "Chaos", for each number)."""
    from dspy_memory.util.timeutil import now_db

    messages = [
        (m["episode"], ack["user"], m["token"], m["kind"]) for ack in logs["acks"] for m in ack["messages"]
    ]
    lost, reasons = set(), Counter()
    leaked = fact_dupes = 0
    with memory.store.snapshot() as conn:
        now = now_db()
        rows = conn.execute(_PER_MESSAGE, {"acked": json.dumps([m[:3] for m in messages])}).fetchall()
        for eid, uid, _token, status, owner, has_memory, findable, elsewhere, facts in rows:
            why = [
                w
                for w, bad in (
                    ("episode missing", status is None),
                    ("episode of another user", owner != uid),
                    ("done without a memory", status == "done" and not has_memory),
                    ("text not in any memory of the user", not findable),
                )
                if bad
            ]
            reasons.update(why)
            if why:
                lost.add(eid)
            leaked += elsewhere
            fact_dupes += max(0, facts - 1)
        slots = conn.execute(_SLOTS, {"now": now}).fetchall()
        extra_current = sum(n - 1 for _, _, n, _ in slots)
        twice_invalidated = conn.execute(_TWICE_INVALIDATED).fetchone()[0]
        processed_twice = len(conn.execute(_PROCESSED_TWICE, {"now": now}).fetchall())
        statuses = dict(conn.execute("SELECT status, count(*) FROM episodes GROUP BY status").fetchall())
        episodes = sum(statuses.values())
        latest = {user: MOVE.search(text).group(1) for user, text in conn.execute(_LATEST_MOVE).fetchall()}
        homes = {user: content for user, _, n, content in slots if n == 1}
        integrity = "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check").fetchall())
        unseen = [call for call in logs["move_calls"] if not call["shown_home"]]
        blind = sum(
            conn.execute(
                _HOME_AT, {"user": call["user"], "t": _db_time(call["t"] - HOME_MARGIN_S)}
            ).fetchone()[0]
            for call in unseen
        )
    stale = sum(1 for user, city in latest.items() if user in homes and city not in homes[user])
    empty = sum(1 for user in latest if user not in {row[0] for row in slots})
    misses = search_sample(memory, messages, seed=seed, size=sample)
    acked_ids = {m[0] for m in messages}
    return {
        "acknowledged_adds": len(logs["acks"]),
        "acknowledged_messages": len(messages),
        "lost": len(lost),
        "lost_reasons": dict(reasons),
        "search_sample": sample,
        "search_sample_misses": misses,
        "duplicated": extra_current + twice_invalidated + processed_twice + fact_dupes,
        "duplicates": {
            "extra current lives_in facts": extra_current,
            "memories invalidated twice": twice_invalidated,
            "episodes processed twice": processed_twice,
            "facts stored twice": fact_dupes,
        },
        "slots": {"users with a move": len(latest), "empty": empty, "stale (not the latest move)": stale},
        "move_calls": len(logs["move_calls"]),
        "moves_without_home_in_view": blind,
        "stuck": episodes - statuses.get("done", 0),
        "episodes": statuses,
        "unacknowledged_episodes": episodes - len(acked_ids),
        "acknowledged_twice": len(messages) - len(acked_ids),
        "scope_violations": logs["violations"] + leaked,
        "scope": {
            "search hits of another user": logs["violations"],
            "tokens stored under another user": leaked,
        },
        "integrity": integrity,
    }


def _db_time(seconds: float) -> str:
    from datetime import datetime, timezone

    from dspy_memory.util.timeutil import to_db

    return to_db(datetime.fromtimestamp(seconds, timezone.utc))


def search_sample(memory: Any, messages: list[tuple], *, seed: int, size: int) -> int:
    """Acknowledged messages the public API cannot find by their token: a locker code by
    `search` (true now), a move in the person's `timeline` (a later move ends it)."""
    misses, timelines = 0, {}
    for _, user, token, kind in random.Random(seed).sample(messages, min(size, len(messages))):
        if kind == "move":
            if user not in timelines:
                timelines[user] = [m.content for m in memory.timeline(subject=user.upper(), user_id=user)]
            contents = timelines[user]
        else:
            contents = [hit.memory.content for hit in memory.search(token, user_id=user, k=10)]
        misses += not any(token in content for content in contents)
    return misses
