"""The write-run log: what each run of the write program cost and refused, and what it saw and
did, by ids only (docs/feedback.md): the candidates shown to it by alias and every operation
it proposed, with what each became. No memory content is kept here, so erasing a memory leaves
these rows as they are (ids are not content, as in the audit log); erasing a scope removes them
with its runs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from dspy_memory.ops import Rejection
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.types import LMUsage, Scope
from dspy_memory.util.timeutil import TimeLike, now_db, to_db

# The actions that make a memory version (NOOP confirms one, DELETE erases one).
_MAKING = ("ADD", "UPDATE", "INVALIDATE")


# What a refusal's reason becomes when the input it may quote is erased (its code stays).
WITHHELD = "withheld: the input it was about was erased"


def withhold_reasons(conn: Any, episode_ids: str) -> list[str]:
    """Withhold the refusal reasons of the runs that read any of these episodes (a JSON list),
    in the caller's transaction (erasure: a reason may name what the LM read there). Returns the
    uids of those runs (runs logged before uids existed have none)."""
    users = conn.execute(
        "SELECT DISTINCT user_id FROM episodes WHERE id IN (SELECT value FROM json_each(?))", (episode_ids,)
    ).fetchall()
    runs = [
        run
        for (user,) in users  # a run's episodes are its own user's: the user's runs are read by index
        for run in conn.execute(
            "SELECT id, uid, rejected FROM write_runs w WHERE w.user_id IS ? AND EXISTS "
            "(SELECT 1 FROM json_each(w.episode_ids) e WHERE e.value IN (SELECT value FROM json_each(?)))",
            (user, episode_ids),
        ).fetchall()
    ]
    for run in runs:
        rejected = [{**rejection, "reason": WITHHELD} for rejection in json.loads(run["rejected"])]
        conn.execute("UPDATE write_runs SET rejected = ? WHERE id = ?", (json.dumps(rejected), run["id"]))
    return [run["uid"] for run in runs if run["uid"]]


class RunCandidate(NamedTuple):
    """A memory shown to the write program: its alias in the prompt and the version shown."""

    alias: int
    memory_id: str
    version: int


class RunOp(NamedTuple):
    """An operation the write program proposed. `action` and `target` are as proposed (None:
    not an operation at all); `applied` the action applied (validation may change it, e.g. an
    ADD of words already remembered is a NOOP; None: not applied), `memory_id` and `version`
    what it made or changed; `refused` the code of why validation refused or changed it
    (write/validate.py)."""

    op_index: int
    action: str | None = None
    target: int | None = None
    applied: str | None = None
    memory_id: str | None = None
    version: int | None = None
    refused: str | None = None


class WriteRun(NamedTuple):
    """One logged run of an LM program over episodes, with what it saw and did."""

    uid: str | None
    scope: Scope
    mode: str
    episode_ids: list[str]
    lm: str | None
    ops_applied: int
    error: str | None
    started_at: str
    finished_at: str
    candidates: list[RunCandidate]
    ops: list[RunOp]


_OP_COLUMNS = "write_run_id, op_index, action, target, applied, memory_id, version, refused"


class WriteRunLog:
    def __init__(self, conns: Connections) -> None:
        self._conns = conns

    def log(
        self,
        scope: Scope,
        *,
        mode: str,
        episode_ids: Sequence[str],
        lm: str | None,
        usage: LMUsage,
        ops_applied: int,
        rejected: Sequence[Rejection],
        error: str | None,
        started_at: str,
        uid: str | None = None,
        candidates: Sequence[RunCandidate] = (),
        ops: Sequence[RunOp] = (),
    ) -> str:
        """Log one run of an LM program over episodes: cost, applied count, refusals, and what
        it saw and proposed. Joins the caller's transaction (the write path logs a run in the
        transaction that applies it). Returns the run's uid (`uid`, or a new one)."""
        uid = uid or str(uuid.uuid4())
        with self._conns.transaction() as conn:
            conn.execute(
                "INSERT INTO write_runs (uid, user_id, agent_id, run_id, mode, episode_ids, lm, lm_calls, "
                "prompt_tokens, completion_tokens, ops_applied, rejected, error, started_at, "
                "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    uid,
                    scope.user_id,
                    scope.agent_id,
                    scope.run_id,
                    mode,
                    json.dumps(list(episode_ids)),
                    lm,
                    usage.lm_calls,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    ops_applied,
                    json.dumps([rejection.model_dump() for rejection in rejected]),
                    error,
                    started_at,
                    now_db(),
                ),
            )
            if candidates:
                conn.executemany(
                    "INSERT INTO write_run_candidates (write_run_id, alias, memory_id, version) VALUES (?, ?, ?, ?)",
                    [(uid, *candidate) for candidate in candidates],
                )
            if ops:
                conn.executemany(
                    f"INSERT INTO write_run_ops ({_OP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(uid, *op) for op in ops],
                )
        return uid

    def get(self, uid: str, *, scope: Scope | None = None) -> WriteRun | None:
        """A run by its uid, if it belongs to `scope` (read as searches read it; None: any)."""
        predicate = scope_predicate(Predicate().add("m.uid = ?", uid), scope)
        with self._conns.snapshot() as conn:
            row = conn.execute(
                "SELECT uid, user_id, agent_id, run_id, mode, episode_ids, lm, ops_applied, error, started_at, "
                f"finished_at FROM write_runs m WHERE {predicate.sql}",
                predicate.params,
            ).fetchone()
            if row is None:
                return None
            candidates = conn.execute(
                "SELECT alias, memory_id, version FROM write_run_candidates WHERE write_run_id = ? ORDER BY alias",
                (uid,),
            ).fetchall()
            ops = conn.execute(
                f"SELECT {_OP_COLUMNS} FROM write_run_ops WHERE write_run_id = ? ORDER BY op_index", (uid,)
            ).fetchall()
        return WriteRun(
            uid=row["uid"],
            scope=Scope.model_construct(
                user_id=row["user_id"], agent_id=row["agent_id"], run_id=row["run_id"]
            ),
            mode=row["mode"],
            episode_ids=json.loads(row["episode_ids"]),
            lm=row["lm"],
            ops_applied=row["ops_applied"],
            error=row["error"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            candidates=[RunCandidate(row["alias"], row["memory_id"], row["version"]) for row in candidates],
            ops=[RunOp(*(row[name] for name in RunOp._fields)) for row in ops],
        )

    def made(self, memory_id: str, version: int) -> tuple[str, int] | None:
        """(run uid, operation index) of the write-program operation that made this version of a
        memory, or None (made by hand, as a raw turn, or before runs were recorded)."""
        with self._conns.read() as conn:
            row = conn.execute(
                "SELECT write_run_id, op_index FROM write_run_ops WHERE memory_id = ? AND version = ? "
                "AND applied IN (SELECT value FROM json_each(?)) ORDER BY write_run_id LIMIT 1",
                (memory_id, version, json.dumps(_MAKING)),
            ).fetchone()
        return (row["write_run_id"], row["op_index"]) if row else None

    def seen(self, memory_id: str, version: int, *, before: TimeLike) -> list[tuple[str, int]]:
        """(run uid, alias) of every write run started before `before` that was shown this
        version of a memory, newest first (learning from an "outdated" verdict: which run should
        have invalidated it)."""
        with self._conns.read() as conn:
            rows = conn.execute(
                "SELECT c.write_run_id, c.alias FROM write_run_candidates c JOIN write_runs w ON w.uid = c.write_run_id "
                "WHERE c.memory_id = ? AND c.version = ? AND w.started_at < ? ORDER BY w.started_at DESC, w.id DESC",
                (memory_id, version, to_db(before)),
            ).fetchall()
        return [(row["write_run_id"], row["alias"]) for row in rows]

    def totals(self, scope: Scope | None = None) -> dict[str, Any]:
        """Totals of the write-run log: runs, LM calls, tokens, applied ops, failures."""
        predicate = scope_predicate(Predicate(), scope)
        with self._conns.read() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(lm_calls), 0), coalesce(sum(prompt_tokens), 0), "
                "coalesce(sum(completion_tokens), 0), coalesce(sum(ops_applied), 0), "
                "coalesce(sum(json_array_length(rejected)), 0), count(error) "
                f"FROM write_runs m WHERE {predicate.sql}",
                predicate.params,
            ).fetchone()
        keys = (
            "runs",
            "lm_calls",
            "prompt_tokens",
            "completion_tokens",
            "ops_applied",
            "ops_rejected",
            "failed",
        )
        return dict(zip(keys, row))
