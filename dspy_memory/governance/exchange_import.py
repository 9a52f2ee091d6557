"""Import (docs/governance.md, "Export and import"): an export file put into a store, read in two
streaming passes, so memory stays flat however large the file is (tests/test_exchange_progress.py
measures it).

The first pass (`_FirstPass`, through exchange_format.check) checks the file whole before anything
is written and keeps only ids and keys: the references between records, keys held twice, what
expired, the episodes each raw turn's keyword context quotes (turn_context records come after
the memories they index) and which memory versions have a vector in the file. The vectors to
compute here are then computed, before the write lock is taken, into an unnamed temporary file
(into an encrypted store: in the second pass, as a vector encodes its text).
The second pass (`_SecondPass`) reads the file again and writes it in one transaction, in batches
of `BATCH` records of one type (store/exchange_import.py). A file whose types are out of the
export's order (edited by hand) is read once per type instead, so that a record still comes
after those it names.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from contextlib import closing
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from dspy_memory.governance import exchange_format as fmt
from dspy_memory.governance.exchange import REEMBED, Expiry, ImportReport, redact_record
from dspy_memory.governance.exchange_format import ExportFileError
from dspy_memory.governance.redact import NO_REDACTION, Redactor
from dspy_memory.store import exchange as sql
from dspy_memory.store.exchange import ImportConflictError
from dspy_memory.store.exchange_import import Importer, Key, Placed
from dspy_memory.types import Scope
from dspy_memory.util.progress import OnProgress, report
from dspy_memory.util.timeutil import now_db

if TYPE_CHECKING:
    from dspy_memory.embed import Embedder
    from dspy_memory.store import Store

__all__ = ["REEMBED", "import_file"]

BATCH = 1000  # records of one type written at once, at most
EMBED_BATCH = 256  # texts embedded at once, at most
BATCH_CHARS = 8 * 2**20  # and at most about this much text in either (large episodes)
# What a record names, which the file must hold: (field, the type it names). "version" is a
# memory version, named by (memory_id, version).
_REFERENCES = {
    "memory": (("subject_id", "entity"), ("object_id", "entity")),
    "memory_source": (("memory_id", "memory"), ("episode_id", "episode")),
    "memory_link": (("memory_id", "memory"), ("linked_id", "memory")),
    "turn_context": (("memory_id", "version"), ("episode_id", "episode")),
    "vector": (("memory_id", "version"),),
    "block_version": (("block_id", "block"),),
    # What a run saw and did comes with its run; a feedback record with its memory (its
    # write_run_id may name a run of a wider scope, which a scope's export leaves out).
    "write_run_candidate": (("write_run_id", "write_run"),),
    "write_run_op": (("write_run_id", "write_run"),),
    "feedback": (("memory_id", "memory"),),
}
# The key each named type is known by; a keyed type's key is unique in a file.
_KNOWN_BY = {"entity": ("id",), "episode": ("id",), "block": ("id",), "write_run": ("uid",)}


def _key(record: dict[str, Any], fields: Iterable[str]) -> Any:
    values = tuple(record[field] for field in fields)
    return values[0] if len(values) == 1 else values


class _FirstPass:
    """What the first pass keeps of the records it is shown: ids and keys, never content."""

    def __init__(self, path: str, now: str, redact: Redactor, on_progress: OnProgress | None) -> None:
        self.path, self.redact, self.on_progress = path, redact, on_progress
        self.expiry = Expiry(now)
        self.known: dict[str, set[Any]] = {name: set() for name in (*_KNOWN_BY, "memory", "version")}
        self.keys: dict[str, set[Any]] = {}  # the other keyed types' keys, for duplicates
        self.pending: list[tuple[str, str, Any, str]] = []  # references to what was not seen yet
        self.links: dict[Key, list[str]] = {}  # turn contexts: the episodes a memory version's quotes
        self.vectors: set[Key] = set()
        self.dims: dict[int, str] = {}  # the vectors' dimensions, with the first memory id of each
        self.redacted: set[Key] = set()  # memory versions whose text redaction changes
        self.problems: list[Exception] = []  # found by the way; raised once the file is checked
        self.seen = 0

    def visit(self, record: dict[str, Any]) -> None:
        kind = record["record"]
        self.seen += 1
        if self.seen % BATCH == 0:
            report(self.on_progress, 0, None, "records", checked=self.seen)
        self.expiry.see(kind, record)
        self._keep(kind, record)
        for field, named in _REFERENCES.get(kind, ()):
            value = (record["memory_id"], record["version"]) if named == "version" else record[field]
            if value is not None and value not in self.known[named]:
                self.pending.append((kind, field if named != "version" else "memory", value, named))

    def _keep(self, kind: str, record: dict[str, Any]) -> None:
        key = (record["id"], record["version"]) if kind == "memory" else None
        if kind == "memory":
            self._once(kind, key, self.known["version"])
            self.known["memory"].add(record["id"])
            if self.redact and self.redact.optional(record["content"]) != record["content"]:
                self.redacted.add(key)  # type: ignore[arg-type]  # a memory's key is a Key
        elif kind in _KNOWN_BY:
            value = _key(record, _KNOWN_BY[kind])
            if value is not None:  # a write run logged before runs had a uid
                self._once(kind, value, self.known[kind])
        elif kind == "turn_context":
            self.links.setdefault((record["memory_id"], record["version"]), []).append(record["episode_id"])
        elif kind == "vector":
            self.vectors.add((record["memory_id"], record["version"]))
            self.dims.setdefault(record["dim"], record["memory_id"])
            try:
                fmt.decode_vector(record)
            except ExportFileError as exc:
                self.problems.append(exc)
        elif sql.BY_NAME.get(kind) and sql.BY_NAME[kind].key:
            self._once(kind, _key(record, sql.BY_NAME[kind].key), self.keys.setdefault(kind, set()))

    def _once(self, kind: str, key: Any, seen: set[Any]) -> None:
        if key in seen:
            shown = ", ".join(repr(part) for part in (key if isinstance(key, tuple) else (key,)))
            self.problems.append(
                ImportConflictError(f"the file holds {kind} {shown[:200]} twice; it is not a valid export")
            )
        seen.add(key)

    def finish(self, header: fmt.Header) -> None:
        """Raise what the checked file holds wrong; settle what expired."""
        self.keys.clear()
        for kind, field, value, named in self.pending:
            if value not in self.known[named]:
                raise ExportFileError(
                    f"{self.path}: a {kind} record names {field} {value!r}, which the file does not hold; "
                    "nothing was imported"
                )
        self.pending.clear()
        odd = [
            memory_id
            for dim, memory_id in self.dims.items()
            if header.embedder is None or dim != header.embedder.dim
        ]
        if odd:
            raise ExportFileError(
                f"{self.path}: the vector of memory {odd[0]!r} does not have the header's embedder dimension; "
                "nothing was imported"
            )
        if self.problems:
            raise self.problems[0]
        self.expiry.settle()


def import_file(
    store: Store,
    embedder: Embedder,
    path: str | os.PathLike[str],
    *,
    reembed: str = "auto",
    redact: Redactor = NO_REDACTION,
    on_progress: OnProgress | None = None,
) -> ImportReport:
    """Check the file whole, then write what the store lacks in one transaction. With `redact`
    (the store's MemoryConfig.redact) secrets in the file's text are replaced as on any add.
    `on_progress` gets the records checked (done 0, total unknown), then the records written of
    the file's total."""
    if reembed not in REEMBED:
        raise ValueError(f"reembed must be one of {', '.join(REEMBED)}, not {reembed!r}")
    path = os.fspath(path)
    report(on_progress, 0, None, "records")
    first = _FirstPass(path, now_db(), redact, on_progress)
    checked = fmt.check(path, first.visit)
    header = checked.header
    first.finish(header)
    gone = first.expiry.gone["memory"]
    keys = [key for key in first.known["version"] if key[0] not in gone]
    first.known.clear()
    held = sql.held_memory_versions(store, keys)
    wanted = [key for key in keys if key not in held]
    name, dim = embedder.name, embedder.dim
    same = header.embedder is not None and (header.embedder.name, header.embedder.dim) == (name, dim)
    usable = same and all(key in first.vectors for key in wanted)
    # A vector of text that held a secret encodes the secret: computed here from the redacted text.
    compute = {key for key in wanted if reembed == "always" or not usable or key in first.redacted}
    if compute and reembed == "never":
        why = (
            "holds no vectors"
            if not first.vectors
            else f"was embedded with {header.embedder.name!r} ({header.embedder.dim} dimensions)"
            if header.embedder and not same
            else "lacks vectors of some memories"
            if not usable
            else f"holds {len(first.redacted)} memory versions whose text redaction changed"
        )
        raise ExportFileError(
            f"{path} {why} and this store embeds with {name!r} ({dim} dimensions); "
            "import with reembed='auto' or 'always' to compute them here; nothing was imported"
        )
    total = sum(checked.counts.values())
    with tempfile.TemporaryFile() as spill:
        # Vectors encode their text: an encrypted store's never wait in a plaintext file; they
        # are computed in the second pass, under the write lock.
        plaintext = not getattr(store.backend, "encrypted", False)
        ahead = (
            _embed_ahead(path, checked, embedder, compute, redact, spill, on_progress, total)
            if plaintext
            else {}
        )
        second = _SecondPass(first, embedder, redact, spill, ahead, reembed != "always" and usable)
        try:
            with store.transaction() as conn:  # the receipt commits with the rows, or neither
                importer = Importer(store, conn)
                second.run(importer, checked, on_progress, total)
                counts = {kind: (new, was) for kind, (new, was) in importer.counts.items()}
                expired = {kind: count for kind, count in second.expired.items() if count}
                store.audit_log.receipt(
                    "import",
                    scope=None if header.scope is None else Scope.model_validate(header.scope),
                    counts={kind: new for kind, (new, _) in counts.items() if new},
                    details={
                        "format_version": header.format_version,
                        "sha256": checked.sha256,
                        "already_present": sum(was for _, was in counts.values()),
                        "expired": sum(expired.values()),
                        "reembedded": second.reembedded,
                    },
                )
                new, present = ({kind: pair[i] for kind, pair in counts.items()} for i in (0, 1))
                return ImportReport(path, checked.sha256, new, present, second.reembedded, name, expired)
        finally:
            store.keywords.clear_cache()


def _embed_ahead(
    path: str,
    checked: fmt.Checked,
    embedder: Embedder,
    compute: set[Key],
    redact: Redactor,
    spill: IO[bytes],
    on_progress: OnProgress | None,
    total: int,
) -> dict[Key, int]:
    """Compute the vectors of the memory versions `compute` (of their redacted text) before the
    write lock is taken, into `spill` (float32 rows, in file order); their row by version."""
    rows: dict[Key, int] = {}
    batch: list[tuple[Key, str]] = []
    chars = 0

    def embed() -> None:
        nonlocal chars
        chars = 0
        texts = sorted({text for _, text in batch})
        vectors = dict(zip(texts, np.asarray(embedder.embed(texts), dtype="<f4")))
        for key, text in batch:
            rows[key] = len(rows)
            spill.write(vectors[text].tobytes())
        batch.clear()
        report(on_progress, 0, total, "records", embedded=len(rows))

    if compute:
        with closing(fmt.records(path, checked, {"memory"})) as memories:
            for record in memories:
                if (record["id"], record["version"]) in compute:
                    redact_record(record, redact)
                    batch.append(((record["id"], record["version"]), record["content"]))
                    chars += len(record["content"])
                    if len(batch) >= EMBED_BATCH or chars >= BATCH_CHARS:
                        embed()
        if batch:
            embed()
    return rows


class _SecondPass:
    """The file read again and written through an `Importer`, a batch of one type at a time."""

    def __init__(
        self,
        first: _FirstPass,
        embedder: Embedder,
        redact: Redactor,
        spill: IO[bytes],
        ahead: dict[Key, int],
        from_file: bool,
    ) -> None:
        self.first, self.embedder, self.redact, self.spill, self.ahead = first, embedder, redact, spill, ahead
        self.from_file = from_file  # take the file's vectors (of text redaction left alone)
        self.expired: Counter[str] = Counter()
        self.waiting: dict[Key, Placed] = {}  # new memory rows whose vector comes later in the file
        self.reembedded = 0
        self.batch: list[dict[str, Any]] = []
        self.chars = 0  # of the batch's text

    def run(
        self, importer: Importer, checked: fmt.Checked, on_progress: OnProgress | None, total: int
    ) -> None:
        self.importer, done = importer, 0

        def tell(done: int) -> None:
            new, held = (sum(pair[i] for pair in importer.counts.values()) for i in (0, 1))
            report(on_progress, done, total, "records", new=new, present=held)

        passes = (
            [None] if checked.in_order else [{kind} for kind in fmt.RECORD_TYPES if kind in checked.counts]
        )
        for kinds in passes:
            with closing(fmt.records(self.first.path, checked, kinds)) as records:
                for record in records:
                    kind = record["record"]
                    if self.batch and (
                        kind != self.batch[0]["record"]
                        or len(self.batch) >= BATCH
                        or self.chars >= BATCH_CHARS
                    ):
                        self.flush()
                        tell(done)
                    done += 1
                    if self.first.expiry.left_out(kind, record):
                        self.expired[kind] += 1
                    elif kind == "vector" and (record["memory_id"], record["version"]) not in self.waiting:
                        continue  # its memory was held, or its vector computed here
                    elif kind != "turn_context":  # written with its memory, from the first pass
                        self.batch.append(record)
                        self.chars += sum(len(value) for value in record.values() if isinstance(value, str))
            self.flush()
        if self.waiting:  # only a file changed since the first pass lacks them
            raise ExportFileError(f"{self.first.path} changed while it was imported; nothing was imported")
        tell(done)

    def flush(self) -> None:
        if not self.batch:
            return
        kind = self.batch[0]["record"]
        for record in self.batch:
            redact_record(record, self.redact)
        rows = [fmt.to_row(record) for record in self.batch]
        self.batch, self.chars = [], 0
        if kind == "memory":
            self._memories(rows)
        elif kind == "vector":
            found = [
                (self.waiting.pop(key), row["embedding"])
                for row in rows
                if (key := (row["memory_id"], row["version"])) in self.waiting
            ]
            if found:
                self.importer.insert_vectors(
                    [place for place, _ in found], np.stack([vector for _, vector in found])
                )
        else:
            self.importer.add(kind, rows)

    def _memories(self, rows: list[dict[str, Any]]) -> None:
        new = self.importer.new_memories(rows)
        vectors: dict[Key, np.ndarray] = {}
        here: list[dict[str, Any]] = []  # new since the first pass looked: computed now
        width = self.embedder.dim * 4
        for row in new:
            key = (row["id"], row["version"])
            if key in self.ahead:
                self.spill.seek(self.ahead[key] * width)
                vectors[key] = np.frombuffer(self.spill.read(width), dtype="<f4")
            elif not (self.from_file and key in self.first.vectors and key not in self.first.redacted):
                here.append(row)
        if here:
            texts = sorted({row["content"] for row in here})
            embedded = dict(zip(texts, self.embedder.embed(texts)))
            vectors.update({(row["id"], row["version"]): embedded[row["content"]] for row in here})
        self.reembedded += len(vectors)
        gone = self.first.expiry.gone["episode"]
        links = {
            key: [episode for episode in self.first.links.get(key, ()) if episode not in gone]
            for key in ((row["id"], row["version"]) for row in new)
        }
        self.waiting.update(self.importer.insert_memories(new, links, vectors))
