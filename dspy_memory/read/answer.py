"""Answering questions from memory: plan the search (optional), assemble context, answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dspy_memory.read.context import ContextBuilder
from dspy_memory.read.retrieval import Retriever
from dspy_memory.read.scores import reciprocal_rank
from dspy_memory.types import Answer, Hit, LMUsage, Scope
from dspy_memory.util.lm import run_program
from dspy_memory.util.text import day
from dspy_memory.util.timeutil import TimeLike, lm_date, to_datetime, utcnow


def answer_question(
    retriever: Retriever,
    question: str,
    scope: Scope,
    *,
    lm: Any,
    budget_tokens: int,
    as_of: TimeLike | None,
    rewrite: bool,
    today: TimeLike | None,
    programs: dict[str, Any],
) -> Answer:
    """Answer from memory; `programs` may hold compiled "answer" and "query" programs."""
    from dspy_memory.programs import MemoryAnswerer, QueryRewriter

    if not isinstance(question, str) or not question.strip():
        raise ValueError("answer() needs a question")
    date = day(to_datetime(today, name="today") if today is not None else utcnow())
    usage = LMUsage()
    queries = [question]
    if rewrite:
        plan, spent = run_program(
            programs.get("query") or QueryRewriter(),
            lm,
            {"question": question, "today": date},
            max_attempts=2,
        )
        usage = usage + spent
        queries = [query for query in (plan.plan.queries or []) if query.strip()][:3] or [question]
        if as_of is None and plan.plan.as_of:
            as_of = lm_date(plan.plan.as_of)
    rrf_k = retriever.config.rrf_k

    # The question and each planned query are searched apart (one string of all of them would
    # let the longest query's words outweigh the rest) and their hits fused.
    def search(text: str, *, k: int, as_of: Any, kinds: Sequence[str]) -> list[Hit]:
        rankings = [
            retriever.search_at(query, scope, k=k, as_of=as_of, kinds=kinds)
            for query in _distinct([text, *queries])
        ]
        return fuse_rankings(rankings, rrf_k=rrf_k)[:k]

    context = ContextBuilder(retriever.store, search).build(
        question, scope, budget_tokens=budget_tokens, as_of=as_of
    )
    prediction, spent = run_program(
        programs.get("answer") or MemoryAnswerer(),
        lm,
        {"question": question, "context": context.text, "today": date},
        max_attempts=2,
    )
    return Answer(
        answer=str(prediction.answer or "").strip(),
        context=context,
        queries=queries,
        as_of=str(as_of) if as_of is not None else None,
        usage=usage + spent,
    )


def _distinct(queries: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for query in queries:
        key = " ".join(query.casefold().split())
        if key and key not in seen:
            seen.add(key)
            kept.append(query)
    return kept


def fuse_rankings(rankings: Sequence[Sequence[Hit]], *, rrf_k: float) -> list[Hit]:
    """Hits of several searches in one list, by reciprocal rank fusion: a memory scores
    the sum of its `reciprocal_rank` over the searches that found it (the retriever's formula,
    so one search's top hit counts as much as in a single search). Each memory keeps its
    best-scored hit, so the context's relevance floor still compares search scores."""
    fused: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + reciprocal_rank(rank, rrf_k)
            if hit.id not in best or hit.score > best[hit.id].score:
                best[hit.id] = hit
    return sorted(best.values(), key=lambda hit: (fused[hit.id], hit.score), reverse=True)
