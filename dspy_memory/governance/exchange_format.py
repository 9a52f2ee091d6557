"""The export file (docs/governance.md, "Export and import"): JSON Lines, gzipped when the name
ends in .gz. Line 1 is a header, then one typed record per line, the last line a trailer with
the count of each record type and a sha256 over the record lines. Every record is one JSON
object, keys sorted, no spaces, UTF-8: the same rows give the same bytes (export streams them
out with governance/exchange.py's `write`).

Reading streams the file, never holding it whole, in two passes: `check` checks everything
before anything is written (the header's format name and version; the trailer: present, so the
file is complete; counts; checksum; every record against its type in `RECORD_MODELS`, unknown
types and fields refused) and hands each record to the caller, who keeps what it needs of it
(governance/exchange_import.py: ids); `records` reads the checked file again to write it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import zlib
from collections import Counter
from collections.abc import Callable, Container, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.ops import WriteAction
from dspy_memory.scopes import ScopeArgs
from dspy_memory.types import EPISODE_SOURCES, FEEDBACK_SOURCES, FEEDBACK_VERDICTS, MEMORY_KINDS

FORMAT = "dspy-memory-export"
# 2: write runs carry a `uid`, with what each saw and did (write_run_candidate, write_run_op),
# and feedback records. 3: memories and episodes carry `expires_at`, and retention_settings
# records; a new number, so that an older reader refuses such a file instead of keeping for
# good what is to expire. Older files are read too: their write runs of version 1 have no
# uid, and nothing of theirs expires.
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
MAX_LINE_BYTES = 64 * 2**20
# In the order they are written and imported (a record comes after those it names).
RECORD_TYPES = (
    "entity", "episode", "memory", "turn_context", "memory_source", "memory_link", "memory_event",
    "block", "block_version", "lifecycle_settings", "retention_settings", "write_run", "write_run_candidate",
    "write_run_op", "feedback", "vector",
)  # fmt: skip
# Stored as text (JSON) or 0/1 in the database; objects and booleans in the file.
JSON_FIELDS = frozenset({"metadata", "settings", "episode_ids", "rejected", "expected"})
BOOL_FIELDS = frozenset({"pinned", "read_only", "infer"})


class ExportFileError(DSPyMemoryError):
    """The file is not a complete, unaltered dspy-memory export this version can read."""


_Time = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")]
_Id = Annotated[str, Field(min_length=1, max_length=256)]
_Scope = {name: (_Id | None, None) for name in ("user_id", "agent_id", "run_id")}
_Share = Annotated[float, Field(ge=0, le=1)]
_Count = Annotated[int, Field(ge=0)]
_Version = Annotated[int, Field(ge=1)]
_Opt = (str | None, None)
_FIELDS: dict[str, dict[str, Any]] = {
    "entity": {
        "id": (_Id, ...), **_Scope, "name": (str, ...), "normalized_name": (str, ...), "type": _Opt,
        "summary": _Opt, "metadata": (dict[str, Any], ...), "created_at": (_Time, ...), "updated_at": (_Time, ...),
    },
    "episode": {
        "id": (_Id, ...), **_Scope, "source": (Literal[EPISODE_SOURCES], ...), "role": _Opt, "name": _Opt,
        "content": (str, ...), "metadata": (dict[str, Any], ...), "occurred_at": (_Time, ...),
        "ingested_at": (_Time, ...), "status": (Literal["pending", "done", "failed"], ...), "error": _Opt,
        "attempts": (_Count, ...), "infer": (bool, ...), "expires_at": (_Time | None, None),
    },
    "memory": {
        "id": (_Id, ...), "version": (_Version, ...), **_Scope, "content": (str, ...),
        "kind": (Literal[MEMORY_KINDS], ...), "subject_id": (_Id | None, None), "predicate": _Opt,
        "object_id": (_Id | None, None), "confidence": (_Share, ...), "importance": (_Share, ...),
        "strength": (Annotated[float, Field(gt=0)], ...), "access_count": (_Count, ...),
        "last_accessed_at": (_Time | None, None), "content_hash": (str, ...), "metadata": (dict[str, Any], ...),
        "valid_at": (_Time | None, None), "invalid_at": (_Time | None, None), "created_at": (_Time, ...),
        "expired_at": (_Time | None, None), "superseded_by": (_Id | None, None),
        "archived_at": (_Time | None, None), "pinned": (bool, ...), "expires_at": (_Time | None, None),
    },
    "turn_context": {"memory_id": (_Id, ...), "version": (_Version, ...), "episode_id": (_Id, ...)},
    "memory_source": {"memory_id": (_Id, ...), "episode_id": (_Id, ...), "created_at": (_Time, ...)},
    "memory_link": {
        "memory_id": (_Id, ...), "linked_id": (_Id, ...), "relation": (Literal["merged_from", "summarizes"], ...),
    },
    "memory_event": {
        "memory_id": (_Id, ...), **_Scope,
        "event": (Literal["ADD", "UPDATE", "INVALIDATE", "DELETE", "MERGE", "DECAY", "RESTORE"], ...),
        "version": (_Version | None, None), "old_content": _Opt, "new_content": _Opt, "reason": _Opt,
        "actor": (str, ...), "episode_id": (_Id | None, None), "metadata": (dict[str, Any], ...),
        "created_at": (_Time, ...),
    },
    "block": {
        "id": (_Id, ...), **_Scope, "label": (str, ...), "value": (str, ...),
        "char_limit": (Annotated[int, Field(gt=0)], ...), "read_only": (bool, ...), "description": _Opt,
        "version": (_Version, ...), "created_at": (_Time, ...), "updated_at": (_Time, ...),
    },
    "block_version": {
        "block_id": (_Id, ...), "version": (_Version, ...), "value": (str, ...), "actor": (str, ...),
        "reason": _Opt, "created_at": (_Time, ...),
    },
    "lifecycle_settings": {**_Scope, "settings": (dict[str, Any], ...), "updated_at": (_Time, ...)},
    "retention_settings": {**_Scope, "settings": (dict[str, Any], ...), "updated_at": (_Time, ...)},
    "write_run": {
        "uid": (_Id | None, None), **_Scope, "mode": (str, ...), "episode_ids": (list[_Id], ...), "lm": _Opt, "lm_calls": (_Count, ...),
        "prompt_tokens": (_Count, ...), "completion_tokens": (_Count, ...), "ops_applied": (_Count, ...),
        "rejected": (list[Any], ...), "error": _Opt, "started_at": (_Time, ...), "finished_at": (_Time, ...),
    },
    "write_run_candidate": {
        "write_run_id": (_Id, ...), "alias": (_Count, ...), "memory_id": (_Id, ...), "version": (_Version, ...),
    },
    "write_run_op": {
        "write_run_id": (_Id, ...), "op_index": (_Count, ...), "action": (WriteAction | None, None),
        "target": (int | None, None), "applied": (WriteAction | None, None), "memory_id": (_Id | None, None),
        "version": (_Version | None, None), "refused": _Opt,
    },
    "feedback": {
        "id": (_Id, ...), **_Scope, "source": (Literal[FEEDBACK_SOURCES], ...),
        "verdict": (Literal[FEEDBACK_VERDICTS] | None, None), "memory_id": (_Id | None, None),
        "memory_version": (_Version | None, None), "write_run_id": (_Id | None, None),
        "op_index": (_Count | None, None), "note": _Opt, "expected": (dict[str, Any], ...), "actor": (str, ...),
        "created_at": (_Time, ...),
    },
    "vector": {
        "memory_id": (_Id, ...), "version": (_Version, ...), "dim": (Annotated[int, Field(gt=0)], ...),
        "vector": (str, ...),
    },
}  # fmt: skip
_STRICT = ConfigDict(extra="forbid", strict=True)
RECORD_MODELS: dict[str, type[BaseModel]] = {
    name: create_model(f"{name}_record", __config__=_STRICT, record=(Literal[name], ...), **fields)  # type: ignore[arg-type]  # a Literal of a runtime value is a type to pydantic, a special form to mypy
    for name, fields in _FIELDS.items()
}


class Embedder(BaseModel):
    model_config = _STRICT
    name: str
    dim: Annotated[int, Field(gt=0)]


class Header(BaseModel):
    model_config = _STRICT
    record: Literal["header"]
    format: Literal["dspy-memory-export"]
    format_version: int
    schema_version: int
    library_version: str
    embedder: Embedder | None
    embeddings: bool  # vector records included
    scope: ScopeArgs | None  # None: every scope of the store
    exported_at: _Time
    counts: dict[str, _Count]


class Trailer(BaseModel):
    model_config = _STRICT
    record: Literal["trailer"]
    counts: dict[str, _Count]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def dumps(record: Mapping[str, Any]) -> bytes:
    return json.dumps(
        record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()


def to_record(kind: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row as a record of type `kind`."""
    record: dict[str, Any] = {"record": kind}
    for name, value in row.items():
        if name in JSON_FIELDS and isinstance(value, str):
            value = json.loads(value)
        elif name in BOOL_FIELDS:
            value = bool(value)
        elif name == "embedding":
            name, value = "vector", base64.b64encode(np.asarray(value, dtype="<f4").tobytes()).decode()
            record["dim"] = len(row["embedding"])
        record[name] = value
    return record


