"""The processes of `python -m evals.chaos`: a careful scripted write LM that fails on purpose,
and the writer and searcher children (each runs `python -m evals.chaos --role writer|searcher`
and logs what it did to its own JSON-lines file)."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

CITIES = ("Lisbon", "Denver", "Porto", "Osaka", "Quito", "Tunis", "Oslo", "Lima")
MOVE = re.compile(r"\bI moved to (\w+)\.")  # followed by "I live in <city> now." (see docs)
LOCKER = re.compile(r"\bMy locker code is (\w+)\.")
FAULTS = {"exception": 0.4, "garbage": 0.2, "truncated": 0.2, "slow": 0.2}  # shares of --fault-rate


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


def open_memory(db: str, *, lm: Any = None, lm_timeout: float | None = None, **settings: Any) -> Any:
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
        memory = open_memory(args.db, lm=lm, lm_timeout=args.lm_timeout, pending_grace_seconds=args.grace)
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
    memory = open_memory(args.db, process_pending_on_open=False)
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
