"""The Memory facade's governance methods (docs/governance.md). Mixed into Memory; like the
rest of the facade, they validate and delegate to dspy_memory/governance/ and the store."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from dspy_memory.errors import InvalidInputError
from dspy_memory.governance.files import file_argument
from dspy_memory.reports import BackupManifest, FileCheck
from dspy_memory.scopes import ScopeArgs

if TYPE_CHECKING:
    from dspy_memory.governance.scoped import ScopedMemory


class GovernanceMethods:
    # Provided by Memory.
    store: Any
    config: Any
    embedder: Any
    _writer: Any
    _scopes: Any

    def _first_use(self) -> None: ...
    def _scope(self, method: str, args: dict[str, Any], *, exact: bool = False) -> Any: ...

    # -- least privilege (docs/governance.md#least-privilege-for-agents) -------------------------

    def tools(
        self,
        *,
        allow: Sequence[str] | None = None,
        allow_forget: bool = False,
        allow_feedback: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> list[Any]:
        """Tools for `dspy.ReAct` bound to this scope, none of which can destroy data: recall,
        remember, revise, memory_history, core_memory_append, core_memory_replace (revise and
        the block edits keep every earlier version). `forget` (a hard delete) only with
        allow_forget=True; `memory_feedback` (the agent's verdicts kept as feedback the write
        program learns from, docs/feedback.md) only with allow_feedback=True; `allow` picks some, e.g.
        `dspy.ReAct("question -> answer", tools=memory.tools(user_id="ada"))`. The scope is exact
        in every mode: tools(agent_id="x") reaches only agent x's memories stored without a user."""
        from dspy_memory.agent.tools import make_tools

        where = self._scope("tools", scope, exact=True)
        self.store.check_open()  # tools made now would fail later, in the middle of an agent run
        options = dict(allow_forget=allow_forget, allow_feedback=allow_feedback)
        return make_tools(self, where, allow, **options)  # type: ignore[arg-type]

    def scoped(self, **scope: Unpack[ScopeArgs]) -> ScopedMemory:
        """This memory seen through one scope, for application code: `ada = memory.scoped(
        user_id="ada")`, then `ada.add(...)`, `ada.search(...)`, `ada.get(id)`: every call passes
        the scope, and one that names another user or agent (or all_scopes) is refused."""
        from dspy_memory.governance.scoped import ScopedMemory

        return ScopedMemory(self, **scope)  # type: ignore[arg-type]

    # -- backups and restore (docs/governance.md#backups-and-restore) ---------------------------

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> BackupManifest:
        """Back up this SQLite file to `dest` while other processes go on writing: the keyword
        index optimized, `VACUUM INTO` (one snapshot, live rows only: nothing erased comes
        along), the copy verified (integrity, indexes agree with rows, schema version), and
        `<dest>.manifest.json` written next to it. An encrypted file's backup is encrypted with
        the same key. Returns the manifest. Refuses an existing `dest` unless overwrite=True."""
        from dspy_memory.governance.backup import backup

        if not isinstance(overwrite, bool):
            raise InvalidInputError(f"overwrite must be True or False, not {type(overwrite).__name__}")
        self.store.check_open()
        return backup(self.store, dest, overwrite=overwrite, encryption_key=self._encryption_key())

    @staticmethod
    def restore_backup(
        src: str | os.PathLike[str], path: str | os.PathLike[str], *, encryption_key: Any = None
    ) -> FileCheck:
        """Put the backup `src` in place of the memory file `path` (named apart from
        `restore(memory_id)`, which brings back an archived memory): `src` is verified (with its
        manifest), copied next to `path`, the copy verified, then swapped in atomically. `path`
        is untouched when any step fails. Close every Memory on `path` first (refused while it
        is open). `encryption_key`: the backup's (default $DSPY_MEMORY_ENCRYPTION_KEY)."""
        from dspy_memory.governance.backup import restore
        from dspy_memory.store.sqlite.cipher import given_key

        return restore(src, path, encryption_key=given_key(encryption_key))

    def _encryption_key(self) -> Any:
        if not getattr(self.store.backend, "encrypted", False):
            return None
        from dspy_memory.store.sqlite.cipher import given_key

        return given_key(self.config.encryption_key)

    # -- the audit log (docs/governance.md#the-audit-log) ---------------------------------------

    def acting_as(self, actor: str, *, request_id: str | None = None) -> Any:
        """`with memory.acting_as("support-bot", request_id="req-17"): ...`: changes made inside
        (in this thread or asyncio task) are logged as done by `actor` for `request_id`."""
        from dspy_memory.governance.audit import acting_as

        if not isinstance(actor, str):
            raise InvalidInputError(f"actor must be a string, not {type(actor).__name__}")
        return acting_as(actor, request_id=request_id)

    def audit(
        self,
        *,
        operation: str | None = None,
        since: Any = None,
        until: Any = None,
        limit: int = 100,
        **scope: Unpack[ScopeArgs],
    ) -> list[Any]:
        """Audit log entries (AuditEntry), newest first: of one `operation`, between `since` and
        `until`, of a scope (`memory.audit(user_id="ada")` matches the salted hash of "ada": the
        log holds no ids of a scope). Erasure receipts stay after `delete_scope`."""
        from dspy_memory.util.timeutil import to_db

        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
        if operation is not None and not isinstance(operation, str):
            raise InvalidInputError(f"operation must be a string, not {type(operation).__name__}")
        where = self._scope("audit", scope, exact=True) if scope else None
        return self.store.audit_log.entries(
            scope=where, operation=operation, since=to_db(since), until=to_db(until), limit=limit
        )

    def verify_audit(self) -> Any:
        """Check the audit log's hash chain (AuditVerification): `ok`, or the entries that were
        changed, removed or reordered, first one first."""
        from dspy_memory.governance.audit import verify_chain

        self.store.check_open()
        return verify_chain(self.store.audit_log)

    # -- export and import (docs/governance.md#export-and-import) --------------------------------

    def export(
        self,
        path: str | os.PathLike[str],
        *,
        include_embeddings: bool = False,
        all_scopes: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> Any:
        """Write everything of a scope (read as `search` reads it: `export("ada.jsonl.gz",
        user_id="ada")`), or of the whole store with all_scopes=True, to a JSONL file (gzipped
        when the name ends in .gz): every memory version with both time axes, its sources,
        episodes, entities, events, links, blocks with their versions (profiles too), lifecycle
        settings, write runs, feedback and, with include_embeddings=True, the vectors. Returns an ExportReport (path,
        records per type, sha256 of the records)."""
        from dspy_memory.governance.exchange import export_scope

        if not isinstance(include_embeddings, bool):
            raise InvalidInputError(
                f"include_embeddings must be True or False, not {type(include_embeddings).__name__}"
            )
        where = self._scopes.read_or_all("export", scope, all_scopes)
        self._first_use()
        self.store.check_open()
        return export_scope(self, file_argument(path, "path"), where, embeddings=include_embeddings)

    def import_(self, path: str | os.PathLike[str], *, reembed: str = "auto") -> Any:
        """Import an export file into this store, keeping ids, versions and timestamps, into the
        scopes recorded in it. The whole file is checked first (header, format version, trailer
        checksum, every record); then what the store lacks is written in one transaction, so a
        failure leaves nothing behind; importing again changes nothing. A row held here with the
        same id but other content is refused (ImportConflictError). reembed: "auto" computes
        vectors with this store's embedder when the file has none or another embedder's, "always",
        or "never" (refuses when they would be needed). With MemoryConfig.redact the file's text
        is redacted as any add's. Returns an ImportReport (new and already present records per type)."""
        from dspy_memory.governance.exchange import REEMBED, import_file

        if reembed not in REEMBED:
            raise InvalidInputError(f"reembed must be one of {', '.join(REEMBED)}, not {reembed!r}")
        self._first_use()
        self.store.check_open()
        return import_file(self, file_argument(path, "path"), reembed=reembed, redact=self._writer.redact)
