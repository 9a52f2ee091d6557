"""A fake LM that learns only from the demonstrations an optimizer puts in its prompt.

Offline tests and `python -m evals.optimize_offline` need a student whose score can change only
through the prompt an optimizer builds, and whose rules a reviewer can read in one sitting. This
LM knows no answers, situations or labels; nothing in it names an action to choose for a case.

1. It reads the demonstrations the adapter put in the prompt (as `dspy_memory.testing` sees
   them: the demos the adapter formatted, not the prompt's text). A demo that lacks the
   current signature's input or output fields (a demo of another signature) is ignored.
2. It finds the nearest demonstration: the one whose input values share the largest fraction of
   their words with the current input's (Jaccard similarity of lower-cased word sets; the
   earliest demo wins a tie). No demo shares a word: it answers with the naive policy (4).
3. It imitates that demonstration, re-bound to the current input by one generic rule per kind
   of output:
   - operations (`ops`): the demo's actions, in order, one per fact (the new facts; for the
     fused write program, which has none, each turn stands for a fact). A demo op with a
     target names the memory at some rank when the demo's memories are ordered by how many
     words they share with the demo op's fact (input order breaks ties); the copy targets the
     current memory at the same rank for the current fact. Fields of the new content come from
     the current fact; flags (booleans) from the demo op. An op that cannot be bound (no memory
     at that rank) and a fact the demo has no op for get the naive answer.
   - search plans (`plan`): the question itself is the only query. If the demo planned an
     as_of date, the copy plans one that stands to the current question's period ("in 2022",
     "June 2023", "early March 2024", "spring 2023") as the demo's date stood to the demo
     question's period: at the same fraction of its length. A demo question without a period
     relates its date to its `today`: the copy keeps the same distance from the current today.
     A current question without a period gets no as_of when the demo's had one.
   - groups of aliases (an output listing items that carry `aliases`, e.g. `decisions`): the
     demo's items, in order. A demo item covers the demo's memories (the input items that carry
     an `alias`) at some ranks when those are ordered by how many words each shares with the
     others (input order breaks ties); the copy covers the current memories at the same ranks
     (a rank past the end is dropped, and an item left with none). Where the demo item had a
     `content`, the copy's is the covered memories' contents joined (so it keeps every word
     they hold); other fields come from the demo item.
   - any other output: the demo's value, unchanged.
4. The naive policy, without a usable demonstration: ADD every fact; search for the question
   with no as_of; for other signatures (MIPROv2's proposers, SIMBA's advice) a fixed valid
   value of each output's type; to a prompt without DSPy fields (GEPA's reflection) it returns
   the instruction it was given, unchanged.

It does not read instructions, so an optimizer that only rewrites instructions cannot change its
score: that is a property of this learner, not of the optimizer (a real LM reads instructions).
"""

from __future__ import annotations

import calendar
import functools
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from dspy_memory.testing import LMCall, ScriptedEngine, _AsyncScriptedEngine, watch_adapters
from dspy_memory.write.validate import NEEDS_CONTENT

_WORD = re.compile(r"[a-z]+|\d+")
_FENCED = re.compile(r"```\n?(.*?)\n?```", re.DOTALL)
_OP_FIELDS = ("content", "kind", "subject", "predicate", "object", "valid_at", "invalid_at")


@dataclass(frozen=True)
class Demonstration:
    inputs: dict[str, Any]
    outputs: dict[str, Any]

    @functools.cached_property
    def input_words(self) -> set[str]:
        return words(self.inputs)


# -- reading the demonstrations -----------------------------------------------------------------


def demonstrations(call: LMCall) -> list[Demonstration]:
    """The demos the adapter put in this call's prompt that carry every input and output field
    of the current signature (a demo of another signature, or one without outputs, is ignored)."""
    wanted = [*call.input_fields, *call.output_fields]
    return [
        Demonstration(
            {name: demo[name] for name in call.input_fields},
            {name: demo[name] for name in call.output_fields},
        )
        for demo in call.demos
        if all(demo.get(name) is not None for name in wanted)
    ]


