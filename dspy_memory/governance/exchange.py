"""Export and import (docs/governance.md, "Export and import"): a scope's memory, with every
version, its sources, episodes, entities, events, links, blocks (profiles are blocks), lifecycle
settings and retention policies, write runs (with what each saw and did), feedback and,
optionally, its vectors, in one JSONL file (governance/exchange_format.py) that both backends
write and read alike; the SQL is in store/exchange.py. Import is governance/exchange_import.py.

Export streams the records it read to the file. Import is atomic (one transaction) and
idempotent (rows already held are counted, not written again); the file is checked whole before
anything is written. What expired (`expires_at` at or before now) is neither exported nor
imported, nor what quotes it (`Expiry`).
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import dspy_memory
from dspy_memory.governance import exchange_format as fmt
from dspy_memory.governance.files import staged
from dspy_memory.governance.redact import Redactor
from dspy_memory.store import exchange as sql
from dspy_memory.types import Scope
from dspy_memory.util.progress import OnProgress, report
from dspy_memory.util.text import content_hash, normalize_name
from dspy_memory.util.timeutil import now_db

if TYPE_CHECKING:
    from dspy_memory.store import Store

REEMBED = ("auto", "always", "never")
PROGRESS_EVERY = 1000  # records between two reports to an `on_progress`


@dataclass(frozen=True)
class ExportReport:
    path: str
    sha256: str  # over the record lines (the trailer's): equal for equal data
    counts: dict[str, int]  # records per type
    bytes: int
    embeddings: bool
    expired: dict[str, int]  # records per type left out: expired, or quoting what did

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ImportReport:
    path: str
    sha256: str
    new: dict[str, int]  # records per type written now
    present: dict[str, int]  # records per type the store held already (skipped)
    reembedded: int  # memory rows whose vector was computed here (not taken from the file)
    embedder: str  # the embedder of the vectors written
    expired: dict[str, int]  # records per type left out: expired by now, or quoting what did

    @property
    def changed(self) -> bool:
        return any(self.new.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}


def export_scope(
    store: Store,
    path: str | os.PathLike[str],
    scope: Scope | None,
    *,
    embeddings: bool,
    on_progress: OnProgress | None = None,
) -> ExportReport:
    """Write the records of `scope` (None: every scope) of `store` to `path`; `on_progress` gets
    the records written of the total."""
    report(on_progress, 0, None, "records")  # the bar shows while the scope is read
    exported_at = now_db()
    read, schema_version = sql.read_scope(store, scope, embeddings=embeddings)
    found, expired = without_expired(read, exported_at)
    embedder = store.embedder_info()
    header = {
        "format": fmt.FORMAT,
        "format_version": fmt.FORMAT_VERSION,
        "schema_version": schema_version,
        "library_version": dspy_memory.__version__,
        "embedder": None if embedder is None else {"name": embedder[0], "dim": embedder[1]},
        "embeddings": embeddings,
        "scope": None if scope is None else scope.model_dump(exclude_none=True),
        "exported_at": exported_at,
    }
    records = (fmt.to_record(kind, row) for kind in fmt.RECORD_TYPES for row in found.get(kind, []))
    counts = {kind: len(rows) for kind, rows in found.items()}
    written = write(path, header, records, counts, on_progress=on_progress)
    # A receipt holds no content and no file name (it may name the person): counts and hashes.
    store.audit_log.receipt(
        "export",
        scope=scope,
        counts=written.counts,
        details={"format_version": fmt.FORMAT_VERSION, "sha256": written.sha256, "embeddings": embeddings},
    )
    return ExportReport(written.path, written.sha256, written.counts, written.bytes, embeddings, expired)


@dataclass(frozen=True)
class Written:
    path: str
    sha256: str  # over the record lines, as in the trailer
    counts: dict[str, int]
    bytes: int


def write(
    path: str | os.PathLike[str],
    header: dict[str, Any],
    records: Iterable[Mapping[str, Any]],
    counts: Mapping[str, int],
    *,
    on_progress: OnProgress | None = None,
) -> Written:
    """Write header, records and trailer to a temporary file next to `path`, then move it into
    place: a reader never sees half an export. The records are streamed to the file, so the
    header (which comes first) takes `counts`, the records of each type they hold."""
    path = os.fspath(path)
    counts = {kind: count for kind, count in sorted(counts.items()) if count}
    total, written, found, digest = sum(counts.values()), 0, Counter[str](), hashlib.sha256()
    with staged(path, "partial") as temporary:
        with open(temporary, "wb") as raw:
            # mtime=0 and no name: the gzip wrapper adds no bytes of its own that vary.
            out = (
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="", compresslevel=6)
                if path.endswith(".gz")
                else raw
            )
            out.write(fmt.dumps({**header, "record": "header", "counts": counts}) + b"\n")
            report(on_progress, 0, total, "records")
            for record in records:
                line = fmt.dumps(record) + b"\n"
                digest.update(line)
                out.write(line)
                found[record["record"]] += 1
                written += 1
                if written % PROGRESS_EVERY == 0:
                    report(on_progress, written, total, "records")
            if dict(sorted(found.items())) != counts:  # a bug here, never the caller's data
                raise RuntimeError(f"export wrote {dict(found)} records, its header says {counts}")
            out.write(
                fmt.dumps({"record": "trailer", "counts": counts, "sha256": digest.hexdigest()}) + b"\n"
            )
            if out is not raw:
                out.close()
        os.replace(temporary, path)
    if written % PROGRESS_EVERY:
        report(on_progress, written, total, "records")
    return Written(path, digest.hexdigest(), counts, os.path.getsize(path))


# The fields by which a record names a memory or an episode it only exists for, and quotes or
# links to: it goes with that memory or episode when it expires (as maintain() erases it).
_QUOTING = {
    "memory": (("id", "memory"),),
    "episode": (("id", "episode"),),
    "turn_context": (("memory_id", "memory"), ("episode_id", "episode")),
    "memory_source": (("memory_id", "memory"), ("episode_id", "episode")),
    "memory_link": (("memory_id", "memory"), ("linked_id", "memory")),
    "memory_event": (("memory_id", "memory"),),
    "feedback": (("memory_id", "memory"),),
    "vector": (("memory_id", "memory"),),
}


class Expiry:
    """What expired by `now` (a db time), for export and import alike: an export holds no memory
    or episode reads no longer return, and importing an export taken before something expired
    does not bring it back. `see` every memory and episode record (or row), then `settle`;
    `left_out(record)` tells the records to leave out. Only ids are kept.

    Left out: the memories any version of which expired (all versions: reads hide a memory's
    events and feedback by id, and maintain() erases it whole), the episodes that expired, the
    records that quote or link to them (events, feedback, sources, links, turn contexts,
    vectors), and the entities only those memories name (an entity's name is their content).
    Write runs and what they saw and did stay: they hold ids, not content."""

    def __init__(self, now: str) -> None:
        self.now = now
        self.gone: dict[str, set[str]] = {"memory": set(), "episode": set()}
        self._named: set[tuple[str, str]] = set()  # (memory id, entity id) it names
        self._only_theirs: set[str] = set()

    def see(self, kind: str, row: Mapping[str, Any]) -> None:
        if kind not in self.gone:
            return
        if row["expires_at"] is not None and row["expires_at"] <= self.now:
            self.gone[kind].add(row["id"])
        if kind == "memory":
            ends = (row["subject_id"], row["object_id"])
            self._named.update((row["id"], end) for end in ends if end is not None)

    def settle(self) -> None:
        expired, kept = set[str](), set[str]()
        for memory, entity in self._named:
            (expired if memory in self.gone["memory"] else kept).add(entity)
        self._only_theirs, self._named = expired - kept, set()

    def __bool__(self) -> bool:
        return any(self.gone.values())

    def left_out(self, kind: str, row: Mapping[str, Any]) -> bool:
        if kind == "entity":
            return row["id"] in self._only_theirs
        return any(row[field] in self.gone[of] for field, of in _QUOTING.get(kind, ()))


def without_expired(
    rows: Mapping[str, list[dict[str, Any]]], now: str
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """({record type: rows} without what expired by `now` (see `Expiry`), {record type: how many
    were left out})."""
    expiry = Expiry(now)
    for kind in expiry.gone:
        for row in rows.get(kind, []):
            expiry.see(kind, row)
    expiry.settle()
    if not expiry:
        return dict(rows), {}
    kept = {kind: [row for row in found if not expiry.left_out(kind, row)] for kind, found in rows.items()}
    left_out = {kind: len(rows[kind]) - len(kept[kind]) for kind in rows}
    return kept, {kind: count for kind, count in left_out.items() if count}


# What a person or an LM wrote, per record type: redacted on import as add() and the write path
# redact it (docs/governance.md, "Secret redaction"); JSON values (metadata) string by string.
_TEXT = {
    "episode": ("content",),
    "memory": ("content",),
    "memory_event": ("old_content", "new_content", "reason"),
    "entity": ("name", "summary"),
    "block": ("value", "description"),
    "block_version": ("value", "reason"),
    "feedback": ("note",),
}
_JSON = {
    "episode": ("metadata",),
    "memory": ("metadata",),
    "memory_event": ("metadata",),
    "entity": ("metadata",),
    "feedback": ("expected",),
}


def redact_record(record: dict[str, Any], redact: Redactor) -> bool:
    """Redact a record's text in place, keeping the derived columns true to it (a memory's
    content hash, an entity's normalized name); whether a memory's content changed."""
    kind = record["record"]
    if not redact or kind not in _TEXT:
        return False
    before = {name: record.get(name) for name in _TEXT[kind]}
    for name in _TEXT[kind]:
        record[name] = redact.optional(record.get(name))
    for name in _JSON.get(kind, ()):
        record[name] = redact.json(record[name])
    if kind == "entity" and record["name"] != before["name"]:
        record["normalized_name"] = normalize_name(record["name"])
    if kind == "memory" and record["content"] != before["content"]:
        record["content_hash"] = content_hash(record["content"])
        return True
    return False
