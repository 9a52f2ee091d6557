"""The parts a Memory delegates to, built from a MemoryConfig: the store bound to its embedder,
the LM, compiled programs, the write and read paths, core blocks and profiles."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.agent.blocks import CoreMemory
from dspy_memory.agent.profile import Profiles
from dspy_memory.config import MemoryConfig
from dspy_memory.embed import Embedder, check_spec, choose_embedder, make_embedder, reopen_advice
from dspy_memory.errors import EmbedderMismatchError
from dspy_memory.governance.redact import redactor_for
from dspy_memory.lifecycle.curve import Forgetting
from dspy_memory.lifecycle.maintain import Maintainer
from dspy_memory.lifecycle.retention import Retention
from dspy_memory.read.rerank import make_reranker
from dspy_memory.read.retrieval import Retriever
from dspy_memory.store import Store
from dspy_memory.util.lm import make_lm
from dspy_memory.write.background import BackgroundWriter
from dspy_memory.write.writer import Writer

logger = logging.getLogger("dspy_memory")


@dataclass
class Parts:
    store: Store
    embedder: Embedder
    lm: Any
    retriever: Retriever
    writer: Writer
    background: BackgroundWriter
    blocks: CoreMemory
    profiles: Profiles
    maintainer: Maintainer
    # Which compiled programs are in use ({part: file}); empty: the programs as shipped.
    programs_in_use: dict[str, str] = field(default_factory=dict)
    reading_programs: dict[str, Any] = field(default_factory=dict)


def config_with(
    path_or_config: str | os.PathLike[str] | MemoryConfig, settings: dict[str, Any]
) -> MemoryConfig:
    """A MemoryConfig from a path or a config, with keyword settings on top."""
    if isinstance(path_or_config, MemoryConfig):
        if not settings:
            return path_or_config
        return MemoryConfig.model_validate({**path_or_config.model_dump(), **settings})
    return MemoryConfig(path=os.fspath(path_or_config), **settings)


def open_store(config: MemoryConfig, embedder: Any) -> tuple[Store, Embedder]:
    """The file, bound to its embedder: the one given, else the one the file was built with,
    else the configured one. A mismatch says how to reopen the file."""
    if isinstance(embedder, str):
        check_spec(embedder)  # before the file is created
    retrieval = config.retrieval
    store = Store(
        config.path,
        busy_timeout_ms=config.busy_timeout_ms,
        encryption_key=config.encryption_key.get_secret_value() if config.encryption_key else None,
        pool_size=config.postgres.pool_size,
        partitions=config.postgres.partitions,
        exact_max_rows=config.postgres.exact_max_rows,
        vector_cache_min_rows=retrieval.vector_cache_min_rows,
        vector_cache_max_rows=retrieval.vector_cache_max_rows,
        keyword_score_budget=retrieval.keyword_score_budget,
        keyword_context_weight=retrieval.keyword_context_weight,
        turn_context_before=retrieval.turn_context_before,
        turn_context_after=retrieval.turn_context_after,
        turn_context_gap_minutes=retrieval.turn_context_gap_minutes,
        read_only=config.read_only,
    )
    store.audit_log.default_actor = config.actor
    try:
        recorded = store.embedder_info()
        chosen = make_embedder(
            choose_embedder(embedder, config.embedder, recorded[0] if recorded else None, path=config.path),
            batch_size=config.embed_batch_size,
            cache_size=config.embed_cache_size,
            local_backend=config.local_backend,
            batch_wait_ms=config.embed_batch_wait_ms,
        )
        try:
            store.bind_embedder(chosen.name, chosen.dim)
        except EmbedderMismatchError as exc:
            raise EmbedderMismatchError(
                f"{exc} {reopen_advice(exc.recorded or '')}", recorded=exc.recorded
            ) from None
    except BaseException:
        store.close()
        raise
    return store, chosen


def build_parts(
    config: MemoryConfig,
    embedder: Any,
    lm: Any,
    write_program: Any,
    programs: str | os.PathLike[str] | None,
    profile_schema: Any,
) -> Parts:
    programs_in_use: dict[str, str] = {}
    reading_programs: dict[str, Any] = {}
    if programs is not None:
        from dspy_memory.util.compiled import load_reading_programs, load_write_program

        if write_program is None:
            write_program, programs_in_use = load_write_program(programs, config.write.mode)
        reading_programs, reading = load_reading_programs(programs)
        programs_in_use.update(reading)
        logger.info("compiled programs in use: %s", programs_in_use or "none found")
    if lm is None and config.lm:
        lm = make_lm(config.lm, config.lm_api_base, num_ctx=config.lm_num_ctx)
    redact = redactor_for(config.redact)  # before opening: a missing detector fails first
    store, chosen = open_store(config, embedder)
    lifecycle = config.lifecycle
    retriever = Retriever(
        store,
        chosen,
        config.retrieval,
        track_access=config.track_access and not config.read_only,
        forgetting=Forgetting(base_days=lifecycle.base_days, importance_boost=lifecycle.importance_boost),
        recalls_per_search=lifecycle.recalls_per_search,
        reranker=make_reranker(
            config.retrieval.reranker,
            lm=lm,
            program=reading_programs.get("rerank"),
            timeout_s=config.retrieval.rerank_timeout_s,
        ),
    )
    writer = Writer(store, chosen, retriever, config.write, program=write_program, redact=redact)
    maintainer = Maintainer(
        store,
        chosen,
        lifecycle,
        config.write,
        flush_recalls=retriever.flush,
        program=reading_programs.get("consolidate"),
        retention=Retention(store, config.retention),
    )
    background = BackgroundWriter(
        writer.process,
        debounce_seconds=config.write.debounce_seconds,
        max_wait_seconds=config.write.max_wait_seconds,
        max_batch=config.write.max_batch,
        failed=writer.failed,
    )
    return Parts(
        store=store,
        embedder=chosen,
        lm=lm,
        retriever=retriever,
        writer=writer,
        background=background,
        maintainer=maintainer,
        blocks=CoreMemory(store, scope_mode=config.scope_mode, redact=redact),
        profiles=Profiles(store, profile_schema),
        programs_in_use=programs_in_use,
        reading_programs=reading_programs,
    )
