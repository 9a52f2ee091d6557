"""The write-run log: what each run of the write program cost and what it refused."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dspy_memory.ops import Rejection
from dspy_memory.store.backend import Connections
from dspy_memory.store.queries import Predicate, scope_predicate
from dspy_memory.types import LMUsage, Scope
from dspy_memory.util.timeutil import now_db


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
    ) -> None:
        """Audit one run of an LM program over episodes: cost, applied count, refusals."""
        with self._conns.transaction() as conn:
            conn.execute(
                "INSERT INTO write_runs (user_id, agent_id, run_id, mode, episode_ids, lm, lm_calls, "
                "prompt_tokens, completion_tokens, ops_applied, rejected, error, started_at, "
                "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
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
