"""Chaos: integrity of one memory file under kill -9, concurrent processes and LM failures.

    python -m evals.chaos [--seconds 60] [--writers 4] [--searchers 2] [--seed 0]

W writer processes and S searcher processes share ONE SQLite file (hash test embedder, no
model). Writers add messages through the LM write path with a scripted, careful LM that fails
on purpose (exceptions, garbage, truncated JSON, answers slower than `write.lm_timeout_s`).
Every writer moves the same few users ("I moved to <city>. I live in <city> now."), so they race
on one slot (user, lives_in), and every message carries a unique token (the city, or "My locker
code is K..."), so each acknowledged message can be looked for. A writer appends what `add()`
acknowledged to its own log (fsync per line) before it counts. Searchers check that every hit
belongs to the searched user. The parent SIGKILLs a random child at random intervals and starts
a replacement. Then a recovery `Memory` (same LM, no failures) flushes and reprocesses until
nothing is unfinished, and the file is checked against the writers' logs with SQL of its own
(`Memory.check()` is reported as a cross-check). docs/benchmarks.md ("Chaos") explains each
number. Exit status 1 unless lost, duplicated, stuck, scope violations and sample misses are 0
and SQLite's integrity check passes. Children run this module with --role.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.report import RESULTS_DIR, machine, percentile, save, table

ROOT = Path(__file__).resolve().parent.parent
CITIES = ("Lisbon", "Denver", "Porto", "Osaka", "Quito", "Tunis", "Oslo", "Lima")
MOVE = re.compile(r"\bI moved to (\w+)\.")  # followed by "I live in <city> now." (see docs)
LOCKER = re.compile(r"\bMy locker code is (\w+)\.")
FAULTS = {"exception": 0.4, "garbage": 0.2, "truncated": 0.2, "slow": 0.2}  # shares of --fault-rate
BUCKETS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500)  # latency histogram edges, ms
MUST_BE_ZERO = ("lost", "duplicated", "stuck", "scope_violations", "search_sample_misses")


# -- the scripted LM ------------------------------------------------------------------------------


def chaos_responder(
    *,
    seed: int,
    fault_rate: float = 0.0,
    slow_s: float = 0.0,
    dates: str = "none",
    injected: Counter | None = None,
    max_delay: float = 0.0,
    on_move: Any = None,
) -> Any:
    """A careful write LM (decides like `oracle_decisions`: a move invalidates the current home of
    the same person when it is shown, everything else is added) that fails `fault_rate` of its
    calls in one of the FAULTS ways. Several moves of one person in one batch: the latest is the
    home, earlier ones are past facts (lived_in). dates="day": valid_at is the turn's date, as the
    extraction instructions ask; "none": the write path dates facts itself. `on_move(person,
    shown)` is told, for each person who moves in a call, whether the LM was shown their home."""
    from dspy_memory.testing import oracle_decisions

    rng = random.Random(seed)
    injected = injected if injected is not None else Counter()

    def facts(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        last_move = {t["speaker"]: i for i, t in enumerate(turns) if MOVE.search(t["text"])}
        out = []
        for i, turn in enumerate(turns):
            who, text = turn["speaker"], turn["text"]
            fact: dict[str, Any] = {"content": f"{who} said: {text}", "subject": who}
            if moved := MOVE.search(text):
                city = moved.group(1)
                fact = {
                    "content": f"{who} lives in {city}.",
                    "subject": who,
                    "predicate": "lives_in",
                    "object": city,
                }
                if last_move[who] != i:
                    fact = {
                        **fact,
                        "content": f"{who} had a home in {city} for a while.",
                        "predicate": "lived_in",
                    }
            elif code := LOCKER.search(text):
                fact = {
                    "content": f"{who}'s locker code is {code.group(1)}.",
                    "subject": who,
                    "predicate": "locker_code",
                    "object": code.group(1),
                }
            if dates == "day":
                fact["valid_at"] = turn["time"][:10]
            out.append(fact)
        return out

    def responder(call: Any) -> Any:
        if max_delay:
            time.sleep(rng.uniform(0, max_delay))  # writers overlap inside the LM call
        decided = facts(call.inputs["turns"])
        shown = call.inputs["existing_memories"]
        if on_move is not None:
            for person in {f["subject"] for f in decided if f.get("predicate") == "lives_in"}:
                on_move(
                    person,
                    any(m.get("predicate") == "lives_in" and m.get("subject") == person for m in shown),
                )
        ops = oracle_decisions(decided, shown)
        if rng.random() < fault_rate:
            fault = rng.choices(list(FAULTS), weights=list(FAULTS.values()))[0]
            injected[fault] += 1
            if fault == "exception":
                raise ConnectionError("chaos: connection reset by peer")
            if fault == "garbage":
                return "Sorry, I cannot help with that request."
            if fault == "truncated":
                whole = json.dumps(ops)
                return "[[ ## ops ## ]]\n" + whole[: max(1, len(whole) // 2)]
            time.sleep(slow_s)  # "slow": answers, but after the write path gave up
        return {"ops": ops}

    return responder


def _memory(db: str, *, lm: Any = None, lm_timeout: float | None = None, **settings: Any) -> Any:
    from dspy_memory import Memory
    from dspy_memory.config import WriteConfig
    from dspy_memory.embed import HashEmbedder

    if lm_timeout is not None and "lm_timeout_s" in WriteConfig.model_fields:  # older trees lack it
        settings["write"] = {"lm_timeout_s": lm_timeout}
    return Memory(db, embedder=HashEmbedder(64), lm=lm, **settings)


class Log:
    """An append-only JSON-lines log; `durable` lines are on disk (fsync) before write returns."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()  # the LM answers in its own thread

    def write(self, record: dict[str, Any], *, durable: bool = True) -> None:
        with self._lock:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
            if durable:
                os.fsync(self._file.fileno())


