"""The Memory facade's lifecycle methods (docs/lifecycle.md): maintain, restore, pin and the
compaction settings of a scope. Mixed into Memory; like the rest of the facade, they validate
and delegate."""

from __future__ import annotations

import logging
from typing import Any

from typing_extensions import Unpack

from dspy_memory.config import LifecycleSettings
from dspy_memory.errors import InvalidInputError, ScopeError
from dspy_memory.reports import MaintenanceReport
from dspy_memory.scopes import OwnerArgs
from dspy_memory.types import MemoryRecord

logger = logging.getLogger("dspy_memory")


class LifecycleMethods:
    # Provided by Memory.
    _maintainer: Any
    _background: Any
    _retriever: Any
    _scopes: Any
    store: Any
    config: Any

    def _first_use(self) -> None: ...
    def _scope(self, method: str, args: dict[str, Any], *, exact: bool = False) -> Any: ...
    def _owned(self, method: str, memory_id: Any, args: dict[str, Any]) -> tuple[str, Any]: ...
    def _lm_for(self, infer: bool | None) -> Any: ...

    def maintain(
        self, *, consolidate: bool = False, dry_run: bool = False, **owner: Unpack[OwnerArgs]
    ) -> MaintenanceReport:
        """Apply the forgetting curve to a scope (or all_scopes=True): archive memories whose
        retention fell below the scope's threshold (DECAY events; `restore()` brings one back),
        or summarize them with the LM (strategy "summarize"); bring back archived memories that
        were recalled. consolidate=True: the LM also merges near-duplicates. Pinned memories,
        profiles and core blocks never decay. Running it twice changes nothing the second time."""
        self._first_use()
        if not owner.get("all_scopes") and all(
            owner.get(key) is None for key in ("user_id", "agent_id", "run_id")
        ):
            raise ScopeError(
                "maintain() needs a scope: pass user_id= (agent_id=, run_id=) or all_scopes=True"
            )
        if not self.config.track_access:
            # evals/lifecycle.py: without recall counts, maintenance archives the facts in use.
            logger.warning(
                "maintain() on a Memory with track_access=False: recalls made through it are not counted, "
                "so memories in use may be archived"
            )
        where = self._scopes.owner("maintain", owner)
        lm = self._lm_for(True) if consolidate else self._lm_for(None)
        return self._maintainer.run(where, lm=lm, consolidate=consolidate, dry_run=dry_run)

    def restore(self, memory_id: str, **owner: Unpack[OwnerArgs]) -> MemoryRecord:
        """Make an archived memory active again (a RESTORE event); it counts as a recall. Archiving
        it was a mistake: a "restore" feedback record keeps that (docs/feedback.md)."""
        memory_id, where = self._owned("restore", memory_id, owner)
        record, _ = self.store.restore(memory_id, scope=where, actor="user", feedback=True)
        return self._retriever.with_retention(record)

    def pin(self, memory_id: str, pinned: bool = True, **owner: Unpack[OwnerArgs]) -> MemoryRecord:
        """Pin a memory so it never decays (pinned=False: unpin); an archived one is restored."""
        memory_id, where = self._owned("pin", memory_id, owner)
        if not isinstance(pinned, bool):
            raise InvalidInputError(f"pinned must be True or False, not {type(pinned).__name__}")
        return self._retriever.with_retention(self.store.set_pinned(memory_id, scope=where, pinned=pinned))

    def lifecycle_settings(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        reset: bool = False,
        **settings: Any,
    ) -> LifecycleSettings:
        """The compaction settings of a scope (thresholds of age, recalls and importance;
        strategy "archive" or "summarize"), stored in the file when given, e.g.
        `lifecycle_settings(user_id="ada", min_age_days=90, strategy="summarize")`; reset=True
        forgets the stored ones first. `maintain()` follows them; see LifecycleSettings."""
        where = self._scope(
            "lifecycle_settings", dict(user_id=user_id, agent_id=agent_id, run_id=run_id), exact=True
        )
        if settings or reset:
            return self._maintainer.save_settings(where, settings, reset=reset)
        return self._maintainer.settings_for((where.user_id, where.agent_id, where.run_id))

    def maintenance_reports(self) -> list[MaintenanceReport]:
        """The reports of the scheduled maintenance runs so far (`maintenance_every`), oldest
        first (the last 100)."""
        return list(self._background.periodic_results)

    def _scheduled_maintenance(self) -> MaintenanceReport:
        report = self._maintainer.run(None, lm=self._lm_for(None))
        logger.info("scheduled maintenance: %s", report.model_dump(exclude={"refused"}))
        return report
