"""MemoryConfig: every tunable in one validated place, loadable from TOML and the environment."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, ConfigDict, Field, SecretStr, field_validator

from dspy_memory.config_errors import CheckedSettings, embedder_spec
from dspy_memory.retention_settings import RetentionSettings
from dspy_memory.tool_settings import ToolSettings

logger = logging.getLogger("dspy_memory")


class RetrievalConfig(CheckedSettings):
    """Weights and sizes of the read path (see docs/retrieval.md)."""

    model_config = ConfigDict(extra="forbid")

    # "rrf": reciprocal-rank fusion, sum(weight / (rrf_k + rank)) over sources.
    # "convex": weighted sum of per-query normalized scores (similarity min-max, BM25 / max).
    # "zscore": weighted sum of each source's scores standardized over its candidates (through
    # the normal CDF, so in [0, 1]): calibrated by the query's own score distribution.
    # Defaults chosen by leave-one-conversation-out cross-validation on the LoCoMo development
    # split (docs/benchmarks.md): a small rrf_k trusts the top ranks, and BM25 is the stronger
    # single source on conversational text.
    fusion: Literal["rrf", "convex", "zscore"] = "rrf"
    rrf_k: float = Field(5.0, gt=0)
    dense_weight: float = Field(0.7, ge=0)
    keyword_weight: float = Field(1.0, ge=0)
    # Agreement: when the top `agreement_depth` hits of dense and keyword share less than
    # `agreement_share` of their rows, dense weighs less, down to `disagreement_dense_weight`
    # when they share none (read/scores.py `agreed_weight`; 0 depth: off). Off by default: with
    # keyword statistics per user, the cross-validation no longer chooses it on all five
    # development conversations (docs/benchmarks.md).
    agreement_depth: int = Field(0, ge=0, le=100)
    agreement_share: float = Field(0.25, gt=0, le=1)
    disagreement_dense_weight: float = Field(0.3, ge=0)
    # Each source contributes max(candidates, k * candidate_factor) candidates to fusion.
    candidates: int = Field(100, ge=1)
    candidate_factor: int = Field(2, ge=1)
    # Rescoring: final = (1 - sum(w)) * fused_normalized + w_r * recency + w_i * importance
    # + w_s * strength_normalized + w_retention * retention.
    recency_weight: float = Field(0.05, ge=0, le=1)
    recency_half_life_days: float = Field(30.0, gt=0)
    importance_weight: float = Field(0.05, ge=0, le=1)
    strength_weight: float = Field(0.0, ge=0, le=1)
    # + w_retention * the forgetting curve's retention (lifecycle.base_days, importance_boost):
    # memories recalled lately, often or important rank a little higher.
    retention_weight: float = Field(0.05, ge=0, le=1)
    # Dense search is a binary (sign-bit) coarse pass, then exact cosine rescoring of
    # max(coarse_min, k * coarse_factor) candidates (MiniLM: top-100 codes hold ~99% of the
    # exact top 10).
    coarse_min: int = Field(128, ge=1)
    coarse_factor: int = Field(10, ge=1)
    # Partitions with at least this many vectors are searched from an in-process code cache
    # instead of vec0, whose top-k costs O(rows * k) (measured: k=100 over 100k rows, 26 ms).
    vector_cache_min_rows: int = Field(2048, ge=0)
    vector_cache_max_rows: int = Field(4_000_000, ge=0)
    # Run the keyword search in a worker thread while the query is embedded and searched.
    parallel_sources: bool = True
    # Terms dropped from keyword queries (they match everything and cost the most).
    drop_stopwords: bool = True
    # On scopes larger than this many rows, BM25 scores about this many matching rows at most:
    # the most common query terms stop selecting rows (see store/keyword.py).
    keyword_score_budget: int = Field(1000, ge=1)
    max_query_terms: int = Field(32, ge=1)
    # Raw turns are keyword-indexed with the text of up to `turn_context_before` episodes before
    # them and `turn_context_after` after, said within `turn_context_gap_minutes` (a reply is
    # found by its question's words); a term found there weighs `keyword_context_weight` of one
    # in the turn itself. The window applies to turns indexed from then on (docs/retrieval.md).
    turn_context_before: int = Field(2, ge=0, le=20)
    turn_context_after: int = Field(1, ge=0, le=20)
    # Graph expansion (recipe "graph"; in "hybrid" too when graph_in_hybrid): memories sharing an
    # entity (as subject or object) with the top `graph_seeds` hits gain up to `graph_weight`;
    # entities named by more than `graph_max_share` of a scope's memories link everything and
    # are skipped; at most `graph_per_entity` memories per entity; `graph_depth` hops.
    # Time in the query (read/temporal.py): memories true in the window a query names ("in May
    # 2023", "last year": counted back from as_of) gain `temporal_weight`; for "when"
    # questions, memories among the top `when_candidates` whose text dates what it says gain
    # `when_weight`. Both chosen by the cross-validation (docs/benchmarks.md).
    temporal_weight: float = Field(0.6, ge=0, le=1)
    when_weight: float = Field(0.1, ge=0, le=1)
    when_candidates: int = Field(30, ge=1)
    graph_in_hybrid: bool = True
    graph_weight: float = Field(0.3, ge=0, le=1)
    graph_seeds: int = Field(5, ge=1)
    graph_depth: int = Field(1, ge=1, le=2)
    graph_max_share: float = Field(0.05, gt=0, le=1)
    graph_per_entity: int = Field(20, ge=1)
    turn_context_gap_minutes: float = Field(60.0, ge=0)
    keyword_context_weight: float = Field(0.5, ge=0)
    # Said together: a memory gains `said_together_weight` x the best final score among the
    # top `said_together_top` hits whose time is within `turn_context_gap_minutes` of its own
    # (itself included), so what was said around a strong hit rises with it (0: off). The
    # default is what the cross-validation chooses on all five development conversations.
    said_together_weight: float = Field(0.3, ge=0, le=1)
    said_together_top: int = Field(10, ge=1, le=1000)
    # Named speaker: a memory said by someone the query names (a source episode's `name`, by
    # its first word or whole) gains this much, so "what did Caroline..." prefers Caroline's
    # own words (read/boosts.py `boost_named_speaker`; 0: off). The default is what the
    # cross-validation chooses on all five development conversations (docs/benchmarks.md).
    speaker_weight: float = Field(0.3, ge=0, le=1)
    # Recipe "rerank": the top `rerank_candidates` hybrid hits re-ordered by `reranker`, then
    # cut to k. "lm": the RerankMemories program on the Memory's LM (one call a search; an
    # answer that fails or takes over `rerank_timeout_s` seconds leaves the hybrid order);
    # "lm:<model>": on that model instead; "cross-encoder:<model>": sentence-transformers'
    # CrossEncoder (the `rerank` extra), a Hugging Face name or a folder. Quality unmeasured
    # here (docs/retrieval.md says how to measure it).
    reranker: str = "lm"
    rerank_candidates: int = Field(30, ge=1, le=1000)
    rerank_timeout_s: float = Field(30.0, gt=0)

    @field_validator("reranker")
    @classmethod
    def _reranker_spec(cls, value: str) -> str:
        from dspy_memory.read.rerank import reranker_problem

        problem = reranker_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class WriteConfig(CheckedSettings):
    """The LM write path (see docs/write-path.md)."""

    model_config = ConfigDict(extra="forbid")

    # "fused": one LM call extracts facts and decides operations; "two_step": extract, then
    # reconcile (two calls; the second is skipped when there is nothing to compare with);
    # "compact": the fused job in a prompt under 1,000 tokens for 3 turns and 5 memories, for
    # small local models; "auto": compact with a local Ollama model, fused with any other.
    mode: Literal["fused", "two_step", "compact", "auto"] = "auto"
    # Existing memories shown to the LM: the top `candidates_per_message` of a hybrid search
    # per message (the latest `max_candidate_queries` messages), at most `max_candidates`.
    candidates_per_message: int = Field(5, ge=0)
    max_candidate_queries: int = Field(8, ge=1)
    max_candidates: int = Field(20, ge=0)
    # Attempts per batch (each may itself cost two calls: DSPy's ChatAdapter retries a
    # malformed answer once in JSON).
    max_attempts: int = Field(2, ge=1)
    # Limits on one answer; what exceeds them is refused and recorded.
    max_ops: int = Field(50, ge=1)
    max_content_chars: int = Field(1000, ge=10)
    max_deletes: int = Field(5, ge=0)
    # DELETE is applied only when a user-authored message of the batch matches this pattern: a
    # memory whose text says "delete everything" must not be able to trigger deletions.
    forget_pattern: str = (
        r"\b(forget|delete|erase|remove|wipe|purge)\b|\b(don['\u2019]?t|do not) (remember|keep|store)\b"
        r"|stop remembering"
    )
    # Longer messages are cut for the prompt (the episode keeps every character).
    max_turn_chars: int = Field(4000, ge=100)
    # Strength added to a memory each time it is stated again (NOOP).
    confirm_strength: float = Field(1.0, ge=0)
    # Background writer: a batch of one scope is processed once no message arrived for it for
    # `debounce_seconds`, or `max_wait_seconds` after its first message, or at `max_batch`.
    debounce_seconds: float = Field(2.0, ge=0)
    max_wait_seconds: float = Field(30.0, ge=0)
    # At most this many episodes go to the LM in one call (add(), background batches and
    # reprocess() alike); a longer input is split into several calls.
    max_batch: int = Field(20, ge=1)
    # A batch whose prompt would exceed this many tokens (counted before the call on the
    # rendered prompt) is split further. Small local models have small windows.
    max_prompt_tokens: int = Field(6000, ge=500)
    # An LM call that has not answered after this many seconds fails the batch: its episodes
    # are kept as raw turns, marked failed, and reprocess() tries again.
    lm_timeout_s: float = Field(120.0, gt=0)
    # When a memory the LM acted on changed under it (another writer), the batch is planned
    # again against fresh memories this many times, then kept as raw turns (failed).
    max_conflict_retries: int = Field(2, ge=0)
    # An episode being processed is claimed by one writer for this long (renewed while it
    # works); replay and reprocess() in other processes leave claimed episodes alone, unless
    # the claimant is a process of this machine that no longer runs.
    claim_lease_seconds: float = Field(600.0, gt=0)


class LifecycleSettings(CheckedSettings):
    """What maintenance archives (docs/lifecycle.md); `Memory.lifecycle_settings(...)` overrides
    these per scope, in the file."""

    model_config = ConfigDict(extra="forbid")

    # A memory is archived when its retention R = exp(-dt / S) falls below `archive_below`...
    archive_below: float = Field(0.05, gt=0, lt=1)
    # ...unless it was stored less than `min_age_days` ago, recalled at least `keep_recalls`
    # times (None: no such limit), or its importance is at least `keep_importance`.
    min_age_days: float = Field(30.0, ge=0)
    keep_recalls: int | None = Field(None, ge=1)
    keep_importance: float = Field(0.9, gt=0, le=1)
    # "archive": forgotten memories are archived one by one. "summarize": with an LM, forgotten
    # memories of a scope are condensed, `summarize_group` at a time (oldest first), into
    # summary memories that point to them (they are archived); without an LM, archived.
    strategy: Literal["archive", "summarize"] = "archive"
    summarize_group: int = Field(8, ge=2, le=50)


class LifecycleConfig(LifecycleSettings):
    """The forgetting curve and maintenance (docs/lifecycle.md).

    Retention R = exp(-dt / S): dt is the days since the last recall (a search that returned
    it, a get(), a restatement) or, never recalled, since it was stored; the stability
    S = base_days * (strength + recalls) * (1 + importance_boost * importance), where strength
    starts at 1 and grows by write.confirm_strength each time the fact is stated again. A
    memory never recalled, of importance 0.5, keeps R above 0.05 for about 135 days."""

    base_days: float = Field(30.0, gt=0)
    importance_boost: float = Field(1.0, ge=0)
    # A search recalls its top `recalls_per_search` hits (what a reader takes from it); the rest
    # were only shown. In `python -m evals.lifecycle` (docs/benchmarks.md) counting all 10 hits
    # kept 3 in 4 never-asked-about memories from fading (active set -10%); 5 shrank it by 21%
    # with recall of the facts in use unchanged; 3 and 1 cost 0.006 and 0.058 of it. get() and
    # restore() always recall.
    recalls_per_search: int = Field(5, ge=0)
    # Kinds that never decay (profile documents and core blocks live apart and never do either).
    protected_kinds: tuple[str, ...] = ("profile",)
    # Merge near-duplicates (cosine similarity >= merge_similarity, or one subject and predicate)
    # with the LM during maintain(consolidate=True): at most `max_clusters` clusters per scope.
    merge_similarity: float = Field(0.9, gt=0, le=1)
    max_clusters: int = Field(20, ge=1)
    max_cluster_size: int = Field(8, ge=2, le=50)


class PostgresConfig(CheckedSettings):
    """The PostgreSQL backend (docs/scaling.md); used when the store is a postgresql:// URL."""

    model_config = ConfigDict(extra="forbid")

    # Connections per process (psycopg_pool); one is held per thread while it reads or writes.
    pool_size: int = Field(10, ge=1)
    # Split the search tables (vectors, keyword terms) by hash of the user id into this many
    # partitions when the schema is created (1: no partitioning). Decided once per database.
    partitions: int = Field(1, ge=1, le=1024)
    # The rows of one HNSW block: a user's vectors are indexed in blocks of this many rows (each
    # built after the write that fills it); the rest, fewer than this, are searched exactly, so
    # no insert pays a graph insertion. At least 1 (store/postgres/hnsw_blocks.py).
    exact_max_rows: int = Field(20_000, ge=0)