# -- children -------------------------------------------------------------------------------------


def writer(args: argparse.Namespace) -> None:
    from dspy_memory.testing import scripted_lm

    rng, log, injected = random.Random(args.seed), Log(args.log), Counter()
    lm = scripted_lm(
        chaos_responder(
            seed=args.seed + 1,
            fault_rate=args.fault_rate,
            slow_s=args.lm_timeout + 1,
            dates=args.lm_dates,
            injected=injected,
            max_delay=0.03,
            on_move=lambda person, shown: log.write(
                {"type": "move_call", "t": time.time(), "user": person.lower(), "shown_home": shown},
                durable=False,
            ),
        )
    )
    try:
        memory = _memory(args.db, lm=lm, lm_timeout=args.lm_timeout, pending_grace_seconds=args.grace)
    except Exception as exc:
        log.write({"type": "error", "where": "open", "error": type(exc).__name__, "message": str(exc)[:200]})
        raise
    users = [f"u{i}" for i in range(args.users)]
    while not Path(args.stop).exists():
        user = rng.choice(users)
        kinds = ["move" if rng.random() < 0.4 else "locker"]
        if rng.random() < 0.25:  # a multi-message add: at most one move per add
            kinds += ["locker"] * rng.randint(1, 2)
        messages, tokens = [], []
        for kind in kinds:
            token = (
                f"{rng.choice(CITIES)}{rng.getrandbits(40):010x}"
                if kind == "move"
                else f"K{rng.getrandbits(40):010x}"
            )
            # "live" is what the message shares with the fact it replaces ("U0 lives in ..."), so
            # search shows the LM the current home even with the hash embedder.
            text = (
                f"I moved to {token}. I live in {token} now."
                if kind == "move"
                else f"My locker code is {token}."
            )
            messages.append({"role": "user", "name": user.upper(), "content": text})
            tokens.append(token)
        start = time.perf_counter()
        try:
            result = memory.add(messages, user_id=user)
        except Exception as exc:
            log.write(
                {"type": "error", "where": "add", "error": type(exc).__name__, "message": str(exc)[:200]}
            )
            log.write({"type": "faults", **injected}, durable=False)
            continue
        ms = (time.perf_counter() - start) * 1000
        by_text = {episode.content: episode.id for episode in result.episodes}
        log.write(
            {
                "type": "ack",
                "user": user,
                "ms": ms,
                "error": result.error,
                "messages": [
                    {"episode": by_text.get(m["content"]), "token": t, "kind": k}
                    for m, t, k in zip(messages, tokens, kinds)
                ],
            }
        )
        log.write({"type": "faults", **injected}, durable=False)  # a kill keeps what was written
    memory.close()