def words(value: Any) -> set[str]:
    """Lower-cased words and numbers of every string inside `value` (keys are not read)."""
    if isinstance(value, str):
        return set(_WORD.findall(value.lower()))
    if isinstance(value, dict):
        return set().union(*(words(item) for item in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(words(item) for item in value)) if value else set()
    return set()


def nearest(inputs: dict[str, Any], demos: list[Demonstration]) -> Demonstration | None:
    """The demo whose input words overlap most with `inputs` (Jaccard); None when none shares a word."""
    mine = words(inputs)
    best, best_score = None, 0.0
    for demo in demos:
        theirs = demo.input_words
        union = mine | theirs
        score = len(mine & theirs) / len(union) if union else 0.0
        if score > best_score:
            best, best_score = demo, score
    return best


# -- operations --------------------------------------------------------------------------------


def _facts(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The new facts; for the fused write program each turn stands for one."""
    facts = inputs.get("new_facts")
    if isinstance(facts, list):
        return [fact for fact in facts if isinstance(fact, dict)]
    turns = inputs.get("turns")
    if not isinstance(turns, list):
        return []
    return [
        {
            "content": turn.get("text"),
            "subject": turn.get("speaker"),
            "valid_at": str(turn.get("time", ""))[:10],
        }
        for turn in turns
        if isinstance(turn, dict) and turn.get("text")
    ]


def _memories(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    memories = inputs.get("existing_memories")
    return [m for m in memories if isinstance(m, dict)] if isinstance(memories, list) else []


def _ranked(memories: list[dict[str, Any]], anchor: set[str]) -> list[dict[str, Any]]:
    """Memories by how many words they share with `anchor`, most first; input order breaks ties."""
    order = sorted(range(len(memories)), key=lambda i: (-len(words(memories[i]) & anchor), i))
    return [memories[i] for i in order]


def _added(fact: dict[str, Any]) -> dict[str, Any]:
    return {"action": "ADD", **_content_of(fact)}


def _content_of(fact: dict[str, Any]) -> dict[str, Any]:
    return {key: fact[key] for key in _OP_FIELDS if fact.get(key) not in (None, "")}


def naive_ops(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [_added(fact) for fact in _facts(inputs)]


def imitate_ops(inputs: dict[str, Any], demo: Demonstration) -> list[dict[str, Any]]:
    demo_ops = demo.outputs.get("ops")
    if not isinstance(demo_ops, list):
        return naive_ops(inputs)
    facts, memories = _facts(inputs), _memories(inputs)
    demo_facts, demo_memories = _facts(demo.inputs), _memories(demo.inputs)
    rest = words({k: v for k, v in inputs.items() if k != "existing_memories"})
    demo_rest = words({k: v for k, v in demo.inputs.items() if k != "existing_memories"})
    demo_ops = [op for op in demo_ops if isinstance(op, dict)]
    ops = []
    for index, demo_op in enumerate(demo_ops):
        fact = facts[min(index, len(facts) - 1)] if facts else None
        demo_fact = demo_facts[min(index, len(demo_facts) - 1)] if demo_facts else None
        op = _bound(demo_op, fact, demo_fact, memories, demo_memories, rest, demo_rest)
        if op is not None:
            ops.append(op)
        elif fact is not None and index < len(facts):
            ops.append(_added(fact))
    ops += [_added(fact) for fact in facts[len(demo_ops) :]]
    return ops


def _bound(
    demo_op: dict[str, Any],
    fact: dict[str, Any] | None,
    demo_fact: dict[str, Any] | None,
    memories: list[dict[str, Any]],
    demo_memories: list[dict[str, Any]],
    rest: set[str],
    demo_rest: set[str],
) -> dict[str, Any] | None:
    action = str(demo_op.get("action", "")).upper()
    op: dict[str, Any] = {"action": action}
    op.update({key: value for key, value in demo_op.items() if isinstance(value, bool)})
    if demo_op.get("target") is not None:
        demo_ranked = _ranked(demo_memories, words(demo_fact) if demo_fact else demo_rest)
        rank = next((i for i, m in enumerate(demo_ranked) if m.get("alias") == demo_op["target"]), None)
        ranked = _ranked(memories, words(fact) if fact else rest)
        if rank is None or rank >= len(ranked):
            return None
        op["target"] = ranked[rank].get("alias")
    if action in NEEDS_CONTENT:
        if fact is None:
            return None
        op.update(_content_of(fact))
    return op


# -- search plans ------------------------------------------------------------------------------

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
# Meteorological seasons as (first month, months long); winter runs into the next year.
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
_PARTS = {"early": (0.0, 1 / 3), "mid": (1 / 3, 2 / 3), "late": (2 / 3, 1.0)}
_PERIOD = re.compile(
    r"\b(?:(early|mid|late)[\s-]+)?(?:("
    + "|".join(sorted({*_MONTHS, *_SEASONS}, key=len, reverse=True))
    + r")\.?\s+(?:of\s+)?)?((?:19|20)\d{2})\b|\b(last|this)\s+year\b",
    re.IGNORECASE,
)


def _day(value: Any) -> date | None:
    match = re.match(r"(\d{4})-(\d{2})-(\d{2})", str(value or ""))
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def _months_later(start: date, months: int) -> date:
    index = start.month - 1 + months
    return date(start.year + index // 12, index % 12 + 1, 1)


def period(question: str, today: date | None) -> tuple[date, date] | None:
    """The first period a question names, as (first day, last day)."""
    match = _PERIOD.search(question)
    if not match:
        return None
    part, name, year, relative = match.groups()
    if relative:
        if today is None:
            return None
        year = str(today.year - (relative.lower() == "last"))
    start, length = date(int(year), 1, 1), 12
    if name:
        name = name.lower()
        first, length = _SEASONS.get(name, (_MONTHS.get(name, 1), 1))
        start = date(int(year), first, 1)
    end = _months_later(start, length) - timedelta(days=1)
    if part:
        low, high = _PARTS[part.lower()]
        days = (end - start).days
        start, end = start + timedelta(days=round(days * low)), start + timedelta(days=round(days * high))
    return start, end


def naive_plan(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"queries": [str(inputs.get("question", ""))], "as_of": None}


def imitate_plan(inputs: dict[str, Any], demo: Demonstration) -> dict[str, Any]:
    plan = naive_plan(inputs)
    demo_plan = demo.outputs.get("plan")
    planned = _day(demo_plan.get("as_of")) if isinstance(demo_plan, dict) else None
    if planned is None:
        return plan
    demo_today, today = _day(demo.inputs.get("today")), _day(inputs.get("today"))
    demo_period = period(str(demo.inputs.get("question", "")), demo_today)
    if demo_period is None:
        if demo_today is not None and today is not None:
            plan["as_of"] = (today + (planned - demo_today)).isoformat()
        return plan
    current = period(str(inputs.get("question", "")), today)
    if current is None:
        return plan
    span = (demo_period[1] - demo_period[0]).days
    share = (planned - demo_period[0]).days / span if span else 0.0
    plan["as_of"] = (current[0] + timedelta(days=round(share * (current[1] - current[0]).days))).isoformat()
    return plan


# -- groups of aliases -------------------------------------------------------------------------


def _aliased(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The input list whose items carry an `alias`."""
    for value in inputs.values():
        if isinstance(value, list) and value and all(isinstance(i, dict) and "alias" in i for i in value):
            return value
    return []


def _by_kinship(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items by how many words each shares with the others, most first; input order breaks ties."""
    sets = [words(item) for item in items]
    shared = [
        sum(len(mine & theirs) for j, theirs in enumerate(sets) if j != i) for i, mine in enumerate(sets)
    ]
    return [items[i] for i in sorted(range(len(items)), key=lambda i: (-shared[i], i))]


def _grouping(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(item, dict) and "aliases" in item for item in value)


def imitate_groups(
    inputs: dict[str, Any], demo: Demonstration, demo_items: list[Any]
) -> list[dict[str, Any]]:
    current = _by_kinship(_aliased(inputs))
    rank = {item.get("alias"): i for i, item in enumerate(_by_kinship(_aliased(demo.inputs)))}
    copies = []
    for item in demo_items:
        aliases = item.get("aliases") if isinstance(item, dict) else None
        covered = [current[rank[a]] for a in aliases or [] if a in rank and rank[a] < len(current)]
        if not covered:
            continue
        copy = {**item, "aliases": [memory.get("alias") for memory in covered]}
        if item.get("content"):
            copy["content"] = " ".join(str(memory.get("content", "")) for memory in covered)
        copies.append(copy)
    return copies


# -- everything else ---------------------------------------------------------------------------


def _empty(annotation: Any) -> Any:
    """A fixed valid value of a DSPy output type."""
    kind = typing.get_origin(annotation) or annotation
    if kind in (list, tuple, set):
        return []
    if kind is dict:
        return {}
    if kind is bool:
        return True
    if kind in (int, float):
        return 0
    return "As in the examples."


def answer(call: LMCall, demos: list[Demonstration]) -> dict[str, Any]:
    demo = nearest(call.inputs, demos)
    if "ops" in call.output_fields:
        return {"ops": imitate_ops(call.inputs, demo) if demo else naive_ops(call.inputs)}
    if "plan" in call.output_fields:
        return {"plan": imitate_plan(call.inputs, demo) if demo else naive_plan(call.inputs)}
    if demo is not None:
        return {
            name: imitate_groups(call.inputs, demo, value) if _grouping(value) else value
            for name, value in demo.outputs.items()
        }
    return {name: _empty(annotation) for name, annotation in call.output_types.items()}


def reflection(prompt: str) -> str:
    """A prompt outside DSPy's field format (GEPA's reflection): the instruction it quotes, unchanged."""
    quoted = _FENCED.search(prompt)
    instruction = quoted.group(1).strip() if quoted else "Follow the examples."
    return f"```\n{instruction}\n```"


class LearnerEngine(ScriptedEngine):
    """The engine of `learner_lm`: ScriptedEngine's token counting, answering by `answer`.
    `rules(call)`, when given, answers first (None: it does not know that signature)."""

    def __init__(self, rules: Callable[[LMCall], Mapping[str, Any] | None] | None = None) -> None:
        super().__init__(responder=self._respond)
        self.rules = rules

    def _respond(self, call: LMCall) -> Any:
        ruled = self.rules(call) if self.rules is not None else None
        if ruled is not None:
            return ruled
        if not call.output_fields:
            return reflection(call.prompt)
        return answer(call, demonstrations(call))


def learner_lm(
    model: str = "learner/student", *, rules: Callable[[LMCall], Mapping[str, Any] | None] | None = None
) -> Any:
    """A `dspy.LM` answering as described in this module; `lm.engine.calls` lists its calls.

    With `rules` it is a rule-based teacher for offline runs: the rules answer the signatures
    they know, the learner's behaviour covers the rest (proposers, reflection)."""
    import dspy

    watch_adapters()
    engine = LearnerEngine(rules)
    return dspy.LM(model, engine=engine, async_engine=_AsyncScriptedEngine(engine), cache=False)
