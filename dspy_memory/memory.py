"""Memory: the facade. It validates arguments and delegates to the write path, the read path
and the store."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from dspy_memory.agent.blocks import CoreMemory
from dspy_memory.agent.profile import Profiles, ProfileUpdate
from dspy_memory.config import MemoryConfig
from dspy_memory.embed import Embedder, choose_embedder, make_embedder, reopen_advice
from dspy_memory.errors import (
    EmbedderMismatchError,
    InvalidInputError,
    LMUnavailableError,
    MemoryNotFoundError,
    ScopeError,
)
from dspy_memory.read.retrieval import Recipe, Retriever
from dspy_memory.store import Store, TimeView
from dspy_memory.types import (
    AddResult,
    Answer,
    AuditReport,
    Context,
    DeleteResult,
    EntityEdges,
    Episode,
    Event,
    Hit,
    MemoryRecord,
    Scope,
)
from dspy_memory.util.lm import make_lm, resolve_lm
from dspy_memory.util.text import SINGLE_VALUED_PREDICATES, content_hash, valid_text
from dspy_memory.util.timeutil import TimeLike
from dspy_memory.write.background import BackgroundWriter
from dspy_memory.write.inputs import MessagesInput, check_count, check_id
from dspy_memory.write.writer import Writer

logger = logging.getLogger("dspy_memory")


# Ids are UUIDs (36 characters); the agent tools and the CLI show the first 8.
FULL_ID_LENGTH = 36
MIN_ID_PREFIX = 8
_NEEDS_SCOPE = (
    "{method}() needs the scope that owns the memory: pass user_id= (and agent_id=/run_id= if it "
    "was stored with them), or all_scopes=True to reach any scope"
)


class Memory:
    """Long-term memory in one SQLite file.

    >>> memory = Memory("agent.db")                       # local MiniLM embedder
    >>> memory.add("I moved to Denver last month.", user_id="ada")
    >>> memory.search("where does ada live?", user_id="ada")

    `embedder` may be a spec ("local", "ollama:nomic-embed-text", "openai:text-embedding-3-small",
    "test"), an Embedder, or a `dspy.Embedder`. Left out, a file that already exists is opened with
    the embedder it was built with, and a new file uses the local MiniLM model.

    `lm` (a dspy.LM or a model string) writes memories; left out, the LM set with
    `dspy.configure(lm=...)` does, and without any LM `add()` stores raw turns.
    `write_program` replaces the write program; `programs` is a folder of compiled programs
    (write.json, extract.json, reconcile.json from `python -m evals.optimize`) to load.
    `profile_schema` (a pydantic model) enables one profile document per scope (`profile()`,
    `update_profile()`).

    Scopes are walls (docs/scopes.md): with the default `scope_mode="strict"` a call that leaves
    out user_id reaches only memories stored without a user, and `get`, `history`, `update` and
    `delete` by id need the scope that owns the id (or `all_scopes=True`).
    `scope_mode="wildcard"` makes omitted ids match any value, as in 0.1 (single tenant only).
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
        if isinstance(path_or_config, MemoryConfig):
            config = (
                MemoryConfig.model_validate({**path_or_config.model_dump(), **settings})
                if settings
                else path_or_config
            )
        else:
            config = MemoryConfig(path=os.fspath(path_or_config), **settings)
        self.config = config
        retrieval = config.retrieval
        # Which compiled programs are in use ({part: file}); empty: the programs as shipped.
        self.programs_in_use: dict[str, str] = {}
        self._reading_programs: dict[str, Any] = {}
        if programs is not None:
            from dspy_memory.util.compiled import load_reading_programs, load_write_program

            if write_program is None:
                write_program, self.programs_in_use = load_write_program(programs, config.write.mode)
            self._reading_programs, reading = load_reading_programs(programs)
            self.programs_in_use.update(reading)
            logger.info("compiled programs in use: %s", self.programs_in_use or "none found")

        self.store = Store(
            config.path,
            busy_timeout_ms=config.busy_timeout_ms,
            vector_cache_min_rows=retrieval.vector_cache_min_rows,
            vector_cache_max_rows=retrieval.vector_cache_max_rows,
            keyword_score_budget=retrieval.keyword_score_budget,
        )
        try:
            recorded = self.store.embedder_info()
            self.embedder: Embedder = make_embedder(
                choose_embedder(
                    embedder, config.embedder, recorded[0] if recorded else None, path=config.path
                ),
                batch_size=config.embed_batch_size,
                cache_size=config.embed_cache_size,
                local_backend=config.local_backend,
            )
            try:
                self.store.bind_embedder(self.embedder.name, self.embedder.dim)
            except EmbedderMismatchError as exc:
                raise EmbedderMismatchError(
                    f"{exc} {reopen_advice(exc.recorded or '')}", recorded=exc.recorded
                ) from None
        except BaseException:
            self.store.close()
            raise
        self._lm = (
            lm
            if lm is not None
            else (make_lm(config.lm, config.lm_api_base, num_ctx=config.lm_num_ctx) if config.lm else None)
        )
        self.blocks = CoreMemory(self.store, any_user=config.scope_mode == "wildcard")
        self.profiles = Profiles(self.store, profile_schema)
        self._retriever = Retriever(self.store, self.embedder, retrieval, track_access=config.track_access)
        self._writer = Writer(self.store, self.embedder, self._retriever, config.write, program=write_program)
        self._background = BackgroundWriter(
            self._writer.process,
            debounce_seconds=config.write.debounce_seconds,
            max_wait_seconds=config.write.max_wait_seconds,
            max_batch=config.write.max_batch,
        )
        if config.process_pending_on_open:
            try:
                resumed = self._writer.resume(
                    self._writer.unfinished(grace_seconds=config.pending_grace_seconds),
                    resolve_lm(self._lm),
                    submit=self._background.submit,
                )
                if resumed:
                    logger.info("resumed %d unfinished episodes from %s", resumed, config.path)
            except Exception as exc:  # the episodes stay on disk and are retried next time
                logger.warning("pending episodes in %s could not be processed yet: %s", config.path, exc)

    # -- writing -------------------------------------------------------------------------------

    def add(
        self,
        messages: MessagesInput,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
        infer: bool | None = None,
        background: bool = False,
    ) -> AddResult:
        """Remember messages (a string, a {"role", "content"} dict, or a list of them).

        Each message is persisted as an episode first. With an LM (infer=None uses one when one
        is configured; infer=True requires one) the write program extracts facts and updates,
        invalidates or confirms existing memories; without, each message is stored as a raw
        `turn` memory. `at` is when it happened (default now); a message's own "at" overrides
        it. background=True returns once the episodes are on disk; `flush()` waits for them.
        """
        scope = Scope.of(user_id, agent_id, run_id)
        lm = self._lm_for(infer)
        episodes = self._writer.persist(messages, scope, metadata=metadata, at=at, infer=lm is not None)
        if background:
            self._background.submit(episodes, lm)
            mode = self._writer.mode_for(lm) if lm is not None else "raw"
            return AddResult(episodes=episodes, mode=mode, queued=True)
        return self._writer.process(episodes, lm)

    def log(
        self,
        messages: MessagesInput,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        at: TimeLike | None = None,
    ) -> list[Episode]:
        """Keep messages in the episode log only: recorded with provenance and time, but not
        made into memories (e.g. agent steps whose content is already in memory)."""
        return self._writer.persist(
            messages, Scope.of(user_id, agent_id, run_id), metadata=metadata, at=at, status="done"
        )

    def _lm_for(self, infer: bool | None) -> Any:
        if infer is False:
            return None
        lm = resolve_lm(self._lm)
        if lm is None and infer:
            raise LMUnavailableError(
                "add(infer=True) needs an LM: dspy.configure(lm=dspy.LM('ollama_chat/llama3.2')), "
                "Memory(path, lm=...), or DSPY_MEMORY_LM=...; infer=False stores raw turns"
            )
        return lm

    def reprocess(self, *, limit: int = 1000) -> list[AddResult]:
        """Process failed and pending episodes again now (after an LM or embedder outage), one
        batch per scope; returns what each batch did."""
        self._background.flush()
        return self._writer.reprocess(resolve_lm(self._lm), limit=limit)

    def flush(self, timeout: float | None = None) -> list[AddResult]:
        """Wait until every background add is processed; returns their results."""
        return self._background.flush(timeout=timeout)

    def update(
        self,
        memory_id: str,
        content: str,
        *,
        reason: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
    ) -> MemoryRecord:
        """Correct a memory's text. The old version is kept (expired) and an UPDATE is logged.
        Pass the scope that owns the memory, or all_scopes=True (docs/scopes.md)."""
        check_id(memory_id)
        if not valid_text(content, "update() content").strip():
            raise InvalidInputError("update() needs the new content as a non-empty string")
        if reason is not None:
            valid_text(reason, "reason")
        memory_id, scope = self._owned("update", memory_id, user_id, agent_id, run_id, all_scopes)
        current = self.store.get_memory(memory_id, scope=scope)
        if current is None or current.status == "expired":
            raise MemoryNotFoundError(f"no current memory with id {memory_id!r}")
        if current.content == content:
            return current
        _, new = self.store.supersede(
            memory_id,
            scope=scope,
            changes={"content": content, "content_hash": content_hash(content)},
            embedding=self.embedder.embed([content])[0],
            event="UPDATE",
            actor="user",
            reason=reason,
        )
        return new

    def delete(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
    ) -> DeleteResult:
        """Forget a memory for good: every version, its vectors and keyword entries, its source
        episodes and entities (unless other memories refer to them) and the content of its
        history. Pass the scope that owns the memory, or all_scopes=True (docs/scopes.md)."""
        memory_id, scope = self._owned("delete", memory_id, user_id, agent_id, run_id, all_scopes)
        result = self.store.erase.memory(memory_id, scope=scope)
        self._drop_cached_vectors()
        return result

    def delete_scope(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> DeleteResult:
        """Erase everything stored for a scope (the GDPR path): memories, vectors, keyword
        entries, episodes, events, entities and blocks. The scope is read as `search` reads it
        (docs/scopes.md): in strict mode, leaving out user_id erases only user-less data."""
        result = self.store.erase.scope(self._read_scope(user_id, agent_id, run_id))
        self._drop_cached_vectors()
        return result

    # -- reading -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        k: int = 10,
        recipe: str | Recipe = "hybrid",
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> list[Hit]:
        """The `k` memories most relevant to `query` in a scope, best first.

        By default only what is true now; `as_of` asks what was true at a world time,
        `known_at` what the system believed at a system time. Recipes: "hybrid" (default),
        "dense", "keyword". Leaving out user_id searches memories stored without a user
        (strict scope mode; docs/scopes.md); agent_id and run_id left out match any.
        """
        return self._search_in(
            self._read_scope(user_id, agent_id, run_id),
            query,
            k=k,
            recipe=recipe,
            as_of=as_of,
            known_at=known_at,
            kinds=kinds,
            filters=filters,
        )

    def _search_in(
        self,
        scope: Scope,
        query: str,
        *,
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        **options: Any,
    ) -> list[Hit]:
        # `search` over a scope built by the caller (tools bind an exact scope in every mode).
        view = TimeView.at(as_of=as_of, known_at=known_at)
        return self._retriever.search(query, scope, view=view, **options)

    def get(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
    ) -> MemoryRecord | None:
        """The current version of a memory (or its last version, marked expired); None if
        there is no such memory in the scope. Pass the scope that owns the memory, or
        all_scopes=True (docs/scopes.md)."""
        memory_id, scope = self._owned("get", memory_id, user_id, agent_id, run_id, all_scopes)
        self._retriever.flush()
        return self.store.get_memory(memory_id, scope=scope)

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryRecord]:
        """Memories of a scope, newest first, with the same filters as `search`."""
        check_count(limit, "limit", low=1)
        check_count(offset, "offset", low=0)
        scope = self._read_scope(user_id, agent_id, run_id)
        view = TimeView.at(as_of=as_of, known_at=known_at)
        predicate = self.store.memory_predicate(scope, view, kinds, filters)
        self._retriever.flush()
        return self.store.list_memories(predicate, view, limit=limit, offset=offset)

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
    ) -> list[Event]:
        """How a memory changed: its ADD, UPDATE, INVALIDATE, ... events, oldest first. Pass
        the scope that owns the memory, or all_scopes=True (docs/scopes.md)."""
        memory_id, scope = self._owned("history", memory_id, user_id, agent_id, run_id, all_scopes)
        return self.store.history(memory_id, scope=scope)

    def timeline(
        self,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        known_at: TimeLike | None = None,
    ) -> list[MemoryRecord]:
        """How a fact changed: every memory about `subject` (and `predicate`, e.g. "lives_in"),
        current and superseded, in world-time order, as believed at `known_at` (default now)."""
        if subject is None and predicate is None:
            raise InvalidInputError("timeline() needs subject=, predicate= or both")
        for name, value in (("subject", subject), ("predicate", predicate)):
            if value is not None:
                valid_text(value, name)
        view = TimeView.at(known_at=known_at)
        return self.store.graph.timeline(
            self._read_scope(user_id, agent_id, run_id), view, subject=subject, predicate=predicate
        )

    def graph(
        self,
        entity: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        known_at: TimeLike | None = None,
    ) -> EntityEdges:
        """An entity's edges: memories in which it is the subject or the object, current and
        past, with their validity dates."""
        scope = self._read_scope(user_id, agent_id, run_id)
        entities = self.store.graph.entities(valid_text(entity, "entity"), scope)
        edges = self.store.graph.edges([e.id for e in entities], scope, TimeView.at(known_at=known_at))
        return EntityEdges(entity=entity, entities=entities, edges=edges)

    def context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        budget_tokens: int = 1500,
        as_of: TimeLike | None = None,
        compress: bool = False,
    ) -> Context:
        """Prompt-ready memory for `query` within `budget_tokens`: core blocks, profile,
        relevant facts (conflicts set apart), timelines of changed facts, recent episodes and
        procedures, in that priority. `.text` is the context, `.included`/`.dropped` the report.
        compress=True summarizes what did not fit with the LM (one call)."""
        from dspy_memory.read.context import ContextBuilder, lm_compressor

        scope = self._read_scope(user_id, agent_id, run_id)

        def search(text: str, *, k: int, as_of: Any, kinds: Sequence[str]) -> list[Hit]:
            return self._search_in(scope, text, k=k, as_of=as_of, kinds=kinds)

        builder = ContextBuilder(self.store, search)
        summarize = lm_compressor(self._lm_for(True), query) if compress else None
        return builder.build(query, scope, budget_tokens=budget_tokens, as_of=as_of, compress=summarize)

    def answer(
        self,
        question: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        budget_tokens: int = 1500,
        as_of: TimeLike | None = None,
        rewrite: bool = False,
        today: TimeLike | None = None,
    ) -> Answer:
        """Answer a question from memory with the LM: `context()` for it, then
        `AnswerFromMemory`. With rewrite=True, `RewriteQuery` first plans searches and a past
        date; the question and each planned query are searched apart and fused by reciprocal
        rank into the context. 1-2 LM calls."""
        from dspy_memory.read.answer import answer_question

        return answer_question(
            self,
            question,
            self._read_scope(user_id, agent_id, run_id),
            lm=self._lm_for(True),
            budget_tokens=budget_tokens,
            as_of=as_of,
            rewrite=rewrite,
            today=today,
            answerer=self._reading_programs.get("answer"),
            rewriter=self._reading_programs.get("query"),
        )

    def profile(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> Any:
        """The scope's profile document (an instance of `profile_schema`), or None."""
        return self.profiles.get(Scope.of(user_id, agent_id, run_id))

    def update_profile(
        self,
        messages: MessagesInput | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        recent: int = 20,
    ) -> ProfileUpdate:
        """Let the LM patch the profile from `messages` (logged as episodes first), or from the
        scope's `recent` latest episodes. Edits that break the schema are refused and reported."""
        scope = Scope.of(user_id, agent_id, run_id)
        if messages is not None:
            episodes = self.log(messages, **scope.model_dump())
        else:
            episodes = self.store.episodes.list(scope, limit=recent, newest_first=True)[::-1]
        return self.profiles.update(episodes, scope, lm=self._lm_for(True))

    def tools(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        allow: Sequence[str] | None = None,
    ) -> list[Any]:
        """Tools for `dspy.ReAct` bound to this scope: recall, remember, revise, forget,
        memory_history, core_memory_append, core_memory_replace (`allow` picks some). The
        scope is exact in every scope mode: tools(agent_id="x") reaches only agent x's
        memories stored without a user (docs/scopes.md).

        >>> agent = dspy.ReAct("question -> answer", tools=memory.tools(user_id="ada"))
        """
        from dspy_memory.agent.tools import make_tools

        self.store.check_open()  # tools made now would fail later, in the middle of an agent run
        return make_tools(self, Scope.of(user_id, agent_id, run_id), allow)

    def check(self) -> AuditReport:
        """Check the file against the invariants: SQLite's integrity check, indexes that agree
        with the memory rows, no processed input left without a memory, one current fact per
        single-valued slot (lives_in, works_at, ...), nothing invalidated or processed twice.
        `report.ok` sums it up; the other fields say what and where."""
        self._retriever.flush()
        return self.store.audit(single_valued=SINGLE_VALUED_PREDICATES)

    def stats(self) -> dict[str, Any]:
        """Row counts, the embedder, and what the write program has cost so far."""
        return {**self.store.stats(), "writes": self.store.runs.totals()}

    # -- plumbing ------------------------------------------------------------------------------

    def _read_scope(self, user_id: Any, agent_id: Any, run_id: Any) -> Scope:
        """The scope a read names (docs/scopes.md): in strict mode an omitted user_id means
        "stored without a user"; in wildcard mode it matches any user."""
        return Scope.of(user_id, agent_id, run_id, any_user=self.config.scope_mode == "wildcard")

    def _owned(
        self, method: str, memory_id: Any, user_id: Any, agent_id: Any, run_id: Any, all_scopes: bool
    ) -> tuple[str, Scope | None]:
        """(the full id, the scope a by-id call must match). A unique prefix of at least 8
        characters stands for the id, as the agent tools and the CLI show ids shortened."""
        check_id(memory_id)
        scope = self._owning_scope(method, user_id, agent_id, run_id, all_scopes)
        if MIN_ID_PREFIX <= len(memory_id) < FULL_ID_LENGTH:
            found = self.store.ids_with_prefix(memory_id, scope, limit=6)
            if len(found) > 1:
                raise InvalidInputError(
                    f"{method}(): id prefix {memory_id!r} matches several memories "
                    f"({', '.join(found[:5])}{', ...' if len(found) > 5 else ''}); give more characters"
                )
            if found:
                return found[0], scope
        return memory_id, scope

    def _owning_scope(
        self, method: str, user_id: Any, agent_id: Any, run_id: Any, all_scopes: bool
    ) -> Scope | None:
        """The scope a by-id call must match; None reaches any scope (all_scopes=True, or no
        scope at all in wildcard mode). Strict mode refuses a call without a scope."""
        named = user_id is not None or agent_id is not None or run_id is not None
        if not isinstance(all_scopes, bool):
            raise ScopeError(f"all_scopes must be True or False, not {type(all_scopes).__name__}")
        if all_scopes:
            if named:
                raise ScopeError(f"{method}(): pass the scope or all_scopes=True, not both")
            return None
        if not named and self.config.scope_mode == "wildcard":
            return None
        if not named:
            raise ScopeError(_NEEDS_SCOPE.format(method=method))
        return self._read_scope(user_id, agent_id, run_id)

    def _drop_cached_vectors(self) -> None:
        # The embedding cache is keyed by content; after a purge none of it may stay in memory.
        # Dropping all of it costs a few re-embeddings and needs no list of what was purged.
        clear = getattr(self.embedder, "clear_cache", None)
        if clear is not None:
            clear()

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
