"""Answering questions from memory: plan the search (optional), assemble context, answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dspy_memory.lm import run_program
from dspy_memory.plan import lm_date
from dspy_memory.text import day
from dspy_memory.timeutil import TimeLike, to_datetime, utcnow
from dspy_memory.types import Answer, LMUsage, Scope

if TYPE_CHECKING:
    from dspy_memory.memory import Memory


def answer_question(
    memory: Memory,
    question: str,
    scope: Scope,
    *,
    lm: Any,
    budget_tokens: int,
    as_of: TimeLike | None,
    rewrite: bool,
    today: TimeLike | None,
    answerer: Any = None,
    rewriter: Any = None,
) -> Answer:
    from dspy_memory.programs import MemoryAnswerer, QueryRewriter

    if not isinstance(question, str) or not question.strip():
        raise ValueError("answer() needs a question")
    date = day(to_datetime(today, name="today") if today is not None else utcnow())
    usage = LMUsage()
    queries = [question]
    if rewrite:
        plan, spent = run_program(
            rewriter or QueryRewriter(), lm, {"question": question, "today": date}, max_attempts=2
        )
        usage = usage + spent
        queries = [query for query in (plan.plan.queries or []) if query.strip()][:3] or [question]
        if as_of is None and plan.plan.as_of:
            as_of = lm_date(plan.plan.as_of)
    ids = scope.model_dump()
    context = memory.context(
        " ".join([question, *queries[1:]]) if rewrite else question,
        budget_tokens=budget_tokens,
        as_of=as_of,
        **ids,
    )
    prediction, spent = run_program(
        answerer or MemoryAnswerer(),
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
