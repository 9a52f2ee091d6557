"""Reports that operations return: the file checked against the invariants (AuditReport),
maintenance, backups (BackupManifest, FileCheck) and the audit log (AuditEntry,
AuditVerification). Pydantic records; validation only, no behaviour."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from dspy_memory.ops import Rejection
from dspy_memory.types import LMUsage


class AuditReport(BaseModel):
    """What `Memory.check()` found: the file against the invariants. `ok` is True when SQLite's
    integrity check passes, every index holds one entry per memory row, no processed episode
    was left without a memory, no single-valued slot has two current facts, no memory was
    invalidated twice, and no episode was processed twice. Lists hold samples (ids)."""

    integrity: str
    rows: dict[str, int]
    index_mismatch: bool
    episodes: dict[str, int]
    episodes_lost: int
    lost_sample: list[str] = Field(default_factory=list)
    slots_with_several_current: list[dict[str, Any]] = Field(default_factory=list)
    invalidated_twice: list[str] = Field(default_factory=list)
    episodes_processed_twice: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.integrity == "ok"
            and not self.index_mismatch
            and self.episodes_lost == 0
            and not self.slots_with_several_current
            and not self.invalidated_twice
            and not self.episodes_processed_twice
        )


class MaintenanceReport(BaseModel):
    """What one `Memory.maintain()` run did (docs/lifecycle.md). Counts are memories: `decayed`
    fell below their scope's retention threshold this run; of those, `archived` were archived
    and `summarized` condensed into `summaries` new summary memories (and archived); `merged`
    near-duplicates were replaced by `merges` new memories; `restored` archived memories came
    back because they were recalled; `kept` fell below the threshold but a setting protects
    them (recalled often, important, young). `refused` lists consolidation decisions that were
    not applied, and why (reasons never quote memory content). `erased`: what retention erased
    first (docs/governance.md#retention): memory rows, episodes, blocks, vectors, keyword
    entries, ... (with dry_run, the memories, episodes and blocks that are due)."""

    scopes: int = 0
    examined: int = 0
    decayed: int = 0
    archived: int = 0
    kept: int = 0
    restored: int = 0
    merged: int = 0
    merges: int = 0
    summarized: int = 0
    summaries: int = 0
    refused: list[Rejection] = Field(default_factory=list)
    usage: LMUsage = Field(default_factory=LMUsage)
    errors: list[str] = Field(default_factory=list)
    erased: dict[str, int] = Field(default_factory=dict)
    dry_run: bool = False
    started_at: datetime
    duration_s: float = 0.0


class BackupManifest(BaseModel):
    """What `Memory.backup()` writes next to a backup, as `<backup>.manifest.json`
    (docs/governance.md): the file's sha256 and size, the schema and library versions, the
    embedder, rows per table and per index, and whether the file is encrypted. `verify_file`
    checks a backup against it."""

    format: Literal["dspy-memory-backup"] = "dspy-memory-backup"
    format_version: int = 1
    file: str
    sha256: str
    size: int
    schema_version: int
    library_version: str
    embedder: str | None = None
    dimension: int | None = None
    tables: dict[str, int]
    indexes: dict[str, int]
    encrypted: bool = False
    source: str | None = None
    created_at: datetime
    duration_s: float = 0.0


class FileCheck(BaseModel):
    """What `verify_file` found in a memory file or backup. `ok` when it opens with
    sqlite-vec (with the key, if encrypted), SQLite's integrity check passes, every index holds
    one entry per memory row, the schema version is one this library knows, and the manifest
    (when there is one) agrees with the file. `problems` says what failed, in words."""

    path: str
    problems: list[str] = Field(default_factory=list)
    integrity: str = ""
    schema_version: int = 0
    embedder: str | None = None
    dimension: int | None = None
    tables: dict[str, int] = Field(default_factory=dict)
    indexes: dict[str, int] = Field(default_factory=dict)
    sha256: str = ""
    manifest: str | None = None
    encrypted: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


class AuditEntry(BaseModel):
    """One entry of the hash-chained audit log (docs/governance.md, "The audit log"). The
    scope is only there as salted hashes; `counts`, `memory_ids` and `details` hold no content."""

    id: int
    at: datetime
    operation: str
    actor: str | None = None
    role: str
    pid: int
    host: str
    version: str
    request_id: str | None = None
    user_hash: str | None = None
    agent_hash: str | None = None
    run_hash: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    memory_ids: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    prev_hash: str
    hash: str


class AuditProblem(BaseModel):
    """A row the chain does not vouch for: `kind` is changed, removed, reordered or head."""

    id: int
    kind: Literal["changed", "removed", "reordered", "head"]
    detail: str


class AuditVerification(BaseModel):
    """What `Memory.verify_audit()` found: `ok` when every entry hashes to its stored hash,
    links to the one before it, ids have no gaps and the last one is the recorded head."""

    entries: int
    head_id: int | None = None
    head_hash: str | None = None
    problems: list[AuditProblem] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_problem(self) -> AuditProblem | None:
        return self.problems[0] if self.problems else None


class FeedbackOptimization(BaseModel):
    """What `Memory.learn_from_feedback()` (`dspy-memory optimize write --from-feedback`) did:
    how many feedback records became examples (train, dev, held out; `skipped`: why the others
    did not), the program in use and the first seed's compile on the held-out examples, the
    seed table (`summary`: mean [min, max] over seeds, the paired 95% interval, the verdict),
    and whether the compiled program was installed (`path`) and why."""

    program: str
    mode: str
    optimizer: str
    seeds: list[int]
    examples: dict[str, int]
    records: int
    skipped: dict[str, int] = Field(default_factory=dict)
    summary: dict[str, Any]
    installed: bool
    forced: bool = False
    path: str | None = None
    reason: str

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def in_use_score(self) -> float:
        """The program in use on the held-out feedback (0-100)."""
        return float(self.summary["baseline"])

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def compiled_score(self) -> float:
        """The first seed's compile (the one installed) on the held-out feedback (0-100)."""
        return float(self.summary["runs"][0])


class IngestReport(BaseModel):
    """What `Memory.ingest()` (`dspy-memory ingest`) did with a conversation file (docs/ingest.md):
    `messages` read from it; of those, `stored` new now, `already` there from an earlier run
    (done, or being processed by another writer) and `resumed` (there, left unfinished by an
    interrupted run, processed now); `memories` written or restated (raw turns; with an LM, the
    operations applied); `failed` episodes whose LM write failed (kept as raw turns, marked for
    `reprocess()`); `refused` records that could not be read, with where and why (the first
    MAX_REFUSALS; `refused_count` counts them all). `interrupted`: stopped before the end (Ctrl-C,
    or --strict at a refused record): run the same ingest again to go on."""

    source: str
    format: str
    mode: str
    messages: int = 0
    conversations: int = 0
    stored: int = 0
    already: int = 0
    resumed: int = 0
    memories: int = 0
    failed: int = 0
    refused: list[dict[str, str]] = Field(default_factory=list)
    refused_count: int = 0
    errors: list[str] = Field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
