"""Maintenance: erase what retention says is due (lifecycle/retention.py), apply the forgetting
curve, archive what was forgotten (or summarize it with the LM), bring back archived memories
that were recalled, and consolidate near-duplicates.

One run is idempotent: run twice with nothing recalled or written in between, the second run
changes nothing. Forgotten memories are archived, never deleted: only retention (a policy or
an expiry someone set) and `delete` erase.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from dspy_memory.config import LifecycleConfig, LifecycleSettings, WriteConfig
from dspy_memory.errors import InvalidInputError, WriteProgramError
from dspy_memory.lifecycle.consolidate import apply_consolidation, cluster_view, plan_consolidation
from dspy_memory.lifecycle.curve import Forgetting, days_since
from dspy_memory.lifecycle.retention import Retention
from dspy_memory.ops import FACT_KINDS
from dspy_memory.reports import MaintenanceReport
from dspy_memory.retention_settings import RetentionSettings
from dspy_memory.store import Store
from dspy_memory.store.lifecycle import DecayRow
from dspy_memory.store.settings import ScopeKey, lookup_order
from dspy_memory.types import LMUsage, MemoryRecord, Scope
from dspy_memory.util.lm import lm_name, run_program, short_error
from dspy_memory.util.progress import OnProgress
from dspy_memory.util.progress import report as tell
from dspy_memory.util.timeutil import from_db, now_db, utcnow

logger = logging.getLogger("dspy_memory")

ACTOR = "maintain"
_PAGE = 2000
_ARCHIVE_BATCH = 500
_SIMILARITY_BLOCK = 512
# What consolidation may merge: facts the write path wrote, never raw turns or profiles.
MERGEABLE_KINDS = tuple(kind for kind in FACT_KINDS if kind != "profile")
Forgotten = list[tuple[DecayRow, dict[str, Any]]]  # rows below their threshold, with the curve's numbers


def _key(scope: Scope) -> ScopeKey:
    return (scope.user_id, scope.agent_id, scope.run_id)


class Maintainer:
    def __init__(
        self,
        store: Store,
        embedder: Any,
        config: LifecycleConfig,
        write: WriteConfig,
        *,
        flush_recalls: Any = None,
        program: Any = None,
        retention: Retention | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.write = write
        self.forgetting = Forgetting(base_days=config.base_days, importance_boost=config.importance_boost)
        self._flush_recalls = flush_recalls or (lambda: None)
        self._program = program
        self.retention_rules = retention or Retention(store, RetentionSettings())

    # -- settings per scope ----------------------------------------------------------------

    def settings_for(self, scope: ScopeKey) -> LifecycleSettings:
        """The config's settings, overridden by those stored for the scope: its own, else its
        user's (user_id only), else its agent's (agent_id only)."""
        for key in lookup_order(scope):
            stored = self.store.lifecycle_settings.get(key)
            if stored is not None:
                return LifecycleSettings.model_validate({**self._defaults(), **stored})
        return LifecycleSettings.model_validate(self._defaults())

    def _defaults(self) -> dict[str, Any]:
        return self.config.model_dump(include=set(LifecycleSettings.model_fields))

    def save_settings(
        self, scope: Scope, changes: dict[str, Any], *, reset: bool = False
    ) -> LifecycleSettings:
        """Store settings for exactly `scope` (validated; `reset` first forgets stored ones)."""
        unknown = set(changes) - set(LifecycleSettings.model_fields)
        if unknown:
            raise InvalidInputError(
                f"unknown lifecycle setting(s) {sorted(unknown)}; choose from {sorted(LifecycleSettings.model_fields)}"
            )
        key = _key(scope)
        stored = {} if reset else dict(self.store.lifecycle_settings.get(key) or {})
        stored.update(changes)
        try:
            LifecycleSettings.model_validate({**self._defaults(), **stored})
        except ValueError as exc:
            raise InvalidInputError(f"bad lifecycle settings: {exc}") from None
        self.store.lifecycle_settings.save(key, stored or None)
        return self.settings_for(key)

    # -- the curve -------------------------------------------------------------------------

    def retention(self, row: DecayRow, now: datetime) -> tuple[float, dict[str, Any]]:
        """R now, with the numbers a DECAY event records."""
        days = days_since(from_db(row.recalled_at), now)
        stability = self.forgetting.stability(
            recalls=row.recalls, strength=row.strength, importance=row.importance
        )
        value = self.forgetting.retention(
            recalls=row.recalls, strength=row.strength, importance=row.importance, days_since_recall=days
        )
        numbers = {
            "retention": round(value, 6),
            "stability_days": round(stability, 3),
            "days_since_recall": round(days, 3),
            "recalls": row.recalls,
            "strength": row.strength,
            "importance": row.importance,
        }
        return value, numbers

    def _protected(self, row: DecayRow, settings: LifecycleSettings, now: datetime) -> bool:
        created = from_db(row.created_at)
        young = created is not None and (now - created).total_seconds() < settings.min_age_days * 86400
        recalled = settings.keep_recalls is not None and row.recalls >= settings.keep_recalls
        return young or recalled or row.importance >= settings.keep_importance

    def overview(self) -> dict[str, Any]:
        """Retention of the memories that can decay (active, not pinned nor protected), for
        `stats()`: quantiles, and how many are below their scope's threshold now."""
        now = utcnow()
        values, below, settings = [], 0, {}
        for row in self._rows(None, archived=False):
            if row.scope not in settings:
                settings[row.scope] = self.settings_for(row.scope)
            value, _ = self.retention(row, now)
            values.append(value)
            below += value < settings[row.scope].archive_below
        quantiles = np.quantile(values, [0.1, 0.5, 0.9]).round(4).tolist() if values else [None] * 3
        return {
            "decaying_memories": len(values),
            "retention_p10": quantiles[0],
            "retention_median": quantiles[1],
            "retention_p90": quantiles[2],
            "below_threshold": int(below),
        }

    # -- a run -----------------------------------------------------------------------------

    def run(
        self,
        scope: Scope | None,
        *,
        lm: Any = None,
        consolidate: bool = False,
        dry_run: bool = False,
        on_progress: OnProgress | None = None,
    ) -> MaintenanceReport:
        """Maintain one scope (read as `search` reads it) or, None, every scope: first erase
        what retention says is due, then the forgetting curve and consolidation. `on_progress`
        gets the scopes done of those with work (archiving, the LM's summaries and merges) after
        each, with what was erased, archived, summarized and merged so far."""
        started = time.monotonic()
        report = MaintenanceReport(started_at=utcnow(), dry_run=dry_run)
        tell(on_progress, 0, None, "scopes")  # the bar shows up while retention and the scan run
        report.erased = self.retention_rules.enforce(scope, utcnow(), dry_run=dry_run)
        self._flush_recalls()  # recalls made so far count
        now = utcnow()
        settings: dict[ScopeKey, LifecycleSettings] = {}

        def settings_of(key: ScopeKey) -> LifecycleSettings:
            if key not in settings:
                settings[key] = self.settings_for(key)
            return settings[key]

        self._restore_recalled(scope, now, settings_of, report, dry_run)
        forgotten = self._forgotten(scope, now, settings_of, report)
        report.decayed = sum(len(rows) for rows in forgotten.values())
        merging = consolidate and lm is not None and not dry_run
        # Scope by scope (each is on its own), so the bar counts what takes the time: LM calls, writes.
        keys = list(dict.fromkeys([*forgotten, *(self.store.scopes(scope) if merging else [])]))

        def progress(done: int) -> None:
            counts = {"archived": report.archived, "summarized": report.summarized, "merged": report.merged}
            tell(on_progress, done, len(keys), "scopes", erased=report.erased.get("memories", 0), **counts)

        progress(0)
        for done, key in enumerate(keys, 1):
            rows = forgotten.get(key, [])
            if rows and settings_of(key).strategy == "summarize" and lm is not None and not dry_run:
                rows = self._summarize(key, rows, settings_of(key), lm, report)
            if rows and dry_run:
                report.archived += len(rows)
            elif rows:
                self._archive(rows, settings_of(key).archive_below, report)
            if merging:
                self._merge_duplicates(key, lm, report)
            progress(done)
        report.scopes = len(settings)
        report.duration_s = round(time.monotonic() - started, 4)
        logger.info(
            "maintain: %d scope(s), %d memory rows erased, %d archived, %d restored, %d merged, "
            "%d summarized in %.2fs",
            report.scopes,
            report.erased.get("memories", 0),
            report.archived,
            report.restored,
            report.merged,
            report.summarized,
            report.duration_s,
        )
        return report

    def _archive(self, rows: Forgotten, threshold: float, report: MaintenanceReport) -> None:
        for start in range(0, len(rows), _ARCHIVE_BATCH):  # short transactions: writers wait less
            batch = rows[start : start + _ARCHIVE_BATCH]
            report.archived += self.store.archive(
                [(row.row_id, {**numbers, "threshold": threshold}) for row, numbers in batch],
                actor=ACTOR,
                reason="forgotten",
                at=now_db(),
            )

    def _rows(self, scope: Scope | None, *, archived: bool) -> Any:
        after = 0
        while True:
            rows = self.store.decay_rows(
                after_row_id=after,
                limit=_PAGE,
                protected_kinds=self.config.protected_kinds,
                archived=archived,
                scope=scope,
            )
            yield from rows
            if len(rows) < _PAGE:
                return
            after = rows[-1].row_id

    def _restore_recalled(
        self, scope: Scope | None, now: datetime, settings_of: Any, report: MaintenanceReport, dry_run: bool
    ) -> None:
        """Archived memories recalled since (get, include_archived) whose retention is back
        above the threshold are active again."""
        for row in self._rows(scope, archived=True):
            if row.archived_at is None or row.recalled_at <= row.archived_at:
                continue
            value, numbers = self.retention(row, now)
            if value < settings_of(row.scope).archive_below:
                continue
            report.restored += 1
            if not dry_run:
                self.store.restore(
                    row.id, scope=None, actor=ACTOR, reason="recalled", metadata=numbers, recall=False
                )

    def _forgotten(
        self, scope: Scope | None, now: datetime, settings_of: Any, report: MaintenanceReport
    ) -> dict[ScopeKey, Forgotten]:
        forgotten: dict[ScopeKey, Forgotten] = defaultdict(list)
        for row in self._rows(scope, archived=False):
            report.examined += 1
            chosen = settings_of(row.scope)
            value, numbers = self.retention(row, now)
            if value >= chosen.archive_below:
                continue
            if self._protected(row, chosen, now):
                report.kept += 1
                continue
            forgotten[row.scope].append((row, numbers))
        return forgotten

    # -- with the LM -----------------------------------------------------------------------

    @property
    def program(self) -> Any:
        if self._program is None:
            from dspy_memory.programs.consolidate import MemoryConsolidator

            self._program = MemoryConsolidator()
        return self._program

    def _decide(self, cluster: Sequence[MemoryRecord], lm: Any, report: MaintenanceReport) -> Any:
        """The program's decisions about a cluster, or None when it failed (logged)."""
        inputs = {"memories": cluster_view(cluster), "today": f"{utcnow():%Y-%m-%d}"}
        try:
            prediction, usage = run_program(
                self.program,
                lm,
                inputs,
                max_attempts=self.write.max_attempts,
                timeout_s=self.write.lm_timeout_s,
            )
        except WriteProgramError as exc:
            report.usage = report.usage + (exc.usage if isinstance(exc.usage, LMUsage) else LMUsage())
            report.errors.append(short_error(exc))
            return None
        report.usage = report.usage + usage
        return prediction.decisions

    def _apply(self, cluster: Sequence[MemoryRecord], lm: Any, report: MaintenanceReport) -> set[str]:
        """Ask, check and apply; returns the ids of the memories consolidated."""
        decisions = self._decide(cluster, lm, report)
        if decisions is None:
            return set()
        planned, refused = plan_consolidation(
            decisions, cluster, max_content_chars=self.write.max_content_chars
        )
        metadata = {"program": type(self.program).__name__, "lm": lm_name(lm)}
        created, conflicts = apply_consolidation(
            self.store, self.embedder, planned, actor=ACTOR, metadata=metadata
        )
        report.refused += refused + conflicts
        done: set[str] = set()
        failed = {rejection.index for rejection in conflicts}
        for index, plan in enumerate(planned):
            if index in failed:
                continue
            done |= {record.id for record in plan.sources}
            if plan.action == "MERGE":
                report.merged += len(plan.sources)
                report.merges += 1
            else:
                report.summarized += len(plan.sources)
                report.summaries += 1
        return done

    def _summarize(
        self, key: ScopeKey, rows: Forgotten, settings: LifecycleSettings, lm: Any, report: MaintenanceReport
    ) -> Forgotten:
        """Forgotten memories of a scope, oldest first, `summarize_group` at a time, to the LM;
        returns those it did not condense (they are archived as usual)."""
        ordered = sorted(rows, key=lambda pair: pair[0].recalled_at)
        left = []
        for start in range(0, len(ordered), settings.summarize_group):
            group = ordered[start : start + settings.summarize_group]
            records = (self.store.get_memory(row.id) for row, _ in group)
            cluster = [record for record in records if record is not None and record.status == "current"]
            done = self._apply(cluster, lm, report) if len(cluster) >= 2 else set()
            left += [(row, numbers) for row, numbers in group if row.id not in done]
        return left

    def _merge_duplicates(self, key: ScopeKey, lm: Any, report: MaintenanceReport) -> None:
        pool = self.store.consolidation_pool(key, kinds=MERGEABLE_KINDS, limit=5000)
        for cluster in near_duplicates(pool, self.config.merge_similarity, self.config.max_cluster_size)[
            : self.config.max_clusters
        ]:
            self._apply(cluster, lm, report)