def searcher(args: argparse.Namespace) -> None:
    rng, log = random.Random(args.seed), Log(args.log)
    memory = _memory(args.db, process_pending_on_open=False)
    users = [f"u{i}" for i in range(args.users)] + ["nobody"]
    queries = (
        "where does {U} live",
        "{U} moved",
        "locker code",
        "{U} locker code lives",
        "Lisbon Porto Osaka",
    )
    latencies: list[float] = []
    errors: Counter = Counter()
    violations, searches, flushed = 0, 0, time.monotonic()
    while not Path(args.stop).exists():
        user = rng.choice(users)
        start = time.perf_counter()
        try:
            hits = memory.search(rng.choice(queries).format(U=user.upper()), user_id=user, k=10)
        except Exception as exc:
            errors[type(exc).__name__] += 1
        else:
            latencies.append((time.perf_counter() - start) * 1000)
            violations += sum(hit.memory.user_id != user for hit in hits)
            searches += 1
        if time.monotonic() - flushed > 0.5:
            log.write(
                {
                    "type": "search",
                    "ms": latencies,
                    "errors": errors,
                    "violations": violations,
                    "searches": searches,
                },
                durable=False,
            )
            latencies, errors, violations, searches, flushed = [], Counter(), 0, 0, time.monotonic()
        time.sleep(args.search_pause)
    log.write(
        {"type": "search", "ms": latencies, "errors": errors, "violations": violations, "searches": searches}
    )
    memory.close()


# -- the parent: start, kill, replace --------------------------------------------------------------


