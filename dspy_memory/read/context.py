"""Context assembly: prompt-ready memory for a query, in priority order, within a token budget.

Order: core blocks -> profile -> relevant current facts (conflicting ones quarantined in their
own section) -> timelines of facts that changed -> recent episodes -> procedures. It guards
against the four context failures: poisoning (dates, sources and low confidence shown),
distraction (a relevance floor and the budget), confusion (duplicates dropped) and clash
(conflicting current facts set apart). Every item considered is reported, included or dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.ops import FACT_KINDS
from dspy_memory.read.retrieval import Retriever
from dspy_memory.store import Store, TimeView
from dspy_memory.types import (
    LOW_CONFIDENCE,
    PROFILE_LABEL,
    Context,
    ContextItem,
    ContextSection,
    Hit,
    MemoryRecord,
    Provenance,
    Scope,
)
from dspy_memory.util.text import SINGLE_VALUED_PREDICATES, content_hash, day, shown
from dspy_memory.util.tokens import count_tokens, tokenizer_name

HEADINGS: dict[str, str] = {
    "blocks": "## Core memory",
    "profile": "## Profile",
    "facts": "## Relevant facts (current)",
    "conflicts": "## Conflicting information (both recorded as true; check before relying on either)",
    "timelines": "## How facts changed",
    "episodes": "## Recent conversation",
    "procedures": "## Procedures",
    "summary": "## More memories, summarized",
}


def profile_lines(document: str) -> list[str]:
    """The profile document as one line per filled field."""
    try:
        data = json.loads(document)
    except ValueError:
        return [f"- {document}"]
    return [
        f"- {key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in data.items()
        if value not in (None, "", [], {})
    ]


def fact_line(record: MemoryRecord) -> str:
    marks = f" (low confidence {record.confidence:.1f})" if record.confidence < LOW_CONFIDENCE else ""
    return f"- {record.content} [since {day(record.valid_at)}]{marks}"


def lm_compressor(lm: Any, query: str) -> Callable[[list[str], int], str]:
    """A summarizer of left-out lines for `ContextBuilder.build` (one MemoryCompressor call)."""

    def summarize(lines: list[str], room_tokens: int) -> str:
        from dspy_memory.programs import MemoryCompressor
        from dspy_memory.util.lm import run_program

        inputs = {"query": query, "memories": lines, "max_words": max(10, int(room_tokens * 0.7))}
        prediction, _ = run_program(MemoryCompressor(), lm, inputs, max_attempts=1)
        return str(prediction.summary or "")

    return summarize


@dataclass
class _Plan:
    """Candidate lines per section, in priority order; the budget decides what goes in."""

    items: list[ContextItem] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def add(self, section: ContextSection, ref: str, text: str) -> None:
        key = content_hash(text.lstrip("- "))
        if key in self.seen and section not in ("blocks", "timelines"):
            return
        self.seen.add(key)
        self.items.append(ContextItem(section=section, ref=ref, text=text, tokens=count_tokens(text)))


# Procedures have their own section, after recent episodes.
FACTS_SECTION_KINDS = tuple(kind for kind in FACT_KINDS if kind != "procedure")


@dataclass
class ContextBuilder:
    store: Store
    search: Callable[..., list[Hit]]
    facts: int = 20
    relevance_floor: float = 0.25  # of the best hit's score
    recent_episodes: int = 6
    procedures: int = 3
    single_valued: frozenset[str] = SINGLE_VALUED_PREDICATES

    def build(
        self,
        query: str,
        scope: Scope,
        *,
        budget_tokens: int,
        as_of: Any = None,
        compress: Callable[[list[str], int], str] | None = None,
    ) -> Context:
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
            raise InvalidInputError(f"budget_tokens must be a positive integer, got {shown(budget_tokens)}")
        view = TimeView.at(as_of=as_of)
        plan = _Plan()
        for block in self.store.blocks.list(scope):
            if block.label == PROFILE_LABEL:
                for line in profile_lines(block.value):
                    plan.add("profile", block.label, line)
            else:
                plan.add("blocks", block.label, f"<{block.label}>\n{block.value}\n</{block.label}>")

        hits = self.search(query, k=self.facts, as_of=as_of, kinds=FACTS_SECTION_KINDS)
        best = max((hit.score for hit in hits), default=0.0)  # fused hits are not in score order
        relevant = [hit.memory for hit in hits if hit.score >= self.relevance_floor * best]
        dropped = [
            ContextItem(
                section="facts",
                ref=hit.id,
                text=fact_line(hit.memory),
                tokens=0,
                reason="below relevance floor",
            )
            for hit in hits
            if hit.score < self.relevance_floor * best
        ]
        profile = [record for record in relevant if record.kind == "profile"]
        conflicted = self._conflicts(relevant)
        sources = {hit.id: hit.provenance for hit in hits}
        # A fact that replaced an older one is shown as its timeline, in its own place by
        # relevance (the current value is in the line, so nothing is said twice).
        timelines = self._timelines(relevant, scope, view)
        for record in profile:
            if record.id in timelines:
                plan.add("timelines", record.id, timelines[record.id])
            elif record.id not in conflicted:
                plan.add("profile", record.id, fact_line(record))
        # Facts and conflicts share one priority, by relevance; they render in separate sections.
        for record in relevant:
            if record.id in conflicted:
                plan.add("conflicts", record.id, self._conflict_line(record, sources.get(record.id, [])))
            elif record.kind != "profile":
                if record.id in timelines:
                    plan.add("timelines", record.id, timelines[record.id])
                else:
                    plan.add("facts", record.id, fact_line(record))
        for episode in self.store.episodes.list(
            scope, limit=self.recent_episodes, newest_first=True, before=view.as_of
        )[::-1]:
            speaker = episode.name or episode.role or episode.source
            plan.add(
                "episodes",
                episode.id,
                f"- {day(episode.occurred_at)} {episode.occurred_at:%H:%M} {speaker}: {episode.content}",
            )
        for hit in self.search(query, k=self.procedures, as_of=as_of, kinds=("procedure",)):
            plan.add("procedures", hit.id, fact_line(hit.memory))
        return self._fit(plan.items, dropped, budget_tokens, compress)

    # -- sections ------------------------------------------------------------------------------

    def _conflicts(self, records: Sequence[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
        """Current facts that share a subject and a one-valued predicate but say different things."""
        groups: dict[tuple[str, str], list[MemoryRecord]] = {}
        for record in records:
            if record.subject and record.predicate in self.single_valued and record.status == "current":
                groups.setdefault((record.subject.casefold(), record.predicate), []).append(record)
        conflicted: dict[str, list[MemoryRecord]] = {}
        for group in groups.values():
            if len({(r.object or r.content).casefold() for r in group}) > 1:
                for record in group:
                    conflicted[record.id] = [other for other in group if other.id != record.id]
        return conflicted

    @staticmethod
    def _conflict_line(record: MemoryRecord, provenance: Sequence[Provenance]) -> str:
        said = "; ".join(
            f"{source.name or source.role} said it on {day(source.occurred_at)}"
            if source.name or source.role
            else f"from a {source.source} of {day(source.occurred_at)}"
            for source in provenance[:2]
        )
        low = f"; low confidence {record.confidence:.1f}" if record.confidence < LOW_CONFIDENCE else ""
        return f"- {record.content} [since {day(record.valid_at)}; {said or 'source unknown'}{low}]"

    def _timelines(self, records: Sequence[MemoryRecord], scope: Scope, view: TimeView) -> dict[str, str]:
        """{id of a relevant fact: a line saying what was true before it, and until when}."""
        current = {record.id: record for record in records}
        lines: dict[str, str] = {}
        older = self.store.graph.predecessors(list(current), scope, view) if current else []
        for old in older:
            new = current.get(old.superseded_by or "")
            if new is None or old.invalid_at is None or new.id in lines:
                continue
            lines[new.id] = (
                f"- until {day(old.invalid_at)}: {old.content} (true since {day(old.valid_at)}); "
                f"since {day(new.valid_at)}: {new.content}"
            )
        return lines

    # -- budget --------------------------------------------------------------------------------

    def _fit(
        self,
        items: list[ContextItem],
        dropped: list[ContextItem],
        budget: int,
        compress: Callable[[list[str], int], str] | None,
    ) -> Context:
        """Greedy in priority order: a section's heading is paid for with its first item; an
        item that does not fit is dropped and smaller ones after it may still go in."""
        used = 0
        included: list[ContextItem] = []
        opened: set[str] = set()
        # With a compressor, a fifth of the budget is kept for the summary of what did not fit.
        limit = budget - budget // 5 if compress is not None else budget
        for item in items:
            heading = 0 if item.section in opened else count_tokens(HEADINGS[item.section]) + 1
            cost = item.tokens + heading + 1  # +1: the newline
            if used + cost > limit:
                dropped.append(item.model_copy(update={"reason": "over the token budget"}))
                continue
            used += cost
            opened.add(item.section)
            included.append(item)
        overflow = [item for item in dropped if item.reason == "over the token budget"]
        if compress is not None and overflow and budget - used > 40:
            room = budget - used - count_tokens(HEADINGS["summary"]) - 4  # headings and blank lines
            summary = compress([item.text for item in overflow], room).strip()
            while summary and count_tokens(summary) > room:  # the LM may not keep to the limit
                summary = summary[: int(len(summary) * 0.8)].rsplit(" ", 1)[0]
            if summary:
                item = ContextItem(
                    section="summary", ref="summary", text=summary, tokens=count_tokens(summary)
                )
                included.append(item)
        text = self._render(included)
        while included and count_tokens(text) > budget:  # joins can tokenize differently
            dropped.append(included.pop().model_copy(update={"reason": "over the token budget"}))
            text = self._render(included)
        return Context(
            text=text,
            tokens=count_tokens(text),
            budget_tokens=budget,
            tokenizer=tokenizer_name(),
            included=included,
            dropped=dropped,
        )

    @staticmethod
    def _render(items: list[ContextItem]) -> str:
        parts: list[str] = []
        section = None
        order = list(HEADINGS)
        for item in sorted(items, key=lambda item: order.index(item.section)):  # stable: keeps rank
            if item.section != section:
                if parts:
                    parts.append("")
                parts.append(HEADINGS[item.section])
                section = item.section
            parts.append(item.text)
        return "\n".join(parts)


def context_for(
    retriever: Retriever, query: str, scope: Scope, *, budget_tokens: int, as_of: Any, lm: Any = None
) -> Context:
    """`ContextBuilder.build` over the retriever's searches; with `lm`, what does not fit is
    summarized (one call)."""
    builder = ContextBuilder(retriever.store, lambda text, **how: retriever.search_at(text, scope, **how))
    summarize = lm_compressor(lm, query) if lm is not None else None
    return builder.build(query, scope, budget_tokens=budget_tokens, as_of=as_of, compress=summarize)
