"""Memory: the facade. It validates arguments and delegates to the write path, the read path
and the store."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from dspy_memory.agent.profile import ProfileUpdate
from dspy_memory.config import LifecycleSettings, MemoryConfig
from dspy_memory.errors import InvalidInputError, ReadOnlyError, ScopeError
from dspy_memory.governance.files import file_argument
from dspy_memory.graph import MemoryGraph
from dspy_memory.parts import build_parts, config_with
from dspy_memory.read.retrieval import Recipe
from dspy_memory.reports import (
    AuditEntry,
    AuditReport,
    AuditVerification,
    BackupManifest,
    FeedbackOptimization,
    FileCheck,
    IngestReport,
    MaintenanceReport,
)
from dspy_memory.retention_settings import RetentionSettings
from dspy_memory.scopes import OwnerArgs, ScopeArgs, ScopeRules
from dspy_memory.store import TimeView
from dspy_memory.store.audit_log import acting_as
from dspy_memory.types import (
    FEEDBACK_SOURCES,
    FEEDBACK_VERDICTS,
    AddResult,
    Answer,
    Context,
    DeleteResult,
    Episode,
    Event,
    FeedbackRecord,
    Hit,
    MemoryRecord,
    Scope,
)
from dspy_memory.util.aio import Workers, awaitable
from dspy_memory.util.lm import ADD_PURPOSE, lm_for, resolve_lm
from dspy_memory.util.progress import OnProgress
from dspy_memory.util.text import (
    SINGLE_VALUED_PREDICATES,
    check_choice,
    check_count,
    check_flag,
    check_id,
    valid_text,
)
from dspy_memory.util.timeutil import TimeLike, to_db
from dspy_memory.write.inputs import MessagesInput, expiry

if TYPE_CHECKING:
    from dspy_memory.governance.exchange import ExportReport, ImportReport
    from dspy_memory.governance.scoped import ScopedMemory
    from dspy_memory.store.keys import KeyStore

logger = logging.getLogger("dspy_memory")
# The most rows one call may ask for (a bigger `limit` is a mistake, and past 2**63 SQLite cannot
# even bind it).
MAX_LIMIT = 1_000_000


class Memory:
    """Long-term memory in one SQLite file (docs/api.md).

    >>> memory = Memory("agent.db")                       # local MiniLM embedder
    >>> memory.add("I moved to Denver last month.", user_id="ada")
    >>> memory.search("where does ada live?", user_id="ada")

    `embedder`: a spec ("local", "ollama:nomic-embed-text", "openai:text-embedding-3-small",
    "test"), an Embedder or a `dspy.Embedder`; left out, the one the file was built with (new
    files: local MiniLM). `lm` (a dspy.LM or model string; default dspy's) writes memories;
    without any LM `add()` stores raw turns. `write_program` replaces the write program;
    `programs` is a folder of compiled programs (from `python -m evals.optimize`).
    `profile_schema` (a pydantic model) enables `profile()` and `update_profile()`.

    Every method takes its scope as user_id=, agent_id=, run_id=. Scopes are walls
    (docs/scopes.md): in the default `scope_mode="strict"` a read without user_id reaches only
    memories stored without a user, and calls by id (get, history, update, delete) need the
    scope that owns the id, or all_scopes=True. "wildcard" makes omitted ids match any value.

    Every method has an awaitable form for async agents, `await memory.aadd(...)`,
    `await memory.asearch(...)`, ...: the same method run off the event loop (docs/async.md).
    """

    def __init__(
        self,
        path_or_config: str | os.PathLike[str] | MemoryConfig = "memory.db",
        *,
        embedder: Any = None,
        lm: Any = None,
        write_program: Any = None,
        programs: str | os.PathLike[str] | None = None,
        profile_schema: Any = None,
        **settings: Any,
    ) -> None:
        self.config = config = config_with(path_or_config, settings)
        parts = build_parts(config, embedder, lm, write_program, programs, profile_schema)
        self.store, self.embedder = parts.store, parts.embedder
        self.blocks, self.profiles = parts.blocks, parts.profiles
        self.programs_in_use, self._reading_programs = parts.programs_in_use, parts.reading_programs
        self._lm, self._retriever = parts.lm, parts.retriever
        self._writer, self._background = parts.writer, parts.background
        self._maintainer = parts.maintainer
        self.keys: KeyStore = self.store.keys  # the service's API keys (docs/server.md)
        self.workers = Workers(config.async_workers, name="dspy-memory-async")
        if config.maintenance_every is not None:
            # MemoryConfig turned "12h" into seconds.
            self._background.schedule(float(config.maintenance_every), self._scheduled_maintenance)
        self._scopes = ScopeRules(config.scope_mode)
        # Unfinished episodes of an earlier process are resumed on first use (see `resume`),
        # never while constructing: that may call an LM.
        self._resume_due = config.process_pending_on_open and not config.read_only
        self._resume_lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------------

    def add(
        self,
        messages: MessagesInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        infer: bool | None = None,
        background: bool = False,
        expires_at: TimeLike | None = None,
        expires_in: str | float | timedelta | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> AddResult:
        """Remember messages (a string, a {"role", "content"} dict, or a list of them).

        Each message is persisted as an episode first. With an LM (infer=None uses one if set;
        infer=True requires one) the write program extracts facts and updates, invalidates or
        confirms existing memories; without, each message is stored as a raw `turn` memory.
        `at` is when it happened (default now; a message's own "at" wins). background=True
        returns once the episodes are on disk; `flush()` waits for them. `expires_at` (a time)
        or `expires_in` ("24h", "30d", seconds): the messages and every memory made from them
        are never returned after then, and erased by the next `maintain()`
        (docs/governance.md#retention)."""
        where = self._scope("add", scope, exact=True)
        until = expiry(expires_at, expires_in)
        queue = self._background.submit if background else None
        return self._writer.add(
            messages, where, lm=self._lm_for(infer), metadata=metadata, at=at, queue=queue, expires_at=until
        )

    def log(
        self,
        messages: MessagesInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        expires_at: TimeLike | None = None,
        expires_in: str | float | timedelta | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> list[Episode]:
        """Keep messages in the episode log only, with provenance and time, not made into
        memories (e.g. agent steps whose content is already in memory); `expires_at` /
        `expires_in` as in `add`."""
        where = self._scope("log", scope, exact=True)
        until = expiry(expires_at, expires_in)
        return self._writer.persist(
            messages, where, metadata=metadata, at=at, status="done", expires_at=until
        )

    def ingest(
        self,
        source: str | os.PathLike[str],
        *,
        format: str = "auto",
        infer: bool | None = None,
        batch_size: int | None = None,
        concurrency: int = 1,
        strict: bool = False,
        on_progress: OnProgress | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> IngestReport:
        """Store a file of existing conversations (docs/ingest.md): JSONL of messages, OpenAI
        message lists, ChatGPT's conversations.json, or LoCoMo (`format="auto"` tells them
        apart). The file is streamed. Each message keeps its own time (when the file gives none,
        the time the ingest started), role and name, and its place in the file in the episode's
        metadata; a conversation's messages stay together in time order.

        Without an LM (infer=False, or none set) every message becomes a raw turn, embedded
        `batch_size` (default 256) at a time. With one, the write program reads each
        conversation in batches (default `write.max_batch`), `concurrency` conversations at
        once. Running the same ingest again goes on where it stopped: what is there is counted
        as `already`, what an interrupted run left unfinished is processed. A record that cannot
        be read is reported (where, why) and skipped; `strict=True` stops at the first.
        `on_progress` gets the bytes read and counts after each batch."""
        where = self._scope("ingest", scope, exact=True)
        from dspy_memory.write.formats import MessageStream
        from dspy_memory.write.ingest import RAW_BATCH, Ingestion

        check_flag(strict, "strict")
        check_count(concurrency, "concurrency", low=1, high=64)
        lm = self._lm_for(infer)
        if batch_size is None:
            batch_size = RAW_BATCH if lm is None else self.config.write.max_batch
        check_count(batch_size, "batch_size", low=1, high=10_000)
        stream = MessageStream(file_argument(source, "source"), format)
        run = Ingestion(
            self._writer, stream, where, lm=lm, batch_size=batch_size, concurrency=concurrency,
            strict=strict, on_progress=on_progress,
        )  # fmt: skip
        return run.run()

    def resume(self) -> int:
        """Process what an earlier process left unfinished: episodes pending or failed for over
        `pending_grace_seconds` that no other writer holds (raw ones now, inferred ones in the
        background). Runs by itself on first use (`process_pending_on_open`); returns how many."""
        self._resume_due = False
        lm, grace = resolve_lm(self._lm), self.config.pending_grace_seconds
        return self._writer.resume_unfinished(lm, grace_seconds=grace, submit=self._background.submit)

    def reprocess(self, *, limit: int = 1000, on_progress: OnProgress | None = None) -> list[AddResult]:
        """Process failed and pending episodes again now (after an LM or embedder outage), one
        batch per scope; returns what each batch did. `on_progress` gets the episodes done of
        those taken after each LM batch (in the thread doing the work)."""
        check_count(limit, "limit", low=1, high=MAX_LIMIT)
        self._first_use()
        self._background.flush()
        return self._writer.reprocess(resolve_lm(self._lm), limit=limit, on_progress=on_progress)

    def flush(self, timeout: float | None = None) -> list[AddResult]:
        """Wait until every background add is processed; returns their results."""
        self._first_use()
        return self._background.flush(timeout=timeout)

    def update(
        self, memory_id: str, content: str, *, reason: str | None = None, **owner: Unpack[OwnerArgs]
    ) -> MemoryRecord:
        """Correct a memory's text: the old version is kept (expired) and an UPDATE is logged."""
        memory_id, where = self._owned("update", memory_id, owner)
        return self._writer.revise(memory_id, content, scope=where, reason=reason)

    def delete(self, memory_id: str, **owner: Unpack[OwnerArgs]) -> DeleteResult:
        """Forget a memory for good: every version, its vectors and keyword entries, its source
        episodes and entities (unless other memories refer to them), its history's content."""
        memory_id, where = self._owned("delete", memory_id, owner)
        return self._writer.erase_memory(memory_id, scope=where)

    def delete_scope(self, **scope: Unpack[ScopeArgs]) -> DeleteResult:
        """Erase everything of a scope (the GDPR path): memories, vectors, keyword entries,
        episodes, events, entities, blocks. The scope is read as `search` reads it: in strict
        mode, leaving out user_id erases only user-less data."""
        return self._writer.erase_scope(self._scope("delete_scope", scope))

    # -- reading -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        recipe: str | Recipe = "hybrid",
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        include_archived: bool = False,
        exact: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> list[Hit]:
        """The `k` memories most relevant to `query`, best first: what is true now, or what was
        true at world time `as_of`, as believed at system time `known_at`. Recipes: "hybrid"
        (default), "dense", "keyword", "graph", "rerank" (docs/retrieval.md). agent_id and run_id left out match any;
        exact=True reads the scope as written, as the agent tools do (left out: stored without).
        Memories archived by `maintain()` are found only with include_archived=True."""
        check_flag(exact, "exact")
        where = self._scope("search", scope, exact=exact)
        options = dict(k=k, recipe=recipe, kinds=kinds, filters=filters, include_archived=include_archived)
        return self._retriever.search_at(query, where, as_of=as_of, known_at=known_at, **options)

    def get(self, memory_id: str, *, recall: bool = True, **owner: Unpack[OwnerArgs]) -> MemoryRecord | None:
        """The current version of a memory (or its last version, marked expired), or None.
        Reading a memory is a recall: it slows its forgetting (docs/lifecycle.md); recall=False
        only looks (inspection tools, evals)."""
        memory_id, where = self._owned("get", memory_id, owner)
        check_flag(recall, "recall")
        row_id = self.store.current_row_id(memory_id, scope=where) if recall else None
        if row_id is not None and self._retriever.track_access:
            self._retriever.recalls.add([row_id])
        self._retriever.flush()  # what it shows includes this recall (unless the file is busy)
        record = self.store.get_memory(memory_id, scope=where)
        return self._retriever.with_retention(record) if record is not None else None

    def get_all(
        self,
        *,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        limit: int = 100,
        offset: int = 0,
        include_archived: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> list[MemoryRecord]:
        """Memories of a scope, newest first, with the same filters as `search`."""
        return self._retriever.list(
            self._scope("get_all", scope),
            kinds=kinds,
            filters=filters,
            as_of=as_of,
            known_at=known_at,
            limit=limit,
            offset=offset,
            include_archived=include_archived,
        )

    def find_ids(
        self, prefix: str, *, limit: int = 2, exact: bool = False, **scope: Unpack[ScopeArgs]
    ) -> list[str]:
        """Full ids of a scope's memories whose id starts with `prefix` (4 characters or more), at
        most `limit`: how the agent tools turn the short ids they show back into ids. The scope
        is read as `search` reads it (exact=True: as written, as the tools read it)."""
        valid_text(prefix, "prefix")
        if len(prefix) < 4:
            raise InvalidInputError(f"prefix must have 4 characters or more, not {len(prefix)}")
        check_count(limit, "limit", low=1, high=100)
        check_flag(exact, "exact")
        return self.store.ids_with_prefix(prefix, self._scope("find_ids", scope, exact=exact), limit=limit)

    def history(self, memory_id: str, **owner: Unpack[OwnerArgs]) -> list[Event]:
        """How a memory changed: its ADD, UPDATE, INVALIDATE, ... events, oldest first."""
        memory_id, where = self._owned("history", memory_id, owner)
        return self.store.history(memory_id, scope=where)

    def timeline(
        self,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        known_at: TimeLike | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> list[MemoryRecord]:
        """How a fact changed: every memory about `subject` (and `predicate`, e.g. "lives_in"),
        current and superseded, in world-time order, as believed at `known_at` (default now)."""
        where, view = self._scope("timeline", scope), TimeView.at(known_at=known_at)
        return self.store.graph.timeline(where, view, subject=subject, predicate=predicate)

    def graph(
        self,
        entity: str | None = None,
        *,
        memory_id: str | None = None,
        depth: int = 1,
        limit: int = 500,
        known_at: TimeLike | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> MemoryGraph:
        """The memory graph around an entity (by name), around a memory (`memory_id`: its
        entities), or of the whole scope (neither): entities, the memories about them (current
        and past, dated) and their links, `depth` hops out. Export with `.to_json()`,
        `.to_dot()`, `.to_networkx()` or `.draw("graph.png")`."""
        if entity is not None and memory_id is not None:
            raise InvalidInputError("graph() takes an entity or a memory_id, not both")
        if entity is not None:
            valid_text(entity, "entity")
        if memory_id is not None:
            check_id(memory_id, "memory_id")
        check_count(depth, "depth", low=1, high=3)
        check_count(limit, "limit", low=1)
        where, view = self._scope("graph", scope), TimeView.at(known_at=known_at)
        return self.store.graph.subgraph(
            where, view, entity=entity, memory_id=memory_id, depth=depth, limit=limit
        )

    def context(
        self,
        query: str,
        *,
        budget_tokens: int = 1500,
        as_of: TimeLike | None = None,
        compress: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> Context:
        """Prompt-ready memory for `query` within `budget_tokens`: core blocks, profile, relevant
        facts (conflicts apart), timelines of changed facts, recent episodes and procedures, in that
        priority; `.included`/`.dropped` report. compress=True: the LM summarizes what did not fit."""
        from dspy_memory.read.context import context_for

        where = self._scope("context", scope)
        lm = self._lm_for(True, purpose="context(compress=True)") if compress else None
        return context_for(self._retriever, query, where, budget_tokens=budget_tokens, as_of=as_of, lm=lm)

    def answer(
        self,
        question: str,
        *,
        budget_tokens: int = 1500,
        as_of: TimeLike | None = None,
        rewrite: bool = False,
        today: TimeLike | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> Answer:
        """Answer from memory with the LM (1-2 calls): `context()` for the question, then
        `AnswerFromMemory`. With rewrite=True, `RewriteQuery` first plans searches and a past date;
        the question and each planned query are searched apart and fused by reciprocal rank."""
        from dspy_memory.read.answer import answer_question

        where, lm = self._scope("answer", scope), self._lm_for(True, purpose="answer()")
        return answer_question(
            self._retriever,
            question,
            where,
            lm=lm,
            programs=self._reading_programs,
            budget_tokens=budget_tokens,
            as_of=as_of,
            rewrite=rewrite,
            today=today,
        )

    def profile(self, **scope: Unpack[ScopeArgs]) -> Any:
        """The scope's profile document (an instance of `profile_schema`), or None."""
        return self.profiles.get(self._scope("profile", scope, exact=True))

    def update_profile(
        self, messages: MessagesInput | None = None, *, recent: int = 20, **scope: Unpack[ScopeArgs]
    ) -> ProfileUpdate:
        """Let the LM patch the profile from `messages` (logged as episodes first), or from the
        scope's `recent` latest episodes. Edits that break the schema are refused and reported."""
        where = self._scope("update_profile", scope, exact=True)
        episodes = self.log(messages, **where.model_dump()) if messages is not None else None
        return self.profiles.update_from(
            episodes, where, lm=self._lm_for(True, purpose="update_profile()"), recent=recent
        )

    # -- feedback (docs/feedback.md) -----------------------------------------------------------

    def feedback(
        self, memory_id: str, verdict: str, *, note: str | None = None, **owner: Unpack[OwnerArgs]
    ) -> FeedbackRecord:
        """Judge a memory: verdict "wrong", "outdated", "irrelevant" or "useful", with a `note` in
        your words. Kept in the file, with the write run that made the memory, as an example for
        the write program to learn from; scoped, exported, audited and erased with the memory."""
        memory_id, where = self._owned("feedback", memory_id, owner)
        check_choice(verdict, "verdict", FEEDBACK_VERDICTS)
        if note is not None:
            valid_text(note, "note")
        return self._writer.judge(memory_id, verdict, note=note, scope=where)

    def feedback_records(
        self,
        *,
        source: str | None = None,
        memory_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        all_scopes: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> list[FeedbackRecord]:
        """Feedback of a scope (read as `get_all` reads it; all_scopes=True: the whole file),
        newest first: corrections, verdicts, restores, refused operations, requests to forget
        carried out (`source`), about one memory (`memory_id`) or all."""
        if source is not None:
            check_choice(source, "source", FEEDBACK_SOURCES)
        if memory_id is not None:
            check_id(memory_id)
        check_count(limit, "limit", low=1)
        check_count(offset, "offset", low=0)
        where = self._scopes.read_or_all("feedback_records", scope, all_scopes)
        self._first_use()
        return self.store.feedback.list(where, source=source, memory_id=memory_id, limit=limit, offset=offset)

    def get_feedback(self, feedback_id: str, **owner: Unpack[OwnerArgs]) -> FeedbackRecord | None:
        """One feedback record by id, if it belongs to the scope given (or all_scopes=True)."""
        check_id(feedback_id, "feedback_id")
        self._first_use()
        return self.store.feedback.get(feedback_id, scope=self._scopes.owner("get_feedback", owner))

    def learn_from_feedback(
        self,
        *,
        lm: Any = None,
        teacher_lm: Any = None,
        reflection_lm: Any = None,
        optimizer: str = "bootstrap",
        program: str = "write",
        seeds: int | Sequence[int] = 5,
        held_out: float = 0.25,
        out: str | os.PathLike[str] = "programs",
        force: bool = False,
        share_across_users: bool = False,
        all_scopes: bool = False,
        **scope: Unpack[ScopeArgs],
    ) -> FeedbackOptimization:
        """Compile the write program ("write": fused, "write_compact") on the older part of this
        scope's feedback, once per seed (`seeds`: how many, or which), check it on the newest part
        next to the program in use, and install the first seed's program into `out` (where
        `Memory(programs=out)` finds it) only if it does not score lower there; force=True
        installs it anyway. The report has the seed table and why; the audit log a receipt
        (docs/optimization.md). Its demonstrations quote the feedback's conversations: in a file
        with several users, share_across_users=True must say that every user's writes may show
        them."""
        from dspy_memory.learn.from_feedback import WRITE_PROGRAMS, optimize_from_feedback

        where = self._scopes.read_or_all("learn_from_feedback", scope, all_scopes)
        self._first_use()
        if isinstance(seeds, int):
            seeds = range(check_count(seeds, "seeds", low=1, high=100))
        in_use = self._writer.program_for(WRITE_PROGRAMS[program][0]) if program in WRITE_PROGRAMS else None
        return optimize_from_feedback(
            self.store,
            self.store.feedback.list(where, limit=None),
            scope=where,
            program=program,
            lm=self._lm_for(True, purpose="learn_from_feedback()") if lm is None else resolve_lm(lm),
            # resolve_lm(None) would be dspy's configured LM: a teacher only when one is given.
            teacher_lm=resolve_lm(teacher_lm) if teacher_lm is not None else None,
            reflection_lm=resolve_lm(reflection_lm) if reflection_lm is not None else None,
            optimizer=optimizer,
            seeds=list(seeds),
            held_out=held_out,
            out=os.fspath(out),
            in_use=in_use,
            force=force,
            share_across_users=share_across_users,
            max_turn_chars=self.config.write.max_turn_chars,
        )

    # -- lifecycle (docs/lifecycle.md) ---------------------------------------------------------

    def maintain(
        self,
        *,
        consolidate: bool = False,
        dry_run: bool = False,
        on_progress: OnProgress | None = None,
        **owner: Unpack[OwnerArgs],
    ) -> MaintenanceReport:
        """Apply the forgetting curve to a scope (or all_scopes=True): archive memories whose
        retention fell below the scope's threshold (DECAY events; `restore()` brings one back),
        or summarize them with the LM (strategy "summarize"); bring back archived memories that
        were recalled. consolidate=True: the LM also merges near-duplicates. Pinned memories,
        profiles and core blocks never decay. Running it twice changes nothing the second time.
        `on_progress` gets the scopes done of those with work, with running counts."""
        self._first_use()
        if not owner.get("all_scopes") and all(
            owner.get(key) is None for key in ("user_id", "agent_id", "run_id")
        ):
            raise ScopeError(
                "maintain() needs a scope: pass user_id= (agent_id=, run_id=) or all_scopes=True"
            )
        if self.config.read_only and not dry_run:  # it may find nothing to change, but it is a write
            raise ReadOnlyError.for_path(self.store.path)
        if not self.config.track_access:
            # evals/lifecycle.py: without recall counts, maintenance archives the facts in use.
            logger.warning(
                "maintain() on a Memory with track_access=False: recalls made through it are not counted, "
                "so memories in use may be archived"
            )
        where = self._scopes.owner("maintain", owner)
        lm = self._lm_for(True, purpose="maintain(consolidate=True)") if consolidate else self._lm_for(None)
        return self._maintainer.run(
            where, lm=lm, consolidate=consolidate, dry_run=dry_run, on_progress=on_progress
        )

    def restore(self, memory_id: str, **owner: Unpack[OwnerArgs]) -> MemoryRecord:
        """Make an archived memory active again (a RESTORE event); it counts as a recall. Archiving
        it was a mistake: a "restore" feedback record keeps that (docs/feedback.md)."""
        memory_id, where = self._owned("restore", memory_id, owner)
        record, _ = self.store.restore(memory_id, scope=where, actor="user", feedback=True)
        return self._retriever.with_retention(record)

    def pin(self, memory_id: str, pinned: bool = True, **owner: Unpack[OwnerArgs]) -> MemoryRecord:
        """Pin a memory so it never decays (pinned=False: unpin); an archived one is restored."""
        memory_id, where = self._owned("pin", memory_id, owner)
        check_flag(pinned, "pinned")
        return self._retriever.with_retention(self.store.set_pinned(memory_id, scope=where, pinned=pinned))

    def lifecycle_settings(
        self,
        /,
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

    def retention(
        self,
        /,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        reset: bool = False,
        **settings: Any,
    ) -> RetentionSettings:
        """The retention policy of a scope, stored in the file when given, e.g.
        `retention(user_id="ada", erase_after="30d", kinds=["turn"])` (raw turns go after 30
        days, facts stay) or `retention(agent_id="support", erase_runs_after="24h")` (sessions
        go a day after their last message); reset=True forgets the stored one first. Looked up
        as lifecycle settings are: the scope's own, its user's, its agent's, the config's
        `retention`. `maintain()` erases what is due; see RetentionSettings and
        docs/governance.md#retention."""
        where = self._scope("retention", dict(user_id=user_id, agent_id=agent_id, run_id=run_id), exact=True)
        if settings or reset:
            return self._maintainer.retention_rules.save(where, settings, reset=reset)
        return self._maintainer.retention_rules.settings_for((where.user_id, where.agent_id, where.run_id))

    def retention_policies(self) -> list[tuple[ScopeArgs, RetentionSettings]]:
        """Every retention policy stored in the file, each with the scope it was stored for
        (`retention(...)` reads the one that applies to a scope). The config's default is not
        among them: it is `config.retention`."""
        return [
            ({"user_id": user, "agent_id": agent, "run_id": run}, policy)
            for (user, agent, run), policy in self._maintainer.retention_rules.policies()
        ]

    def maintenance_reports(self) -> list[MaintenanceReport]:
        """The reports of the scheduled maintenance runs so far (`maintenance_every`), oldest
        first (the last 100)."""
        return list(self._background.periodic_results)

    # -- agents (docs/governance.md#least-privilege-for-agents) ----------------------------------

    def tools(
        self,
        *,
        allow: Iterable[str] | None = None,
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
        in every mode: tools(agent_id="x") reaches only agent x's memories stored without a user.
        Each tool's `acall` runs it off the event loop (docs/async.md)."""
        from dspy_memory.agent.tools import make_tools

        where = self._scope("tools", scope, exact=True)
        self.store.check_open()  # tools made now would fail later, in the middle of an agent run
        return make_tools(self, where, allow, allow_forget=allow_forget, allow_feedback=allow_feedback)

    def scoped(self, **scope: Unpack[ScopeArgs]) -> ScopedMemory:
        """This memory seen through one scope, for application code: `ada = memory.scoped(
        user_id="ada")`, then `ada.add(...)`, `ada.search(...)`, `ada.get(id)`: every call passes
        the scope, and one that names another user or agent (or all_scopes) is refused."""
        from dspy_memory.governance.scoped import ScopedMemory

        return ScopedMemory(self, **scope)

    # -- backups and restore (docs/governance.md#backups-and-restore) ---------------------------

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> BackupManifest:
        """Back up this SQLite file to `dest` while other processes go on writing: the keyword
        index optimized, `VACUUM INTO` (one snapshot, live rows only: nothing erased comes
        along), the copy verified (integrity, indexes agree with rows, schema version), and
        `<dest>.manifest.json` written next to it. An encrypted file's backup is encrypted with
        the same key. Returns the manifest. Refuses an existing `dest` unless overwrite=True."""
        from dspy_memory.governance.backup import backup

        check_flag(overwrite, "overwrite")
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

    def acting_as(self, actor: str, *, request_id: str | None = None) -> acting_as:
        """`with memory.acting_as("support-bot", request_id="req-17"): ...`: changes made inside
        (in this thread or asyncio task, awaitable calls included) are logged as done by `actor`
        for `request_id`."""
        if not isinstance(actor, str):
            raise InvalidInputError(f"actor must be a string, not {type(actor).__name__}")
        return acting_as(actor, request_id=request_id)

    def audit(
        self,
        *,
        operation: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 100,
        **scope: Unpack[ScopeArgs],
    ) -> list[AuditEntry]:
        """Audit log entries, newest first: of one `operation`, between `since` and `until`, of a
        scope (`memory.audit(user_id="ada")` matches the salted hash of "ada": the log holds no
        ids of a scope). Erasure receipts stay after `delete_scope`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
        if operation is not None and not isinstance(operation, str):
            raise InvalidInputError(f"operation must be a string, not {type(operation).__name__}")
        where = self._scope("audit", scope, exact=True) if scope else None
        return self.store.audit_log.entries(
            scope=where, operation=operation, since=to_db(since), until=to_db(until), limit=limit
        )

    def verify_audit(self) -> AuditVerification:
        """Check the audit log's hash chain: `ok`, or the entries that were changed, removed or
        reordered, first one first."""
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
        on_progress: OnProgress | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> ExportReport:
        """Write everything of a scope (read as `search` reads it: `export("ada.jsonl.gz",
        user_id="ada")`), or of the whole store with all_scopes=True, to a JSONL file (gzipped
        when the name ends in .gz): every memory version with both time axes, its sources,
        episodes, entities, events, links, blocks with their versions (profiles too), lifecycle
        settings, write runs, feedback and, with include_embeddings=True, the vectors. Returns
        an ExportReport (path, records per type, sha256 of the records). `on_progress` is told
        the records written of the total (a `Progress` in "records")."""
        from dspy_memory.governance.exchange import export_scope

        check_flag(include_embeddings, "include_embeddings")
        where = self._scopes.read_or_all("export", scope, all_scopes)
        self._first_use()
        self.store.check_open()
        return export_scope(
            self.store,
            file_argument(path, "path"),
            where,
            embeddings=include_embeddings,
            on_progress=on_progress,
        )

    def import_(
        self, path: str | os.PathLike[str], *, reembed: str = "auto", on_progress: OnProgress | None = None
    ) -> ImportReport:
        """Import an export file into this store, keeping ids, versions and timestamps, into the
        scopes recorded in it. The whole file is checked first (header, format version, trailer
        checksum, every record); then what the store lacks is written in one transaction, so a
        failure leaves nothing behind; importing again changes nothing. The file is streamed
        twice (checked, then written in batches), never held in memory whole. A row held here
        with the same id but other content is refused (ImportConflictError). reembed: "auto"
        computes vectors with this store's embedder when the file has none or another embedder's,
        "always", or "never" (refuses when they would be needed). With MemoryConfig.redact the
        file's text is redacted as any add's. `on_progress` is told the records checked, then
        the records written of the file's total (a `Progress` in "records"). Returns an
        ImportReport (new and already present records per type)."""
        from dspy_memory.governance.exchange_import import REEMBED, import_file

        if reembed not in REEMBED:
            raise InvalidInputError(f"reembed must be one of {', '.join(REEMBED)}, not {reembed!r}")
        self._first_use()
        self.store.check_open()
        return import_file(
            self.store,
            self.embedder,
            file_argument(path, "path"),
            reembed=reembed,
            redact=self._writer.redact,
            on_progress=on_progress,
        )

    # -- the file ------------------------------------------------------------------------------

    def check(self) -> AuditReport:
        """Check the file against the invariants: SQLite's integrity check, indexes that agree
        with the rows, no processed input without a memory, one current fact per single-valued
        slot (lives_in, ...), nothing invalidated or processed twice. `report.ok` sums it up."""
        self._first_use()
        self._retriever.flush()
        return self.store.audit(single_valued=sorted(SINGLE_VALUED_PREDICATES))

    def stats(self) -> dict[str, Any]:
        """Row counts, the embedder, what the write program has cost so far, and the lifecycle:
        archived and pinned memories, retention quantiles of the active ones."""
        self._first_use()
        self._retriever.flush()
        stats = self.store.stats()
        return {**stats, "writes": self.store.runs.totals(), "lifecycle": self._maintainer.overview()}

    # -- the awaitable API (docs/async.md) -------------------------------------------------------
    # Each is its sync method run by `self.workers`: off the event loop, its LM calls awaited on
    # the loop through DSPy's async path. One implementation per behaviour; the surface test
    # (tests/test_async.py) checks every public method has its awaitable form or a reason not to.

    aadd = awaitable(add)
    alog = awaitable(log)
    aingest = awaitable(ingest)
    aresume = awaitable(resume)
    areprocess = awaitable(reprocess)
    aflush = awaitable(flush)
    aupdate = awaitable(update)
    adelete = awaitable(delete)
    adelete_scope = awaitable(delete_scope)
    asearch = awaitable(search)
    aget = awaitable(get)
    aget_all = awaitable(get_all)
    afind_ids = awaitable(find_ids)
    ahistory = awaitable(history)
    atimeline = awaitable(timeline)
    agraph = awaitable(graph)
    acontext = awaitable(context)
    aanswer = awaitable(answer)
    aprofile = awaitable(profile)
    aupdate_profile = awaitable(update_profile)
    afeedback = awaitable(feedback)
    afeedback_records = awaitable(feedback_records)
    aget_feedback = awaitable(get_feedback)
    alearn_from_feedback = awaitable(learn_from_feedback)
    amaintain = awaitable(maintain)
    arestore = awaitable(restore)
    apin = awaitable(pin)
    alifecycle_settings = awaitable(lifecycle_settings)
    aretention = awaitable(retention)
    aretention_policies = awaitable(retention_policies)
    abackup = awaitable(backup)
    aaudit = awaitable(audit)
    averify_audit = awaitable(verify_audit)
    aexport = awaitable(export)
    aimport_ = awaitable(import_)
    acheck = awaitable(check)
    astats = awaitable(stats)

    async def aclose(self) -> None:
        """Awaitable `close()`: waits for the awaitable calls running and the background adds in
        a thread of its own (not a worker: closing waits for the workers)."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- plumbing ------------------------------------------------------------------------------

    def _scope(self, method: str, args: Mapping[str, Any], *, exact: bool = False) -> Scope:
        """The scope a call names: as written (`exact`, for writes) or as reads take it. Every
        public call passes through here or `_owned`: the first use that resumes episodes."""
        self._first_use()
        return self._scopes.exact(method, args) if exact else self._scopes.read(method, args)

    def _owned(self, method: str, memory_id: Any, args: Mapping[str, Any]) -> tuple[str, Scope | None]:
        """(the full id, the scope a by-id call must match, None for any)."""
        self._first_use()
        return self._scopes.owned(method, memory_id, args, self.store)

    def _first_use(self) -> None:
        if self._resume_due:
            with self._resume_lock:  # once, even when the first calls come from several threads
                if self._resume_due:
                    self.resume()

    def _scheduled_maintenance(self) -> MaintenanceReport:
        report = self._maintainer.run(None, lm=self._lm_for(None))
        logger.info("scheduled maintenance: %s", report.model_dump(exclude={"refused"}))
        return report

    def _lm_for(self, infer: bool | None, *, purpose: str = ADD_PURPOSE) -> Any:
        return lm_for(self._lm, infer, purpose=purpose)

    @property
    def closed(self) -> bool:
        """Whether this Memory is closed (`close()`): every call but `close` is then refused."""
        return self.store.closed

    def close(self) -> None:
        """Process queued background adds, then close the file. Closing twice is harmless."""
        if self.store.closed:
            return
        self.workers.close()
        self._background.close()
        self._retriever.close()
        if not self.config.read_only:  # it claimed nothing
            self._writer.claims.release()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> Memory:
        # DSPy optimizers deep-copy programs; tools bound to this Memory must keep writing to it.
        return self

    def __repr__(self) -> str:
        return f"Memory({self.config.path!r}, embedder={self.embedder.name!r})"
