"""Read path: dense + keyword candidates -> reciprocal-rank fusion -> rescoring -> graph
expansion -> Hits.

Candidates are filtered in SQL (scope, time, kinds, metadata) before fusion, so a filter never
empties a result that had matches further down; graph expansion follows entity links under the
same filter. Named recipes choose the sources.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import Embedder
from dspy_memory.errors import InvalidInputError
from dspy_memory.lifecycle.curve import Forgetting, days_since, julian_day
from dspy_memory.read.boosts import boost_by_time, boost_named_speaker, boost_said_together
from dspy_memory.read.recalls import RecallCounter
from dspy_memory.read.rerank import Reranker, rerank
from dspy_memory.read.scores import agreed_weight, recency, reciprocal_rank, standard_scores
from dspy_memory.store import Candidate, Store, TimeView
from dspy_memory.store.keyword import query_terms
from dspy_memory.types import MAX_K, Hit, MemoryRecord, Scope, ScoreDetails
from dspy_memory.util.text import check_count, day, searchable, shown
from dspy_memory.util.timeutil import TimeLike, from_db, utcnow

logger = logging.getLogger("dspy_memory")


@dataclass(frozen=True)
class Recipe:
    """Which candidate sources a search uses; fusion and rescoring come from RetrievalConfig."""

    name: str
    dense: bool = True
    keyword: bool = True
    # Graph expansion of the top hits: always, never, or None: as RetrievalConfig.graph_in_hybrid.
    graph: bool | None = False
    # The top RetrievalConfig.rerank_candidates re-ordered by the reranker (read/rerank.py).
    rerank: bool = False
    description: str = ""


RECIPES: dict[str, Recipe] = {
    "hybrid": Recipe("hybrid", graph=None, description="dense + BM25, reciprocal-rank fusion (default)"),
    "graph": Recipe(
        "graph", graph=True, description="hybrid, then memories sharing an entity with the top hits"
    ),
    "dense": Recipe("dense", keyword=False, description="embedding similarity only"),
    "keyword": Recipe("keyword", dense=False, description="FTS5 BM25 only"),
    "rerank": Recipe(
        "rerank", graph=None, rerank=True, description="hybrid, its top candidates re-ordered by a reranker"
    ),
}


def resolve_recipe(recipe: str | Recipe) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    try:
        return RECIPES[recipe]
    except (KeyError, TypeError):
        raise InvalidInputError(f"unknown recipe {shown(recipe)}; choose from {sorted(RECIPES)}") from None


class Retriever:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        config: RetrievalConfig,
        *,
        track_access: bool,
        forgetting: Forgetting | None = None,
        recalls_per_search: int = 5,
        reranker: Reranker,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.track_access = track_access
        self.forgetting = forgetting or Forgetting(base_days=30.0, importance_boost=1.0)
        self.recalls_per_search = recalls_per_search
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dspy-memory-search")
        self.recalls = RecallCounter(store)
        self.reranker = reranker

    def flush(self) -> None:
        """Write the recall counts gathered so far (see RecallCounter)."""
        self.recalls.flush()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.flush()

    def search_at(
        self,
        query: str,
        scope: Scope,
        *,
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        **options: Any,
    ) -> list[Hit]:
        """`search` as of a world time and as known at a system time (default: now)."""
        return self.search(query, scope, view=TimeView.at(as_of=as_of, known_at=known_at), **options)

    def list(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        as_of: TimeLike | None = None,
        known_at: TimeLike | None = None,
        limit: int = 100,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[MemoryRecord]:
        """Memories of a scope, newest first, with the same filters as `search`."""
        check_count(limit, "limit", low=1)
        check_count(offset, "offset", low=0)
        view = TimeView.at(as_of=as_of, known_at=known_at)
        predicate = self.store.memory_predicate(
            scope, view, kinds, filters, include_archived=include_archived
        )
        self.flush()  # recall counts are part of what a listing shows
        records = self.store.list_memories(predicate, view, limit=limit, offset=offset)
        now = utcnow()
        return [self.with_retention(record, now) for record in records]

    def with_retention(self, record: MemoryRecord, now: datetime | None = None) -> MemoryRecord:
        """The record with its retention at `now` (default: now; docs/lifecycle.md)."""
        days = days_since(record.last_accessed_at or record.created_at, now or utcnow())
        record.retention = self.forgetting.retention(
            recalls=record.access_count,
            strength=record.strength,
            importance=record.importance,
            days_since_recall=days,
            pinned=record.pinned,
        )
        return record

    def search(
        self,
        query: str,
        scope: Scope,
        *,
        k: int = 10,
        recipe: str | Recipe = "hybrid",
        view: TimeView,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        count_access: bool = True,
        include_archived: bool = False,
    ) -> builtins.list[Hit]:
        """`count_access=False` for internal lookups (the write path's candidates), which are
        not recalls and must not strengthen memories. Archived memories are found only with
        `include_archived`."""
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, not {type(query).__name__}")
        query = searchable(query)  # a lone surrogate cannot be embedded; the rest is searched
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be an integer from 1 to {MAX_K}, got {shown(k)}")
        chosen = resolve_recipe(recipe)
        predicate = self.store.memory_predicate(
            scope, view, kinds, filters, include_archived=include_archived
        )
        if not query.strip():
            return []
        config = self.config
        n = max(config.candidates, k * config.candidate_factor)
        coarse = max(config.coarse_min, k * config.coarse_factor)

        def keyword_source() -> list[Candidate]:
            if not chosen.keyword:
                return []
            terms = query_terms(query, drop_stopwords=config.drop_stopwords, max_terms=config.max_query_terms)
            return self.store.keyword_search(terms, scope, predicate, n, reference=view.as_of)

        def dense_source() -> list[Candidate]:
            if not chosen.dense:
                return []
            return self.store.dense_search(
                self.embedder.embed_query(query), scope, predicate, n, coarse=coarse, reference=view.as_of
            )

        if chosen.dense and chosen.keyword and config.parallel_sources:
            # The keyword search runs in a worker while the query is embedded and searched
            # densely; the model, numpy and SQLite release the GIL. Measured at 10k memories
            # with precomputed query vectors: 0.75-1.0x the time of both in a row; with MiniLM in
            # the loop the keyword search is hidden behind the embedding.
            self.store.check_open()  # a closed pool would say "cannot schedule new futures"
            future = self._pool.submit(keyword_source)
            dense = dense_source()
            keyword = future.result()
        else:
            dense, keyword = dense_source(), keyword_source()
        details = self._fuse(dense, keyword, chosen)
        candidates = {candidate.row_id: candidate for candidate in (*dense, *keyword)}
        now_jd = julian_day(from_db(view.known_at))
        self._rescore(details, candidates, now_jd)
        boost_by_time(query, details, candidates, view, config, self.store.contents)
        boost_said_together(details, candidates, config)
        boost_named_speaker(query, details, config, self.store.speakers)
        if chosen.graph or (chosen.graph is None and config.graph_in_hybrid):
            self._expand(details, candidates, scope, predicate, view, now_jd)
        depth = max(k, config.rerank_candidates) if chosen.rerank else k
        ranked = sorted(details.items(), key=lambda pair: pair[1]["final"], reverse=True)[:depth]
        found = self.store.records_with_provenance([row_id for row_id, _ in ranked], view)
        ranked = [(row_id, detail) for row_id, detail in ranked if row_id in found]
        if chosen.rerank:
            records = {row_id: found[row_id][0] for row_id, _ in ranked}
            today = day(from_db(view.as_of))
            ranked = rerank(
                self.reranker, query, ranked, records, today=today, pool=config.rerank_candidates
            )[:k]
        if self.track_access and count_access and ranked:
            self.recalls.add([row_id for row_id, _ in ranked[: self.recalls_per_search]])
        for row_id, detail in ranked:
            found[row_id][0].retention = detail["retention"]
        return [
            Hit(
                memory=found[row_id][0],
                score=detail["final"],
                details=ScoreDetails(**detail),
                provenance=found[row_id][1],
            )
            for row_id, detail in ranked
        ]

    def _fuse(
        self, dense: builtins.list[Candidate], keyword: builtins.list[Candidate], recipe: Recipe
    ) -> dict[int, dict[str, Any]]:
        """ScoreDetails fields per row, with `fused` in [0, 1] (1: first in every source)."""
        config = self.config
        details: dict[int, dict[str, Any]] = {}
        for rank, candidate in enumerate(dense, start=1):
            details.setdefault(candidate.row_id, {}).update(dense_rank=rank, dense_similarity=candidate.score)
        for rank, candidate in enumerate(keyword, start=1):
            details.setdefault(candidate.row_id, {}).update(keyword_rank=rank, keyword_score=candidate.score)
        dense_weight = config.dense_weight if recipe.dense else 0.0
        if dense and keyword:
            dense_weight = agreed_weight(
                [c.row_id for c in dense],
                [c.row_id for c in keyword],
                depth=config.agreement_depth,
                share=config.agreement_share,
                full=dense_weight,
                floor=config.disagreement_dense_weight,
            )
        keyword_weight = config.keyword_weight if recipe.keyword else 0.0
        total = (dense_weight + keyword_weight) or 1.0
        if config.fusion == "rrf":

            def dense_part(d: dict[str, Any]) -> float:
                return reciprocal_rank(d["dense_rank"], config.rrf_k)

            def keyword_part(d: dict[str, Any]) -> float:
                return reciprocal_rank(d["keyword_rank"], config.rrf_k)
        elif config.fusion == "zscore":
            dense_z = standard_scores([candidate.score for candidate in dense])
            keyword_z = standard_scores([candidate.score for candidate in keyword])

            def dense_part(d: dict[str, Any]) -> float:
                return dense_z[d["dense_rank"] - 1]

            def keyword_part(d: dict[str, Any]) -> float:
                return keyword_z[d["keyword_rank"] - 1]
        else:
            sims = [candidate.score for candidate in dense]
            low, spread = (min(sims), max(sims) - min(sims)) if sims else (0.0, 0.0)
            top_keyword = keyword[0].score if keyword and keyword[0].score > 0 else 1.0

            def dense_part(d: dict[str, Any]) -> float:
                return (d["dense_similarity"] - low) / spread if spread > 0 else 1.0

            def keyword_part(d: dict[str, Any]) -> float:
                return d["keyword_score"] / top_keyword

        for detail in details.values():
            fused = 0.0
            if "dense_rank" in detail:
                fused += dense_weight * dense_part(detail)
            if "keyword_rank" in detail:
                fused += keyword_weight * keyword_part(detail)
            detail["fused"] = fused / total
        return details

    def _expand(
        self,
        details: dict[int, dict[str, Any]],
        candidates: dict[int, Candidate],
        scope: Scope,
        predicate: Any,
        view: TimeView,
        now_jd: float,
    ) -> None:
        """Graph expansion: memories sharing an entity (subject or object) with the top
        `graph_seeds` hits gain graph_weight * (seed's score relative to the best hit) * (the
        entity's weight, its rarity in the scope), summed over links and capped at 1; a second
        hop (graph_depth 2) starts from what the first reached, at half the gain. Memories no
        source found enter with a fused score of 0. Ranks by `final`, in place."""
        config = self.config
        seeds = sorted(details.items(), key=lambda pair: pair[1]["final"], reverse=True)[: config.graph_seeds]
        best = seeds[0][1]["final"] if seeds else 0.0
        if best <= 0:
            return
        frontier = {row_id: detail["final"] / best for row_id, detail in seeds}
        reached_before = set(frontier)
        for hop in range(config.graph_depth):
            gains: dict[int, float] = {}
            for seed, weight, candidate in self.store.graph_search(
                list(frontier),
                scope,
                predicate,
                max_share=config.graph_max_share,
                per_entity=config.graph_per_entity,
                reference=view.as_of,
            ):
                gains[candidate.row_id] = (
                    gains.get(candidate.row_id, 0.0) + frontier[seed] * weight * 0.5**hop
                )
                if candidate.row_id not in details:
                    details[candidate.row_id] = {"fused": 0.0}
                    candidates[candidate.row_id] = candidate
                    self._rescore({candidate.row_id: details[candidate.row_id]}, candidates, now_jd)
            for row_id, gain in gains.items():
                detail = details[row_id]
                before = detail.get("graph", 0.0)
                detail["graph"] = min(1.0, before + gain)
                detail["final"] += config.graph_weight * (detail["graph"] - before)
            frontier = {
                row_id: min(1.0, gain) for row_id, gain in gains.items() if row_id not in reached_before
            }
            reached_before |= set(frontier)
            if not frontier:
                break

    def _rescore(
        self, details: dict[int, dict[str, Any]], candidates: dict[int, Candidate], now_jd: float
    ) -> None:
        """`final` of each detail from its fused score and the memory's signals, in place;
        retention is measured at `now_jd` (the search's system time, a julian day)."""
        config = self.config
        # Read once: this loop runs for every candidate of every search.
        w_recency, w_importance = config.recency_weight, config.importance_weight
        w_strength, w_retention = config.strength_weight, config.retention_weight
        half_life, retention = config.recency_half_life_days, self.forgetting.retention
        base = max(0.0, 1.0 - w_recency - w_importance - w_strength - w_retention)
        for row_id, detail in details.items():
            candidate = candidates[row_id]
            detail["recency"] = recency(candidate.age_days, half_life)
            detail["importance"] = candidate.importance
            detail["strength"] = candidate.strength / (1.0 + candidate.strength)
            detail["retention"] = retention(
                recalls=candidate.recalls,
                strength=candidate.strength,
                importance=candidate.importance,
                days_since_recall=now_jd - candidate.recalled_jd,
                pinned=bool(candidate.pinned),
            )
            detail["final"] = (
                base * detail["fused"]
                + w_recency * detail["recency"]
                + w_importance * detail["importance"]
                + w_strength * detail["strength"]
                + w_retention * detail["retention"]
            )
