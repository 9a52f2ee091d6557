"""The audit log (docs/governance.md, "The audit log"): one append-only, hash-chained entry per
change, written in the transaction of the change, so a change that rolls back leaves no entry
and a committed one always has one.

Each entry records who (the actor of `acting_as()` or of the store, and the role: user, lm,
system), which process (pid, host, library version), which request, the operation, the scope
as salted hashes (the salt is random per store and kept in `meta`, so an entry names no user,
agent or run, and an erasure receipt holds none of the erased scope's ids), counts, memory ids
(ids are not content) and details (e.g. the write program's hash and the LM call ids). Its
`hash` is sha256 over the previous entry's hash and a canonical serialization of the entry;
the newest (id, hash) is also kept in `meta` ("audit_head"), so removing the newest entries is
found too. Writers are serialized (SQLite BEGIN IMMEDIATE, PostgreSQL an advisory lock), so the
chain is linear: the next entry's id and prev_hash come from the head inside the transaction.

Not audited: recall statistics (access counts), episode claims and status changes, write-run
bookkeeping, the keyword contexts of raw turns. They change no content anyone gave or decided
on, they happen on every read or retry, and auditing them would put a write on the read path.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import importlib.metadata
import json
import os
import secrets
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.reports import AuditEntry
from dspy_memory.store.backend import Connections
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import now_db

GENESIS = "0" * 64  # the prev_hash of the first entry
SALT_KEY, HEAD_KEY = "audit_salt", "audit_head"
COLUMNS = (
    "id, at, operation, actor, role, pid, host, version, request_id, user_hash, agent_hash, "
    "run_hash, counts, memory_ids, details, prev_hash, hash"
)
_HOST = socket.gethostname()


@dataclass(frozen=True)
class AuditContext:
    """Who is acting now (see `acting_as`)."""

    actor: str | None = None
    request_id: str | None = None


_NOBODY = AuditContext()
_CONTEXT: contextvars.ContextVar[AuditContext | None] = contextvars.ContextVar(
    "dspy_memory_audit_context", default=None
)


class acting_as:  # noqa: N801 - used like a function: `with acting_as("bot"): ...`
    """Changes made inside are logged as done by `actor` for `request_id`. A context variable:
    each thread and each asyncio task has its own. Bad values are refused at once."""

    def __init__(self, actor: str | None, *, request_id: str | None = None) -> None:
        for name, value in (("actor", actor), ("request_id", request_id)):
            if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 200):
                raise InvalidInputError(
                    f"{name} must be a non-empty string of at most 200 characters, got {value!r}"
                )
        self.context = AuditContext(actor=actor, request_id=request_id)
        self._tokens: list[contextvars.Token[AuditContext | None]] = []

    def __enter__(self) -> AuditContext:
        self._tokens.append(_CONTEXT.set(self.context))
        return self.context

    def __exit__(self, *exc: object) -> None:
        _CONTEXT.reset(self._tokens.pop())


def current_context() -> AuditContext:
    return _CONTEXT.get() or _NOBODY


@functools.cache
def _version() -> str:
    # By distribution metadata: the store may not import the package's top level (layering).
    try:
        return importlib.metadata.version("dspy-memory")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


def entry_hash(entry: Mapping[str, Any]) -> str:
    """sha256 over the previous hash and the canonical JSON of every other field."""
    fields = {key: entry[key] for key in COLUMNS.split(", ") if key != "hash"}
    for key in ("counts", "memory_ids", "details"):  # stored as JSON text, hashed by value
        if isinstance(fields[key], str):
            fields[key] = json.loads(fields[key])
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{entry['prev_hash']}\n{canonical}".encode()).hexdigest()


@dataclass
class _Group:
    """Records made inside `AuditLog.group()`: one entry at its end."""

    operation: str
    scope: Scope | None
    role: str
    details: dict[str, Any]
    counts: dict[str, int] = field(default_factory=dict)
    memory_ids: list[str] = field(default_factory=list)


class AuditLog:
    def __init__(self, conns: Connections) -> None:
        self._conns = conns
        self._local = threading.local()
        self._salt: str | None = None
        self.default_actor: str | None = None  # Memory(actor=...) / MemoryConfig.actor

    # -- writing -----------------------------------------------------------------------------

    def record(
        self,
        operation: str,
        *,
        scope: Scope | None = None,
        role: str = "user",
        counts: Mapping[str, int] | None = None,
        memory_ids: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Log a change inside the caller's transaction (joins it; opens one if there is none).
        Inside `group()` the change is added to the group's one entry instead."""
        group: _Group | None = getattr(self._local, "group", None)
        if group is not None:
            for key, value in (counts or {}).items():
                group.counts[key] = group.counts.get(key, 0) + int(value)
            group.memory_ids.extend(memory_ids)
            return
        with self._conns.transaction() as conn:
            self._append(conn, operation, scope, role, counts, memory_ids, details)

    @contextmanager
    def group(
        self, operation: str, *, scope: Scope | None, role: str, details: Mapping[str, Any] | None = None
    ) -> Iterator[None]:
        """Changes recorded inside make ONE entry (counts summed per key), written when the block
        ends without an error; use inside the transaction of the changes."""
        if getattr(self._local, "group", None) is not None:  # an outer group takes them
            yield
            return
        group = _Group(operation, scope, role, dict(details or {}))
        self._local.group = group
        try:
            yield
        finally:
            self._local.group = None
        if group.counts or group.memory_ids:
            with self._conns.transaction() as conn:
                self._append(
                    conn, operation, scope, role, group.counts, dict.fromkeys(group.memory_ids), group.details
                )

    def receipt(
        self,
        operation: str,
        *,
        scope: Scope | None = None,
        counts: Mapping[str, int] | None = None,
        details: Mapping[str, Any] | None = None,
        role: str = "user",
    ) -> AuditEntry:
        """A receipt for a governance operation (export, import, backup, restore, rekey, ...) in
        its own transaction (or the caller's). `details` must hold no content: numbers, names of
        files and formats, hashes."""
        with self._conns.transaction() as conn:
            return self._append(conn, operation, scope, role, counts, (), details)

    def _append(
        self,
        conn: Any,
        operation: str,
        scope: Scope | None,
        role: str,
        counts: Mapping[str, int] | None,
        memory_ids: Iterable[str],
        details: Mapping[str, Any] | None,
    ) -> AuditEntry:
        context = current_context()
        head = _parse_head(conn.execute("SELECT value FROM meta WHERE key = ?", (HEAD_KEY,)).fetchone())
        if head is not None:
            last_id, prev_hash = head
        else:
            last = conn.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
            last_id, prev_hash = (last[0], last[1]) if last else (0, GENESIS)
        salt = self._salt_of(conn, create=True)
        hashes = _scope_hashes(salt, scope)
        entry: dict[str, Any] = {
            "id": int(last_id) + 1,
            "at": now_db(),
            "operation": operation,
            "actor": context.actor or self.default_actor,
            "role": role,
            "pid": os.getpid(),
            "host": _HOST,
            "version": _version(),
            "request_id": context.request_id,
            "user_hash": hashes[0],
            "agent_hash": hashes[1],
            "run_hash": hashes[2],
            "counts": json.dumps({key: int(value) for key, value in sorted((counts or {}).items())}),
            "memory_ids": json.dumps(list(memory_ids)),
            "details": json.dumps(dict(details or {}), sort_keys=True, default=str),
            "prev_hash": prev_hash,
        }
        entry["hash"] = entry_hash(entry)
        names = COLUMNS.split(", ")
        conn.execute(
            f"INSERT INTO audit_log ({COLUMNS}) VALUES ({', '.join('?' * len(names))})",
            tuple(entry[name] for name in names),
        )
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (HEAD_KEY, json.dumps([entry["id"], entry["hash"]])),
        )
        return _entry(entry)

    def _salt_of(self, conn: Any, *, create: bool) -> str | None:
        if self._salt is None:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (SALT_KEY,)).fetchone()
            if row is None and create:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (SALT_KEY, secrets.token_hex(16)),
                )
                row = conn.execute("SELECT value FROM meta WHERE key = ?", (SALT_KEY,)).fetchone()
            if row is None:
                return None
            self._salt = row[0]
        return self._salt

    # -- reading -----------------------------------------------------------------------------

    def entries(
        self,
        *,
        scope: Scope | None = None,
        operation: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Entries newest first; `scope` matches the ids it gives (by their salted hashes)."""
        where, params = ["1 = 1"], []
        with self._conns.read() as conn:
            if scope is not None:
                salt = self._salt_of(conn, create=False)
                if salt is None:
                    return []
                for column, value in zip(("user_hash", "agent_hash", "run_hash"), _scope_hashes(salt, scope)):
                    if value is not None:
                        where.append(f"{column} = ?")
                        params.append(value)
            for sql, value in (("operation = ?", operation), ("at >= ?", since), ("at <= ?", until)):
                if value is not None:
                    where.append(sql)
                    params.append(value)
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM audit_log WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        return [_entry(dict(zip(COLUMNS.split(", "), row))) for row in rows]

    def scope_hashes(self, scope: Scope) -> tuple[str | None, str | None, str | None]:
        """The (user, agent, run) hashes entries of `scope` carry (None: no salt yet)."""
        with self._conns.read() as conn:
            salt = self._salt_of(conn, create=False)
        return _scope_hashes(salt, scope) if salt is not None else (None, None, None)

    def rows(self, batch: int = 1000) -> Iterator[dict[str, Any]]:
        """Every entry as stored, by id (for verification), in one snapshot."""
        names = COLUMNS.split(", ")
        with self._conns.snapshot() as conn:
            after = -1
            while True:
                found = conn.execute(
                    f"SELECT {COLUMNS} FROM audit_log WHERE id > ? ORDER BY id LIMIT ?", (after, batch)
                ).fetchall()
                if not found:
                    return
                for row in found:
                    yield dict(zip(names, row))
                after = found[-1][0]

    def id_of_hash(self, entry_hash: str) -> int | None:
        """The entry whose stored hash this is (a scan: only for explaining a broken chain)."""
        with self._conns.read() as conn:
            row = conn.execute(
                "SELECT id FROM audit_log WHERE hash = ? ORDER BY id LIMIT 1", (entry_hash,)
            ).fetchone()
        return int(row[0]) if row else None

    def head(self) -> tuple[int, str] | None:
        with self._conns.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (HEAD_KEY,)).fetchone()
        return _parse_head(row)


def _parse_head(row: Any) -> tuple[int, str] | None:
    """The head kept in `meta`, or None when it is missing or not one (`verify` says so)."""
    try:
        last_id, last_hash = json.loads(row[0])
        return int(last_id), str(last_hash)
    except (TypeError, ValueError):
        return None


def _scope_hashes(salt: str | None, scope: Scope | None) -> tuple[str | None, str | None, str | None]:
    if salt is None or scope is None:
        return None, None, None

    def hashed(kind: str, value: str | None) -> str | None:
        return None if value is None else hashlib.sha256(f"{salt}\n{kind}\n{value}".encode()).hexdigest()

    return hashed("user", scope.user_id), hashed("agent", scope.agent_id), hashed("run", scope.run_id)


def _entry(row: Mapping[str, Any]) -> AuditEntry:
    fields = dict(row)
    for key in ("counts", "memory_ids", "details"):
        if isinstance(fields[key], str):
            fields[key] = json.loads(fields[key])
    return AuditEntry(**fields)


def scope_of(owner: Any) -> Scope:
    """The scope of a row or record (user_id, agent_id, run_id by name), unchecked: a row may
    belong to no user."""
    get = owner.__getitem__ if not hasattr(owner, "user_id") else lambda name: getattr(owner, name)
    return Scope.model_construct(user_id=get("user_id"), agent_id=get("agent_id"), run_id=get("run_id"))
