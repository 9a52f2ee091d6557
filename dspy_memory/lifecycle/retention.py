"""Retention (docs/governance.md#retention): policies per scope, and what maintenance erases
because a policy or a memory's own `expires_at` says it is due. Erasure, never archiving: the
closure of `delete`, one audit receipt a run with counts only."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.retention_settings import RetentionSettings
from dspy_memory.store import Store
from dspy_memory.store.settings import ScopeKey, lookup_order
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import format_db

ACTOR = "retention"


class Retention:
    def __init__(self, store: Store, default: RetentionSettings) -> None:
        self.store = store
        self.default = default

    # -- policies --------------------------------------------------------------------------

    def settings_for(
        self, scope: ScopeKey, stored: dict[ScopeKey, dict[str, Any]] | None = None
    ) -> RetentionSettings:
        """The policy of a scope: its own, else its user's (user_id only), else its agent's
        (agent_id only), else the config's; as `lifecycle_settings` are looked up. `stored`:
        every stored policy, read once (else each is read from the file)."""
        for key in lookup_order(scope):
            policy = stored.get(key) if stored is not None else self.store.retention_settings.get(key)
            if policy is not None:
                return RetentionSettings.model_validate(policy)
        return self.default

    def save(self, scope: Scope, changes: dict[str, Any], *, reset: bool = False) -> RetentionSettings:
        """Store the policy of exactly `scope`: `changes` over what it has (`reset`: over
        nothing). A policy of a scope stands whole: it does not inherit the user's."""
        key = (scope.user_id, scope.agent_id, scope.run_id)
        unknown = set(changes) - set(RetentionSettings.model_fields)
        if unknown:
            raise InvalidInputError(
                f"unknown retention setting(s) {sorted(unknown)}; choose from {sorted(RetentionSettings.model_fields)}"
            )
        stored = {} if reset else dict(self.store.retention_settings.get(key) or {})
        try:
            policy = RetentionSettings.model_validate({**stored, **changes})
        except ValueError as exc:
            raise InvalidInputError(f"bad retention settings: {exc}") from None
        kept = policy.model_dump(mode="json", exclude_defaults=True)
        self.store.retention_settings.save(key, kept or None)
        return self.settings_for(key)

    def policies(self) -> list[tuple[ScopeKey, RetentionSettings]]:
        """Every stored policy with its scope."""
        return [
            (key, RetentionSettings.model_validate(stored))
            for key, stored in self.store.retention_settings.all().items()
        ]

    # -- what is due -----------------------------------------------------------------------

    def due(self, scope: Scope | None, now: datetime) -> tuple[set[str], set[str], set[str]]:
        """(memory ids, episode ids, block ids) to erase now in `scope` (None: every scope):
        what expired by its own `expires_at`, and what a scope's policy says is old enough."""
        at = format_db(now)
        memory_ids, episode_ids = self.store.retention.expired(scope, at)
        block_ids: set[str] = set()
        stored = self.store.retention_settings.all()
        if not stored and self.default.limit_for(False) is None and self.default.limit_for(True) is None:
            return memory_ids, episode_ids, block_ids  # no policy anywhere: only expiries
        for key in self.store.retention.scopes(scope):
            policy = self.settings_for(key, stored)
            in_run = key[2] is not None
            limit = policy.limit_for(in_run)
            if limit is None:
                continue
            cutoff = format_db(now - limit)
            if in_run:
                # A run goes as a whole once its last message is old enough.
                last = self.store.retention.last_written(key)
                if last is None or last > cutoff:
                    continue
                cutoff = at
            memories, episodes, blocks = self.store.retention.due(
                key, cutoff, kinds=policy.kinds, pinned=policy.pinned, blocks=policy.blocks
            )
            memory_ids |= memories
            episode_ids |= episodes
            block_ids |= blocks
        return memory_ids, episode_ids, block_ids

    def enforce(self, scope: Scope | None, now: datetime, *, dry_run: bool = False) -> dict[str, int]:
        """Erase what is due now (dry_run: only count it). Returns the erasure's counts (memories,
        episodes, blocks, vectors, keyword entries, ...); {} when nothing was due."""
        memory_ids, episode_ids, block_ids = self.due(scope, now)
        if not (memory_ids or episode_ids or block_ids):
            return {}
        if dry_run:
            return {"memories": len(memory_ids), "episodes": len(episode_ids), "blocks": len(block_ids)}
        counts = self.store.retention.erase(
            self.store.erase, (memory_ids, episode_ids, block_ids), scope=scope, actor=ACTOR
        )
        return {key: value for key, value in counts.items() if value}
