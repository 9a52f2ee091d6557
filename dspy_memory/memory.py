"""Memory: the facade. It validates arguments and delegates to the write path, the read path
and the store."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import Unpack

from dspy_memory.agent.profile import ProfileUpdate
from dspy_memory.config import MemoryConfig
from dspy_memory.errors import InvalidInputError
from dspy_memory.governance.facade import GovernanceMethods
from dspy_memory.graph import MemoryGraph
from dspy_memory.lifecycle.facade import LifecycleMethods
from dspy_memory.parts import build_parts, config_with
from dspy_memory.read.retrieval import Recipe
from dspy_memory.reports import AuditReport, FeedbackOptimization
from dspy_memory.scopes import OwnerArgs, ScopeArgs, ScopeRules
from dspy_memory.store import TimeView
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
from dspy_memory.util.lm import lm_for, resolve_lm
from dspy_memory.util.text import SINGLE_VALUED_PREDICATES, check_choice, check_count, check_id, valid_text
from dspy_memory.util.timeutil import TimeLike
from dspy_memory.write.inputs import MessagesInput

logger = logging.getLogger("dspy_memory")


class Memory(LifecycleMethods, GovernanceMethods):
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
        if config.maintenance_every is not None:
            self._background.schedule(config.maintenance_every, self._scheduled_maintenance)
        self._scopes = ScopeRules(config.scope_mode)
        # Unfinished episodes of an earlier process are resumed on first use (see `resume`),
        # never while constructing: that may call an LM.
        self._resume_due = config.process_pending_on_open
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
        **scope: Unpack[ScopeArgs],
    ) -> AddResult:
        """Remember messages (a string, a {"role", "content"} dict, or a list of them).

        Each message is persisted as an episode first. With an LM (infer=None uses one if set;
        infer=True requires one) the write program extracts facts and updates, invalidates or
        confirms existing memories; without, each message is stored as a raw `turn` memory.
        `at` is when it happened (default now; a message's own "at" wins). background=True
        returns once the episodes are on disk; `flush()` waits for them."""
        where = self._scope("add", scope, exact=True)
        queue = self._background.submit if background else None
        return self._writer.add(
            messages, where, lm=self._lm_for(infer), metadata=metadata, at=at, queue=queue
        )

    def log(
        self,
        messages: MessagesInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> list[Episode]:
        """Keep messages in the episode log only, with provenance and time, not made into
        memories (e.g. agent steps whose content is already in memory)."""
        where = self._scope("log", scope, exact=True)
        return self._writer.persist(messages, where, metadata=metadata, at=at, status="done")

    def resume(self) -> int:
        """Process what an earlier process left unfinished: episodes pending or failed for over
        `pending_grace_seconds` that no other writer holds (raw ones now, inferred ones in the
        background). Runs by itself on first use (`process_pending_on_open`); returns how many."""
        self._resume_due = False
        lm, grace = resolve_lm(self._lm), self.config.pending_grace_seconds
        return self._writer.resume_unfinished(lm, grace_seconds=grace, submit=self._background.submit)

    def reprocess(self, *, limit: int = 1000) -> list[AddResult]:
        """Process failed and pending episodes again now (after an LM or embedder outage), one
        batch per scope; returns what each batch did."""
        self._first_use()
        self._background.flush()
        return self._writer.reprocess(resolve_lm(self._lm), limit=limit)

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
        **scope: Unpack[ScopeArgs],
    ) -> list[Hit]:
        """The `k` memories most relevant to `query`, best first: what is true now, or what was
        true at world time `as_of`, as believed at system time `known_at`. Recipes: "hybrid"
        (default), "dense", "keyword", "graph". agent_id and run_id left out match any.
        Memories archived by `maintain()` are found only with include_archived=True."""
        where = self._scope("search", scope)
        options = dict(k=k, recipe=recipe, kinds=kinds, filters=filters, include_archived=include_archived)
        return self._retriever.search_at(query, where, as_of=as_of, known_at=known_at, **options)

    def get(self, memory_id: str, *, recall: bool = True, **owner: Unpack[OwnerArgs]) -> MemoryRecord | None:
        """The current version of a memory (or its last version, marked expired), or None.
        Reading a memory is a recall: it slows its forgetting (docs/lifecycle.md); recall=False
        only looks (inspection tools, evals)."""
        memory_id, where = self._owned("get", memory_id, owner)
        if not isinstance(recall, bool):
            raise InvalidInputError(f"recall must be True or False, not {type(recall).__name__}")
        row_id = self.store.current_row_id(memory_id, scope=where) if recall else None
        if row_id is not None and self.config.track_access:
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
        where, view = self._scope("get_all", scope), dict(as_of=as_of, known_at=known_at)
        options = dict(
            kinds=kinds, filters=filters, limit=limit, offset=offset, include_archived=include_archived
        )
        return self._retriever.list(where, **options, **view)

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

        where, lm = self._scope("context", scope), self._lm_for(True) if compress else None
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

        where, lm = self._scope("answer", scope), self._lm_for(True)
        options = dict(budget_tokens=budget_tokens, as_of=as_of, rewrite=rewrite, today=today)
        return answer_question(
            self._retriever, question, where, lm=lm, programs=self._reading_programs, **options
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
        return self.profiles.update_from(episodes, where, lm=self._lm_for(True), recent=recent)

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
        options = dict(source=source, memory_id=memory_id, limit=limit, offset=offset)
        return self.store.feedback.list(where, **options)

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
            lm=self._lm_for(True) if lm is None else resolve_lm(lm),
            # resolve_lm(None) would be dspy's configured LM: a teacher only when one is given.
            teacher_lm=resolve_lm(teacher_lm) if teacher_lm is not None else None,
            reflection_lm=resolve_lm(reflection_lm) if reflection_lm is not None else None,
            optimizer=optimizer,
            seeds=list(seeds),
            held_out=held_out,
            out=out,
            in_use=in_use,
            force=force,
            share_across_users=share_across_users,
            max_turn_chars=self.config.write.max_turn_chars,
        )

    def check(self) -> AuditReport:
        """Check the file against the invariants: SQLite's integrity check, indexes that agree
        with the rows, no processed input without a memory, one current fact per single-valued
        slot (lives_in, ...), nothing invalidated or processed twice. `report.ok` sums it up."""
        self._first_use()
        self._retriever.flush()
        return self.store.audit(single_valued=SINGLE_VALUED_PREDICATES)

    def stats(self) -> dict[str, Any]:
        """Row counts, the embedder, what the write program has cost so far, and the lifecycle:
        archived and pinned memories, retention quantiles of the active ones."""
        self._first_use()
        self._retriever.flush()
        stats = self.store.stats()
        return {**stats, "writes": self.store.runs.totals(), "lifecycle": self._maintainer.overview()}

    # -- plumbing ------------------------------------------------------------------------------

    def _scope(self, method: str, args: dict[str, Any], *, exact: bool = False) -> Scope:
        """The scope a call names: as written (`exact`, for writes) or as reads take it. Every
        public call passes through here or `_owned`: the first use that resumes episodes."""
        self._first_use()
        return self._scopes.exact(method, args) if exact else self._scopes.read(method, args)

    def _owned(self, method: str, memory_id: Any, args: dict[str, Any]) -> tuple[str, Scope | None]:
        """(the full id, the scope a by-id call must match, None for any)."""
        self._first_use()
        return self._scopes.owned(method, memory_id, args, self.store)

    def _first_use(self) -> None:
        if self._resume_due:
            with self._resume_lock:  # once, even when the first calls come from several threads
                if self._resume_due:
                    self.resume()

    def _lm_for(self, infer: bool | None) -> Any:
        return lm_for(self._lm, infer)

    def close(self) -> None:
        """Process queued background adds, then close the file. Closing twice is harmless."""
        if self.store.closed:
            return
        self._background.close()
        self._retriever.close()
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