class MemoryConfig(CheckedSettings):
    """Configuration of a `Memory`. Build it directly, from TOML, or from DSPY_MEMORY_* env vars."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # Where memories live: a SQLite file (or ":memory:"), or a postgresql:// URL. `store=` is
    # accepted as another name for it.
    path: str = Field("memory.db", validation_alias=AliasChoices("path", "store"))
    postgres: PostgresConfig = Field(default_factory=PostgresConfig)
    # A passphrase that encrypts the SQLite file (SQLCipher, the `encryption` extra; see
    # docs/governance.md). None: $DSPY_MEMORY_ENCRYPTION_KEY if set, else a plaintext file.
    # A SecretStr: repr, logs and JSON dumps show "**********".
    encryption_key: SecretStr | None = None
    # Who the audit log names for changes made through this Memory (a service or person), unless
    # a call says otherwise with `memory.acting_as(...)` (docs/governance.md, "The audit log").
    actor: str | None = Field(None, min_length=1, max_length=200)
    # "local" (MiniLM), "local:<model>", "ollama:<model>",
    # "openai:<model>", or "test" (deterministic, NOT semantic; for tests only). None: the
    # embedder an existing file was built with, else "local".
    embedder: Annotated[str | None, AfterValidator(embedder_spec)] = None
    # How a "local" embedder runs: "numpy" (BERT models with mean pooling, MiniLM included; no
    # torch), "sentence-transformers" (any model; needs torch), or "auto" (numpy when it can).
    # None: $DSPY_MEMORY_LOCAL_BACKEND, else "auto". Both give the same vectors.
    local_backend: Literal["auto", "numpy", "sentence-transformers"] | None = None
    embed_batch_size: int = Field(64, ge=1)
    embed_cache_size: int = Field(10_000, ge=0)
    # Threads running the awaitable API's calls at once (docs/async.md); each holds its thread
    # while its LM answer is awaited on the loop, and writes queue at the store anyway.
    async_workers: int = Field(16, ge=1, le=256)
    # How long a model's batch may wait for more concurrent callers' texts (embed/batching.py;
    # only while batches have had company, so a lone caller never waits). Under load the model
    # is busy and batches fill while it runs: 16 threads on MiniLM gave the same rate with 0, 2
    # and 5 ms (113-123 ops/s, 8 texts a batch); 2 ms costs a lone burst little and may help a
    # trickle of callers that arrive just apart.
    embed_batch_wait_ms: float = Field(2.0, ge=0, le=1000)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    write: WriteConfig = Field(default_factory=WriteConfig)
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    # The retention policy of every scope without one of its own (docs/governance.md#retention);
    # by default nothing is erased unless it was given an expiry.
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    # The agent tools' answer limits and the core blocks they may start (docs/agents.md).
    tools: ToolSettings = Field(default_factory=ToolSettings)
    # Run `maintain()` for every scope this often ("12h", "1d", "1w", or seconds) in the
    # background writer's thread; None: only when called.
    maintenance_every: str | float | None = None

    @field_validator("maintenance_every")
    @classmethod
    def _interval(cls, value: str | float | None) -> float | None:
        from dspy_memory.util.timeutil import interval_seconds

        if value is None:
            return None
        try:
            return interval_seconds(value, "maintenance_every")
        except Exception as exc:  # a ValueError is what pydantic reports as a validation error
            raise ValueError(str(exc)) from None

    # The LM that writes memories, as a DSPy model string ("ollama_chat/llama3.2",
    # "openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"). None: the LM set with
    # dspy.configure(lm=...), if any; without one, add() stores raw turns.
    lm: str | None = None
    lm_api_base: str | None = None
    # Ollama's context window for `lm` (sent as options.num_ctx; None: 8192). Older Ollama
    # versions default to 2,048 tokens and silently cut longer prompts.
    lm_num_ctx: int | None = Field(None, ge=512)
    # How omitted ids match (docs/scopes.md). "strict" (default): user_id is a wall; a call
    # that leaves it out reaches only memories stored without a user, and get/history/update/
    # delete by id need the owning scope (or all_scopes=True). "wildcard": omitted ids match
    # any value, as in 0.1 (single-tenant use only).
    scope_mode: Literal["strict", "wildcard"] = "strict"
    # Secret redaction (docs/governance.md#secret-redaction): True, or a list of kinds
    # ("aws_key", "github_token", "url_password", "card_number", "private_key", ...), replaces
    # each secret found with [REDACTED:<kind>] before anything is stored, episodes included.
    # Tokens and keys need the `redact` extra (detect-secrets).
    redact: bool | list[str] = False

    @field_validator("redact")
    @classmethod
    def _redact_kinds(cls, value: bool | list[str]) -> bool | list[str]:
        from dspy_memory.governance.redact import kinds_from

        try:
            kinds_from(value)
        except Exception as exc:  # a ValueError is what pydantic reports as a validation error
            raise ValueError(str(exc)) from None
        return value

    # Open an existing store for reading only (docs/scaling.md, "Read-only mode"), e.g. an app
    # server searching a PostgreSQL standby: no schema is created or migrated, nothing is written
    # (recall counts and resuming pending episodes are off), and every write raises ReadOnlyError.
    read_only: bool = False

    @field_validator("read_only")
    @classmethod
    def _no_maintenance_when_read_only(cls, value: bool, info: Any) -> bool:
        if value and info.data.get("maintenance_every") is not None:
            raise ValueError("maintenance_every writes to the store: leave it out with read_only=True")
        return value

    # Count recalls (access_count, last_accessed_at) on every search; the forgetting curve uses it.
    # Best effort: when the file is busy, counts wait for a later write instead of failing a read.
    track_access: bool = True
    busy_timeout_ms: int = Field(10_000, ge=0)
    # Re-process episodes left pending or failed (by a crash, an unreachable embedder or LM)
    # when the file is opened; only episodes older than the grace period, so episodes another
    # writer is processing right now are left alone.
    process_pending_on_open: bool = True
    pending_grace_seconds: float = Field(60.0, ge=0)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], **overrides: Any) -> MemoryConfig:
        """Read a TOML file; settings may sit at top level or under a [dspy_memory] table."""
        from dspy_memory.config_sources import merge, toml_settings

        return cls.model_validate(merge(toml_settings(Path(path)), overrides))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> MemoryConfig:
        """Read DSPY_MEMORY_PATH, DSPY_MEMORY_EMBEDDER, DSPY_MEMORY_RETRIEVAL__RRF_K, ... (nested
        settings after a double underscore; pydantic-settings reads them).

        A DSPY_MEMORY_CONFIG variable names a TOML file read first; variables override it, and
        `overrides` override both. Other DSPY_MEMORY_* variables (the scripts' DSPY_MEMORY_VENV,
        the store's DSPY_MEMORY_SQLITE_DRIVER) are not settings; unknown ones are warned about.
        """
        from dspy_memory.config_sources import read_environment

        env = os.environ if environ is None else environ
        return cls.model_validate(read_environment(cls, env, overrides))