def near_duplicates(
    pool: Sequence[tuple[MemoryRecord, np.ndarray]], similarity: float, max_size: int
) -> list[list[MemoryRecord]]:
    """Clusters (size >= 2, largest first) of memories linked by cosine similarity >=
    `similarity`, or by one subject and predicate with similarity >= `similarity` - 0.15
    (one slot said two ways). Single linkage, capped at `max_size` members each."""
    if len(pool) < 2:
        return []
    records = [record for record, _ in pool]
    vectors = np.stack([vector for _, vector in pool]).astype(np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors /= np.where(norms == 0, 1, norms)
    parent = list(range(len(records)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # Row blocks: the whole similarity matrix of 5,000 memories would take 100 MB.
    for start in range(0, len(records), _SIMILARITY_BLOCK):
        block = vectors[start : start + _SIMILARITY_BLOCK] @ vectors.T
        for row, j in zip(*np.nonzero(block >= similarity - 0.15)):
            i = start + int(row)
            if j <= i:
                continue
            same_slot = (
                records[i].subject is not None
                and records[i].predicate is not None
                and (records[i].subject, records[i].predicate) == (records[j].subject, records[j].predicate)
            )
            if block[row, j] >= similarity or same_slot:
                parent[find(i)] = find(int(j))
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(records)):
        groups[find(i)].append(i)
    clusters = [sorted(members)[:max_size] for members in groups.values() if len(members) >= 2]
    clusters.sort(key=len, reverse=True)
    return [[records[i] for i in members] for members in clusters]