class Children:
    """The child processes, by slot ("writer0", ...); each start is a new incarnation with its own
    log ("writer0.3.jsonl") and seed."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.running: dict[str, tuple[str, subprocess.Popen]] = {}  # slot -> (incarnation, process)
        self.started = Counter()
        self.kills = Counter()
        self.unexpected: list[dict[str, Any]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DSPY_CACHEDIR": str(work / "dspy-cache"),
        }

    def start(self, slot: str) -> None:
        role = slot.rstrip("0123456789")
        n = sum(self.started.values())
        self.started[role] += 1
        name = f"{slot}.{self.started[role]}"
        a = self.args
        options = {
            "--role": role,
            "--db": self.work / "memory.db",
            "--log": self.work / f"{name}.jsonl",
            "--stop": self.work / "stop",
            "--seed": a.seed * 1000 + n,
            "--users": a.users,
            "--lm-timeout": a.lm_timeout,
            "--fault-rate": a.fault_rate,
            "--grace": a.grace,
            "--lm-dates": a.lm_dates,
            "--search-pause": a.search_pause,
        }
        cmd = [sys.executable, "-m", "evals.chaos", *(x for o, v in options.items() for x in (o, str(v)))]
        with open(self.work / f"{name}.stderr", "w") as err:
            process = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        self.running[slot] = (name, process)

    def kill(self, slot: str) -> None:
        name, process = self.running[slot]
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            self.kills[slot.rstrip("0123456789")] += 1
        else:  # it had ended on its own
            self.unexpected.append({"child": name, "returncode": process.returncode})
        process.wait()
        self.start(slot)

    def reap(self) -> None:
        """Restart children that ended on their own (a crash): they are reported."""
        for slot, (name, process) in list(self.running.items()):
            if process.poll() is not None:
                self.unexpected.append({"child": name, "returncode": process.returncode})
                self.start(slot)

    def stop(self, timeout: float) -> int:
        (self.work / "stop").touch()
        deadline, killed = time.monotonic() + timeout, 0
        for name, process in self.running.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                killed += 1
            if process.returncode not in (0, -signal.SIGKILL):
                self.unexpected.append({"child": name, "returncode": process.returncode})
        return killed


def _kill_until(children: Children, rng: random.Random, args: argparse.Namespace, start: float) -> None:
    """Until `args.seconds` have passed: SIGKILL a random child (writers 4 times in 5) at random
    intervals and start its replacement; restart children that died on their own."""
    next_kill = start + rng.uniform(0.5, 1.5) * args.kill_every
    while (now := time.monotonic()) < start + args.seconds:
        children.reap()
        if now >= next_kill:
            writers = [s for s in children.running if s.startswith("writer")]
            searchers = [s for s in children.running if s.startswith("searcher")]
            pool = writers if not searchers or rng.random() < 0.8 else searchers
            children.kill(rng.choice(pool))
            next_kill = now + rng.uniform(0.5, 1.5) * args.kill_every
        time.sleep(0.02)


def chaos(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    _memory(str(work / "memory.db")).close()  # the file exists before anyone races to create it
    children, rng = Children(args, work), random.Random(args.seed)
    for slot in [f"writer{i}" for i in range(args.writers)] + [f"searcher{i}" for i in range(args.searchers)]:
        children.start(slot)
    start = time.monotonic()
    try:
        _kill_until(children, rng, args, start)
    except BaseException:
        children.stop(0)  # an interrupted run leaves no children behind
        raise
    killed_at_stop = children.stop(args.lm_timeout * 2 + 8)
    return {
        "seconds": time.monotonic() - start,
        "kills": dict(children.kills),
        "started": dict(children.started),
        "killed_at_stop": killed_at_stop,
        "unexpected_exits": children.unexpected,
    }


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
        ("concurrent writes", "write conflicts"),
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
    memory = _memory(db, lm=scripted_lm(chaos_responder(seed=0)), lm_timeout=60, pending_grace_seconds=0)
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
    from dspy_memory.timeutil import now_db

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

    from dspy_memory.timeutil import to_db

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


# -- the run ---------------------------------------------------------------------------------------


def histogram(values: list[float]) -> list[float]:
    edges = [0, *BUCKETS, float("inf")]
    counts = [sum(lo <= v < hi for v in values) for lo, hi in zip(edges, edges[1:])]
    return [100 * c / max(1, len(values)) for c in counts]


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    run_info = chaos(args, work)
    logs = read_logs(work)
    memory, recovery = recover(str(work / "memory.db"))
    try:
        found = verify(memory, logs, seed=args.seed)
        audit = memory.check() if hasattr(memory, "check") else None
    finally:
        memory.close()
    add_ms = [ack["ms"] for ack in logs["acks"]]
    results = {
        "machine": machine(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("role", "out", "plot")},
        **run_info,
        **found,
        "errors": {
            "writers": dict(logs["add_errors"]),
            "searchers": dict(logs["search_errors"]),
            "recovery": dict(recovery["errors"]),
            "unexpected exits": len(run_info["unexpected_exits"]),
        },
        "lm_faults_injected": dict(logs["faults"]),
        "adds_degraded": dict(logs["degraded"]),
        "recovery": {k: v for k, v in recovery.items() if k != "errors"},
        "add_ms": {"p50": percentile(add_ms, 50), "p99": percentile(add_ms, 99), "n": len(add_ms)},
        "search_ms": {
            "p50": percentile(logs["search_ms"], 50),
            "p99": percentile(logs["search_ms"], 99),
            "n": logs["searches"],
        },
        "latency_histogram": {"add": histogram(add_ms), "search": histogram(logs["search_ms"])},
        "torn_log_lines": logs["torn_lines"],
        "audit": audit.model_dump() if audit is not None else None,
        "audit_ok": getattr(audit, "ok", None),
        "workdir": str(work),
    }
    results["ok"] = all(results[key] == 0 for key in MUST_BE_ZERO) and results["integrity"] == "ok"
    if results["ok"] and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(r: dict[str, Any]) -> str:
    def counts(d: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items() if v) or "none"

    errors = "; ".join(f"{k}: {counts(v) if isinstance(v, dict) else v}" for k, v in r["errors"].items())
    rows = [
        ["writes acknowledged", f"{r['acknowledged_adds']} adds, {r['acknowledged_messages']} messages", ""],
        ["lost", f"{r['lost']} ({counts(r['lost_reasons'])})", "0"],
        ["duplicated current facts", f"{r['duplicated']} ({counts(r['duplicates'])})", "0"],
        [
            "episodes stuck after recovery",
            f"{r['stuck']} of {sum(r['episodes'].values())} "
            f"(recovery: {r['recovery']['rounds']} rounds, {r['recovery']['seconds']:.1f} s)",
            "0",
        ],
        ["scope violations", f"{r['scope_violations']} ({counts(r['scope'])})", "0"],
        ["integrity_check", r["integrity"], "ok"],
        ["Memory.check()", {True: "ok", False: "NOT ok", None: "n/a"}[r["audit_ok"]], ""],
        ["kills (SIGKILL)", f"{counts(r['kills'])}; at stop {r['killed_at_stop']}", ""],
        ["episodes never acknowledged", f"{r['unacknowledged_episodes']} (add cut short by a kill)", ""],
        ["errors by type", errors, ""],
        ["LM faults injected", counts(r["lm_faults_injected"]), ""],
        ["adds kept raw (LM failure)", counts(r["adds_degraded"]), ""],
        ["sample not found by search/timeline", f"{r['search_sample_misses']} of {r['search_sample']}", "0"],
        ["lives_in slots", counts(r["slots"]), ""],
        [
            "moves decided without the home in view",
            f"{r['moves_without_home_in_view']} of {r['move_calls']} LM calls with a move",
            "",
        ],
        ["add p50 / p99 ms", f"{r['add_ms']['p50']:.1f} / {r['add_ms']['p99']:.1f}", ""],
        [
            "search p50 / p99 ms",
            f"{r['search_ms']['p50']:.1f} / {r['search_ms']['p99']:.1f} ({r['search_ms']['n']} searches)",
            "",
        ],
    ]
    return table(["check", "result", "must be"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long writers run and get killed")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument("--users", type=int, default=3, help="users shared by every writer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--fault-rate", type=float, default=0.12, help="share of LM calls that fail")
    parser.add_argument("--lm-timeout", type=float, default=2.0, help="write.lm_timeout_s of the writers")
    parser.add_argument(
        "--lm-dates",
        choices=("none", "day"),
        default="none",
        help="day: the LM dates facts with the turn's day (YYYY-MM-DD)",
    )
    parser.add_argument("--grace", type=float, default=2.0, help="pending_grace_seconds of writers")
    parser.add_argument("--search-pause", type=float, default=0.01)
    parser.add_argument("--workdir", default=None, help="keep the file and logs here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (always kept on failure)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "chaos.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "chaos.png"))
    parser.add_argument("--role", choices=("writer", "searcher"), help=argparse.SUPPRESS)
    for name in ("--db", "--log", "--stop"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        (writer if args.role == "writer" else searcher)(args)
        return {}
    results = run(args)
    print(
        f"Chaos: {args.writers} writers, {args.searchers} searchers, {results['seconds']:.0f} s, seed {args.seed}\n"
    )
    print(report(results))
    print(
        "\nOK: every invariant held"
        if results["ok"]
        else f"\nFAILED (file and logs kept in {results['workdir']})"
    )
    groups = [f"<{b}" for b in BUCKETS] + [f">={BUCKETS[-1]}"]
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=groups,
        series=results["latency_histogram"],
        title="Latency under chaos: share of calls per bucket (ms)",
        ylabel="% of calls",
    )
    return results


if __name__ == "__main__":
    sys.exit(0 if main().get("ok", True) else 1)
