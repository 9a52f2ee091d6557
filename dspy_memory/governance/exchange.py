"""Export and import (docs/governance.md, "Export and import"): a scope's memory, with every
version, its sources, episodes, entities, events, links, blocks (profiles are blocks), lifecycle
settings and retention policies, write runs (with what each saw and did), feedback and,
optionally, its vectors, in one JSONL file (governance/exchange_format.py) that both backends
write and read alike; the SQL is in store/exchange.py.

Import is atomic (one transaction) and idempotent (rows already held are counted, not written
again); the file is checked whole before anything is written. What expired (`expires_at` at or
before now) is neither exported nor imported, nor what quotes it (`without_expired`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import dspy_memory
from dspy_memory.governance import exchange_format as fmt
from dspy_memory.governance.exchange_format import ExportFileError
from dspy_memory.governance.redact import NO_REDACTION, Redactor
from dspy_memory.store import exchange as sql
from dspy_memory.store.exchange_import import import_rows
from dspy_memory.types import Scope
from dspy_memory.util.text import content_hash, normalize_name
from dspy_memory.util.timeutil import now_db

if TYPE_CHECKING:
    from dspy_memory.embed import Embedder
    from dspy_memory.store import Store

REEMBED = ("auto", "always", "never")


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
    store: Store, path: str | os.PathLike[str], scope: Scope | None, *, embeddings: bool
) -> ExportReport:
    """Write the records of `scope` (None: every scope) of `store` to `path`."""
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
    written = fmt.write(path, header, records)
    # A receipt holds no content and no file name (it may name the person): counts and hashes.
    store.audit_log.receipt(
        "export",
        scope=scope,
        counts=written.counts,
        details={"format_version": fmt.FORMAT_VERSION, "sha256": written.sha256, "embeddings": embeddings},
    )
    return ExportReport(written.path, written.sha256, written.counts, written.bytes, embeddings, expired)


def import_file(
    store: Store,
    embedder: Embedder,
    path: str | os.PathLike[str],
    *,
    reembed: str = "auto",
    redact: Redactor = NO_REDACTION,
) -> ImportReport:
    """Check the file whole, then write what the store lacks in one transaction. With `redact`
    (the store's MemoryConfig.redact) secrets in the file's text are replaced as on any add."""
    if reembed not in REEMBED:
        raise ValueError(f"reembed must be one of {', '.join(REEMBED)}, not {reembed!r}")
    header, records, digest = fmt.read(path)
    _check_references(os.fspath(path), records)
    redacted = _redact(records, redact)
    odd = [
        record["memory_id"]
        for record in records["vector"]
        if header.embedder is None or record["dim"] != header.embedder.dim
    ]
    if odd:
        raise ExportFileError(
            f"{os.fspath(path)}: the vector of memory {odd[0]!r} does not have the header's embedder dimension; "
            "nothing was imported"
        )
    # An export taken before something expired brings none of it back after.
    rows, expired = without_expired(
        {kind: [fmt.to_row(record) for record in found] for kind, found in records.items()}, now_db()
    )
    keys = [(row["id"], row["version"]) for row in rows["memory"]]
    held = sql.held_memory_versions(store, keys)
    wanted = [key for key in keys if key not in held]
    name, dim = embedder.name, embedder.dim
    from_file = {(row["memory_id"], row["version"]): row["embedding"] for row in rows.pop("vector")}
    same = header.embedder is not None and (header.embedder.name, header.embedder.dim) == (name, dim)
    usable = same and all(key in from_file for key in wanted)
    # A vector of text that held a secret encodes the secret: computed here from the redacted text.
    compute = [key for key in wanted if reembed == "always" or not usable or key in redacted]
    if compute and reembed == "never":
        why = (
            "holds no vectors"
            if not from_file
            else f"was embedded with {header.embedder.name!r} ({header.embedder.dim} dimensions)"
            if header.embedder and not same
            else "lacks vectors of some memories"
            if not usable
            else f"holds {len(redacted)} memory versions whose text redaction changed"
        )
        raise ExportFileError(
            f"{os.fspath(path)} {why} and this store embeds with {name!r} ({dim} dimensions); "
            "import with reembed='auto' or 'always' to compute them here; nothing was imported"
        )
    by_key = {row_key(row): row["content"] for row in rows["memory"]}
    texts = sorted({by_key[key] for key in compute})
    embedded = dict(zip(texts, embedder.embed(texts))) if texts else {}
    computed = set(compute)
    vectors: dict[tuple[str, int], np.ndarray] = {
        key: embedded[by_key[key]] if key in computed else from_file[key] for key in wanted
    }
    reembedded = len(compute)
    with store.transaction():  # the receipt commits with the rows, or neither
        counts = import_rows(store, rows, vectors)
        store.audit_log.receipt(
            "import",
            scope=None if header.scope is None else Scope.model_validate(header.scope),
            counts={kind: new for kind, (new, _) in counts.items() if new},
            details={
                "format_version": header.format_version,
                "sha256": digest,
                "already_present": sum(held for _, held in counts.values()),
                "expired": sum(expired.values()),
                "reembedded": reembedded,
            },
        )
    return ImportReport(
        os.fspath(path),
        digest,
        {kind: new for kind, (new, _) in counts.items()},
        {kind: held for kind, (_, held) in counts.items()},
        reembedded,
        name,
        expired,
    )


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


def without_expired(
    rows: Mapping[str, list[dict[str, Any]]], now: str
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """({record type: rows} without what expired by `now` (a db time), {record type: how many
    were left out}), for export and import alike: an export holds no memory or episode reads no
    longer return, and importing an export taken before something expired does not bring it back.

    Left out: the memories any version of which expired (all versions: reads hide a memory's
    events and feedback by id, and maintain() erases it whole), the episodes that expired, the
    records that quote or link to them (events, feedback, sources, links, turn contexts,
    vectors), and the entities only those memories name (an entity's name is their content).
    Write runs and what they saw and did stay: they hold ids, not content."""

    def due(kind: str) -> set[str]:
        return {row["id"] for row in rows[kind] if row["expires_at"] is not None and row["expires_at"] <= now}

    gone = {"memory": due("memory"), "episode": due("episode")}
    if not any(gone.values()):
        return dict(rows), {}
    kept = {
        kind: [
            row for row in found if not any(row[field] in gone[of] for field, of in _QUOTING.get(kind, ()))
        ]
        for kind, found in rows.items()
    }

    def named(memories: list[dict[str, Any]]) -> set[str]:
        return {row[end] for row in memories for end in ("subject_id", "object_id") if row[end] is not None}

    expired_memories = [row for row in rows["memory"] if row["id"] in gone["memory"]]
    only_theirs = named(expired_memories) - named(kept["memory"])
    kept["entity"] = [row for row in kept["entity"] if row["id"] not in only_theirs]
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


def _redact(records: dict[str, list[dict[str, Any]]], redact: Redactor) -> set[tuple[str, int]]:
    """Redact the records' text in place, keeping the derived columns true to it (a memory's
    content hash, an entity's normalized name); the memory versions whose content changed."""
    changed: set[tuple[str, int]] = set()
    if not redact:
        return changed
    for kind, fields in _TEXT.items():
        for record in records[kind]:
            before = {name: record.get(name) for name in fields}
            for name in fields:
                record[name] = redact.optional(record.get(name))
            for name in _JSON.get(kind, ()):
                record[name] = redact.json(record[name])
            if kind == "memory" and record["content"] != before["content"]:
                record["content_hash"] = content_hash(record["content"])
                changed.add((record["id"], record["version"]))
            if kind == "entity" and record["name"] != before["name"]:
                record["normalized_name"] = normalize_name(record["name"])
    return changed


def row_key(row: dict[str, Any]) -> tuple[str, int]:
    return row["id"], row["version"]


def _check_references(path: str, records: dict[str, list[dict[str, Any]]]) -> None:
    """An export holds what its records name: a record naming a missing one is refused here
    (before the database would refuse it half-way)."""
    entities = {record["id"] for record in records["entity"]}
    episodes = {record["id"] for record in records["episode"]}
    memories = {record["id"] for record in records["memory"]}
    versions = {(record["id"], record["version"]) for record in records["memory"]}
    blocks = {record["id"] for record in records["block"]}
    runs = {record["uid"] for record in records["write_run"] if record["uid"] is not None}
    names = {
        "memory": [(end, record.get(end), entities) for record in records["memory"] for end in ("subject_id", "object_id")],
        "memory_source": [
            ref for record in records["memory_source"]
            for ref in (("memory_id", record["memory_id"], memories), ("episode_id", record["episode_id"], episodes))
        ],
        "memory_link": [
            ref for record in records["memory_link"]
            for ref in (("memory_id", record["memory_id"], memories), ("linked_id", record["linked_id"], memories))
        ],
        "turn_context": [
            ref for record in records["turn_context"]
            for ref in (("memory", (record["memory_id"], record["version"]), versions),
                        ("episode_id", record["episode_id"], episodes))
        ],
        "vector": [("memory", (record["memory_id"], record["version"]), versions) for record in records["vector"]],
        "block_version": [("block_id", record["block_id"], blocks) for record in records["block_version"]],
        # What a run saw and did comes with its run; a feedback record with its memory (its
        # write_run_id may name a run of a wider scope, which a scope's export leaves out).
        "write_run_candidate": [("write_run_id", r["write_run_id"], runs) for r in records["write_run_candidate"]],
        "write_run_op": [("write_run_id", r["write_run_id"], runs) for r in records["write_run_op"]],
        "feedback": [("memory_id", r["memory_id"], memories) for r in records["feedback"]],
    }  # fmt: skip
    for kind, refs in names.items():
        for field, value, known in refs:
            if value is not None and value not in known:
                raise ExportFileError(
                    f"{path}: a {kind} record names {field} {value!r}, which the file does not hold; "
                    "nothing was imported"
                )
