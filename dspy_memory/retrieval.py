"""Read path: dense + keyword candidates -> reciprocal-rank fusion -> rescoring -> Hits.

Candidates are filtered in SQL (scope, time, kinds, metadata) before fusion, so a filter never
empties a result that had matches further down. Named recipes choose the sources.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import Embedder
from dspy_memory.store import Store, TimeView
from dspy_memory.store.keyword import query_terms
from dspy_memory.timeutil import from_db, now_db
from dspy_memory.types import Hit, MemoryRecord, Scope, ScoreDetails

MAX_K = 1000


@dataclass(frozen=True)
class Recipe:
    """Which candidate sources a search uses; fusion and rescoring come from RetrievalConfig."""

    name: str
    dense: bool = True
    keyword: bool = True
    description: str = ""


RECIPES: dict[str, Recipe] = {
    "hybrid": Recipe("hybrid", description="dense + BM25, reciprocal-rank fusion (default)"),
    "dense": Recipe("dense", keyword=False, description="embedding similarity only"),
    "keyword": Recipe("keyword", dense=False, description="FTS5 BM25 only"),
}


def resolve_recipe(recipe: str | Recipe) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    try:
        return RECIPES[recipe]
    except (KeyError, TypeError):
        raise ValueError(f"unknown recipe {recipe!r}; choose from {sorted(RECIPES)}") from None


def recency(record: MemoryRecord, reference: str, half_life_days: float) -> float:
    """1.0 for a memory from the reference time, halving every `half_life_days` before it."""
    when = record.valid_at or record.created_at
    age_days = (from_db(reference) - when).total_seconds() / 86_400  # type: ignore[operator]
    return 1.0 if age_days <= 0 else math.pow(0.5, age_days / half_life_days)


class Retriever:
    def __init__(self, store: Store, embedder: Embedder, config: RetrievalConfig, *, track_access: bool) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.track_access = track_access

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
    ) -> list[Hit]:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ValueError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        chosen = resolve_recipe(recipe)
        predicate = self.store.memory_predicate(scope, view, kinds, filters)
        if not query.strip():
            return []
        config = self.config
        n = max(config.candidates, k * config.candidate_factor)
        dense = (
            self.store.dense_search(
                self.embedder.embed_query(query), scope, predicate, n,
                coarse_min=config.coarse_min, coarse_factor=config.coarse_factor,
            )
            if chosen.dense
            else []
        )
        keyword = (
            self.store.keyword_search(
                query_terms(query, drop_stopwords=config.drop_stopwords, max_terms=config.max_query_terms),
                scope, predicate, n,
            )
            if chosen.keyword
            else []
        )
        details = self._fuse(dense, keyword, chosen)
        records = self.store.records(list(details), view)
        hits = self._rescore(details, records, view)
        hits.sort(key=lambda pair: pair[1].final, reverse=True)
        hits = hits[:k]
        provenance = self.store.provenance([records[row_id].id for row_id, _ in hits])
        if self.track_access and hits:
            self.store.touch([row_id for row_id, _ in hits], now_db())
        return [
            Hit(
                memory=records[row_id],
                score=detail.final,
                details=detail,
                provenance=provenance[records[row_id].id],
            )
            for row_id, detail in hits
        ]

    def _fuse(
        self, dense: list[tuple[int, float]], keyword: list[tuple[int, float]], recipe: Recipe
    ) -> dict[int, ScoreDetails]:
        """Combine the sources into `fused` in [0, 1] (1: first in every source)."""
        config = self.config
        details: dict[int, ScoreDetails] = {}
        for rank, (row_id, similarity) in enumerate(dense, start=1):
            detail = details.setdefault(row_id, ScoreDetails())
            detail.dense_rank, detail.dense_similarity = rank, similarity
        for rank, (row_id, score) in enumerate(keyword, start=1):
            detail = details.setdefault(row_id, ScoreDetails())
            detail.keyword_rank, detail.keyword_score = rank, score
        weights = {
            "dense": config.dense_weight if recipe.dense else 0.0,
            "keyword": config.keyword_weight if recipe.keyword else 0.0,
        }
        total = sum(weights.values()) or 1.0
        if config.fusion == "rrf":
            for detail in details.values():
                for source, rank in (("dense", detail.dense_rank), ("keyword", detail.keyword_rank)):
                    if rank is not None:
                        detail.fused += weights[source] * (config.rrf_k + 1) / (config.rrf_k + rank)
                detail.fused /= total
            return details
        sims = [similarity for _, similarity in dense]
        low, high = (min(sims), max(sims)) if sims else (0.0, 1.0)
        top_keyword = keyword[0][1] if keyword else 1.0
        for detail in details.values():
            if detail.dense_similarity is not None:
                spread = high - low
                detail.fused += weights["dense"] * ((detail.dense_similarity - low) / spread if spread > 0 else 1.0)
            if detail.keyword_score is not None and top_keyword > 0:
                detail.fused += weights["keyword"] * detail.keyword_score / top_keyword
            detail.fused /= total
        return details

    def _rescore(
        self, details: dict[int, ScoreDetails], records: dict[int, MemoryRecord], view: TimeView
    ) -> list[tuple[int, ScoreDetails]]:
        config = self.config
        base = max(0.0, 1.0 - config.recency_weight - config.importance_weight - config.strength_weight)
        scored = []
        for row_id, detail in details.items():
            record = records.get(row_id)
            if record is None:  # deleted between candidate search and fetch
                continue
            detail.recency = recency(record, view.as_of, config.recency_half_life_days)
            detail.importance = record.importance
            detail.strength = record.strength / (1.0 + record.strength)
            detail.final = (
                base * detail.fused
                + config.recency_weight * detail.recency
                + config.importance_weight * detail.importance
                + config.strength_weight * detail.strength
            )
            scored.append((row_id, detail))
        return scored