def to_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A validated record as a row to store (vectors decoded to `embedding`)."""
    row: dict[str, Any] = {}
    for name, value in record.items():
        if name == "record":
            continue
        if name in JSON_FIELDS:
            value = json.dumps(value, ensure_ascii=False)
        elif name in BOOL_FIELDS:
            value = int(value)
        elif name == "vector":
            name, value = "embedding", decode_vector(record)
        row[name] = value
    return row


def decode_vector(record: Mapping[str, Any]) -> np.ndarray:
    try:
        raw = base64.b64decode(record["vector"], validate=True)
    except ValueError:
        raise ExportFileError(f"the vector of memory {record['memory_id']!r} is not base64") from None
    if len(raw) != 4 * record["dim"]:
        raise ExportFileError(
            f"the vector of memory {record['memory_id']!r} has {len(raw)} bytes, not {record['dim']} float32 values"
        )
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(vector).all():
        raise ExportFileError(f"the vector of memory {record['memory_id']!r} holds a NaN or infinity")
    return vector


@contextmanager
def _lines(path: str) -> Iterator[Iterator[tuple[int, bytes, bool]]]:
    """(number, line, whether it is the last) of the file's lines, read as they are needed."""
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
        opened: io.BufferedIOBase = gzip.open(path, "rb") if gzipped else open(path, "rb")
    except FileNotFoundError:
        raise ExportFileError(f"no export file at {path!r}") from None

    def numbered(source: io.BufferedIOBase) -> Iterator[tuple[int, bytes, bool]]:
        held: tuple[int, bytes] | None = None
        try:
            while line := source.readline(MAX_LINE_BYTES + 1):
                number = held[0] + 1 if held else 1
                if len(line) > MAX_LINE_BYTES:
                    raise ExportFileError(f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes")
                if held:
                    yield *held, False
                held = (number, line)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ExportFileError(
                f"{path}: the gzip stream is damaged or cut short ({exc}); nothing was imported"
            ) from None
        if held:
            yield *held, True

    with opened as source:
        yield numbered(source)


def _json(path: str, number: int, line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
        # Lone surrogates ("\ud800") parse but cannot be stored as UTF-8.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        raise ExportFileError(f"{path}: line {number} is not valid JSON text") from None
    if not isinstance(value, dict) or not isinstance(value.get("record"), str):
        raise ExportFileError(f'{path}: line {number} is not a record (a JSON object with a "record" field)')
    return value


def _checked(path: str, number: int, model: type[BaseModel], value: dict[str, Any]) -> BaseModel:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "record"
        raise ExportFileError(
            f"{path}: line {number} ({value.get('record')} record): {where}: {problem['msg']}"
        ) from None


def _record(path: str, number: int, value: dict[str, Any]) -> dict[str, Any]:
    model = RECORD_MODELS.get(value["record"])
    if model is None:
        raise ExportFileError(f"{path}: line {number} has an unknown record type {value['record'][:40]!r}")
    # As validated: fields an older version's file leaves out are there, with their default.
    return _checked(path, number, model, value).model_dump()


def _header(path: str, first: tuple[int, bytes, bool] | None) -> Header:
    if first is None:
        raise ExportFileError(f"{path} is empty; not a dspy-memory export")
    try:
        value = _json(path, 1, first[1])
    except ExportFileError:
        value = {}
    if value.get("record") != "header" or value.get("format") != FORMAT:
        raise ExportFileError(f"{path} is not a dspy-memory export (line 1 is no {FORMAT} header)")
    version = value.get("format_version")
    if version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise ExportFileError(
            f"{path} has export format version {version!r}; this dspy-memory reads versions {readable} "
            "(upgrade dspy-memory to read newer exports)"
        )
    header = _checked(path, 1, Header, value)
    assert isinstance(header, Header)
    return header


@dataclass(frozen=True)
class Checked:
    header: Header
    sha256: str
    counts: dict[str, int]  # records per type
    in_order: bool  # the types come in RECORD_TYPES order, as export writes them


def check(path: str | os.PathLike[str], visit: Callable[[dict[str, Any]], None]) -> Checked:
    """An import's first pass: the file streamed and checked whole (header, every record against
    its type, trailer, counts, sha256), each valid record handed to `visit` in file order; only
    what `visit` keeps stays in memory. A bad record is reported after the trailer and checksum
    are checked, so a file cut short or edited says so rather than naming the line it broke."""
    path = os.fspath(path)
    digest, counts, rank, in_order = hashlib.sha256(), Counter[str](), 0, True
    problem: ExportFileError | None = None
    number, last = 1, dict[str, Any]()
    with _lines(path) as lines:
        header = _header(path, next(lines, None))
        for number, line, is_last in lines:
            if is_last:
                last = _json(path, number, line) if line.endswith(b"\n") else {}
                break
            digest.update(line)
            if problem is None:
                try:
                    record = _record(path, number, _json(path, number, line))
                except ExportFileError as exc:
                    problem = exc
                    continue
                counts[record["record"]] += 1
                in_order, rank = (
                    in_order and RECORD_TYPES.index(record["record"]) >= rank,
                    RECORD_TYPES.index(record["record"]),
                )
                visit(record)
    if last.get("record") != "trailer":
        raise ExportFileError(f"{path} is cut short (its last line is no trailer); nothing was imported")
    trailer = _checked(path, number, Trailer, last)
    assert isinstance(trailer, Trailer)
    if digest.hexdigest() != trailer.sha256:
        raise ExportFileError(
            f"{path}: the records do not match the trailer's checksum (the file was changed or damaged); "
            "nothing was imported"
        )
    if problem is not None:
        raise problem
    if counts != trailer.counts or counts != header.counts:
        raise ExportFileError(
            f"{path}: the record counts {dict(counts)} differ from the header's or trailer's"
        )
    return Checked(header, trailer.sha256, dict(counts), in_order)


def records(
    path: str | os.PathLike[str], checked: Checked, kinds: Container[str] | None = None
) -> Generator[dict[str, Any], None, None]:
    """The second pass: the records (of `kinds`; None: all) of a file `check` passed, in file
    order, validated again as they are read. A file changed since raises ExportFileError (by the
    last record at the latest, by its checksum), so the caller's transaction rolls back."""
    path = os.fspath(path)
    digest = hashlib.sha256()
    try:
        with _lines(path) as lines:
            next(lines, None)  # the header, checked
            for number, line, is_last in lines:
                if not is_last:
                    digest.update(line)
                    value = _json(path, number, line)
                    if kinds is None or value["record"] in kinds:
                        yield _record(path, number, value)
    except ExportFileError as exc:
        raise ExportFileError(f"{path} changed while it was imported ({exc}); nothing was imported") from None
    if digest.hexdigest() != checked.sha256:
        raise ExportFileError(f"{path} changed while it was imported; nothing was imported")
