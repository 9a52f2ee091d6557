"""A fake LM that can only copy its demonstrations: the student of the offline optimization runs.

Offline tests and `python -m evals.optimize_offline` need a student whose score can change only
through the demonstrations an optimizer puts in its prompt, and whose code a reviewer can read in
one sitting and find no knowledge of any task in. This learner knows no signature, field name,
action, label, date or grammar. It sees values: strings, numbers, lists and objects.

1. It reads the demonstrations the adapter put in the prompt (as `dspy_memory.testing` sees
   them: the demos the adapter formatted, not the prompt's text). A demo that lacks one of the
   current signature's input or output fields (a demo of another signature) is ignored.
2. It picks the nearest demonstration: the one whose input values share the largest fraction of
   their words with the current input's (Jaccard similarity of lower-cased word sets; the
   earliest demo wins a tie), if that fraction is at least `MIN_SIMILARITY`. A demo that shares
   less (nothing but a few common words) is not imitated.
3. It copies that demonstration's outputs and re-binds every value in them to the current input:
   - a value equal to a value of the demo's inputs (a number or a whole string) becomes the
     value at the same place in the current inputs. Items of an input list are matched by
     rank: each list's items are ranked by how many words they share with the rest of the
     input, then with the list's other items (most first, position breaks ties), and the demo's
     item at rank r stands for the current item at rank r. A place the current input does not
     have keeps the demo's value.
   - any other string is copied word by word; a word that occurs in a string of the demo's
     inputs becomes the word that stands in its place in the current input's string at the
     same place (the two strings aligned word by word, difflib's matching blocks; inside a
     replaced stretch, the current word of the same shape nearest in position; shape: digits
     and their count, or letters and their case). A word with no counterpart is kept.
   - everything else (booleans, null, object keys, the length of every list) is copied as is.
4. Without a demonstration to imitate it answers a fixed minimal value of each output's type:
   an empty list or object, null where the type allows it, 0, False, and a fixed sentence for
   text; the same for every task (`naive_lm` answers only this). To a prompt without DSPy fields
   (GEPA's reflection) it returns the instruction it was given, unchanged.

It does not read instructions, so an optimizer that only rewrites them cannot change its score:
that is a property of this learner, not of the optimizer (a real LM reads instructions).
"""

from __future__ import annotations

import difflib
import functools
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dspy_memory.testing import LMCall, ScriptedEngine, _AsyncScriptedEngine, watch_adapters

# A demo sharing less than this fraction of its words with the current input is not imitated.
# Fixed before any score was computed (tests/test_learner.py shows where task inputs fall).
MIN_SIMILARITY = 0.15
FIXED_TEXT = "As in the examples."

_WORD = re.compile(r"[a-z]+|\d+")
_TOKEN = re.compile(r"[A-Za-z]+|\d+")
_FENCED = re.compile(r"```\n?(.*?)\n?```", re.DOTALL)

Path = tuple[Any, ...]


@dataclass(frozen=True)
class Demonstration:
    inputs: dict[str, Any]
    outputs: dict[str, Any]

    @functools.cached_property
    def input_words(self) -> set[str]:
        return words(self.inputs)


# -- reading and choosing a demonstration ------------------------------------------------------


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


def similarity(mine: set[str], theirs: set[str]) -> float:
    union = mine | theirs
    return len(mine & theirs) / len(union) if union else 0.0


def nearest(inputs: dict[str, Any], demos: list[Demonstration]) -> Demonstration | None:
    """The demo whose input words overlap most with `inputs` (Jaccard), if at least MIN_SIMILARITY."""
    mine = words(inputs)
    best, best_score = None, MIN_SIMILARITY
    for demo in demos:
        score = similarity(mine, demo.input_words)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = demo, score
    return best


# -- re-binding a demonstration's outputs to the current input ---------------------------------


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """(path, value) of every number and string inside `value`, in order."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, value


def _at(value: Any, path: Path) -> Any:
    for step in path:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            raise LookupError(path)
    return value


def _ranks(items: list[Any], rest: set[str]) -> list[int]:
    """Item indexes by how many words each shares with `rest`, most first; then by how many it
    shares with the list's other items; position breaks ties."""
    own = [words(item) for item in items]

    def kinship(i: int) -> int:
        return sum(len(own[i] & theirs) for j, theirs in enumerate(own) if j != i)

    return sorted(range(len(items)), key=lambda i: (-len(own[i] & rest), -kinship(i), i))


def _shape(token: str) -> tuple[str, int | bool]:
    if token.isdigit():
        return "digits", len(token)
    return "letters", token[:1].isupper()


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


class Binding:
    """Where each place of the demo's inputs is in the current inputs."""

    def __init__(self, demo: dict[str, Any], current: dict[str, Any]) -> None:
        self.demo, self.current = demo, current
        self._places = list(leaves(demo))
        self._rankings: dict[Path, tuple[list[int], list[int]]] = {}

    def place(self, path: Path) -> Path | None:
        """The current input's path standing for the demo's `path` (None: it has none)."""
        mapped: list[Any] = []
        demo, current = self.demo, self.current
        for depth, step in enumerate(path):
            if isinstance(step, int) and isinstance(demo, list):
                if not isinstance(current, list):
                    return None
                step = self._counterpart(path[:depth], demo, current, step)
                if step is None:
                    return None
            elif not (isinstance(current, dict) and step in current):
                return None
            mapped.append(step)
            demo, current = demo[path[depth]], current[step]
        return tuple(mapped)

    def _counterpart(self, where: Path, demo: list[Any], current: list[Any], index: int) -> int | None:
        if where not in self._rankings:
            self._rankings[where] = (
                _ranks(demo, words(_without(self.demo, where))),
                _ranks(current, words(_without(self.current, where))),
            )
        demo_ranked, ranked = self._rankings[where]
        rank = demo_ranked.index(index)
        return ranked[rank] if rank < len(ranked) else None

    def rebind(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self.rebind(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.rebind(item) for item in value]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return value
        for path, seen in self._places:
            if seen == value and type(seen) is type(value):
                place = self.place(path)
                return _at(self.current, place) if place is not None else value
        return self._rebind_words(value) if isinstance(value, str) else value

    def _rebind_words(self, text: str) -> str:
        return _TOKEN.sub(lambda match: self._word(match.group(0)), text)

    def _word(self, token: str) -> str:
        for path, seen in self._places:
            if not isinstance(seen, str):
                continue
            demo_tokens = _tokens(seen)
            if token not in demo_tokens:
                continue
            place = self.place(path)
            counterpart = _at(self.current, place) if place is not None else None
            if not isinstance(counterpart, str):
                continue
            found = _aligned(demo_tokens, _tokens(counterpart), demo_tokens.index(token))
            if found is not None:
                return found
        return token


def _without(value: dict[str, Any], where: Path) -> Any:
    """`value` with the list at `where` left out (the rest of the input, for ranking)."""
    if not where:
        return None
    if len(where) == 1:
        return {key: item for key, item in value.items() if key != where[0]}
    head, *tail = where
    if isinstance(value, dict):
        return {key: (_without(item, tuple(tail)) if key == head else item) for key, item in value.items()}
    return [(_without(item, tuple(tail)) if index == head else item) for index, item in enumerate(value)]


def _aligned(demo: list[str], current: list[str], index: int) -> str | None:
    """The token of `current` standing where `demo[index]` stands, or None."""
    matcher = difflib.SequenceMatcher(None, demo, current, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if not i1 <= index < i2:
            continue
        if tag == "equal":
            return current[j1 + index - i1]
        if tag == "replace":
            shape = _shape(demo[index])
            candidates = [j for j in range(j1, j2) if _shape(current[j]) == shape]
            if candidates:
                relative = (index - i1) / max(i2 - i1, 1)
                return current[min(candidates, key=lambda j: abs((j - j1) / max(j2 - j1, 1) - relative))]
        return None
    return None


# -- without a demonstration -------------------------------------------------------------------


def minimal(annotation: Any) -> Any:
    """A fixed minimal valid value of a DSPy output type."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        arguments = typing.get_args(annotation)
        return None if type(None) in arguments else minimal(arguments[0])
    if origin is typing.Literal:
        return typing.get_args(annotation)[0]
    kind = origin or annotation
    if kind in (list, tuple, set):
        return []
    if kind is dict:
        return {}
    if kind is bool:
        return False
    if kind in (int, float):
        return 0
    fields = getattr(annotation, "model_fields", None)
    if fields is not None:  # a pydantic model: its defaults, and minimal values for the rest
        return {
            name: (
                info.get_default(call_default_factory=True)
                if not info.is_required()
                else minimal(info.annotation)
            )
            for name, info in fields.items()
        }
    return FIXED_TEXT


def naive(call: LMCall) -> dict[str, Any]:
    return {name: minimal(annotation) for name, annotation in call.output_types.items()}


def answer(call: LMCall, demos: list[Demonstration]) -> dict[str, Any]:
    demo = nearest(call.inputs, demos)
    if demo is None:
        return naive(call)
    binding = Binding(demo.inputs, call.inputs)
    return {name: binding.rebind(value) for name, value in demo.outputs.items()}


def reflection(prompt: str) -> str:
    """A prompt outside DSPy's field format (GEPA's reflection): the instruction it quotes, unchanged."""
    quoted = _FENCED.search(prompt)
    instruction = quoted.group(1).strip() if quoted else "Follow the examples."
    return f"```\n{instruction}\n```"


class LearnerEngine(ScriptedEngine):
    """The engine of `learner_lm`: ScriptedEngine's token counting, answering by `answer`
    (`naive` with demos=False). `rules(call)`, when given, answers first (None: it does not know
    that signature)."""

    def __init__(
        self, rules: Callable[[LMCall], Mapping[str, Any] | None] | None = None, *, demos: bool = True
    ) -> None:
        super().__init__(responder=self._respond)
        self.rules = rules
        self.reads_demos = demos

    def _respond(self, call: LMCall) -> Any:
        ruled = self.rules(call) if self.rules is not None else None
        if ruled is not None:
            return ruled
        if not call.output_fields:
            return reflection(call.prompt)
        return answer(call, demonstrations(call) if self.reads_demos else [])


def _lm(engine: LearnerEngine, model: str) -> Any:
    import dspy

    watch_adapters()
    return dspy.LM(model, engine=engine, async_engine=_AsyncScriptedEngine(engine), cache=False)


def learner_lm(
    model: str = "learner/student", *, rules: Callable[[LMCall], Mapping[str, Any] | None] | None = None
) -> Any:
    """A `dspy.LM` answering as described in this module; `lm.engine.calls` lists its calls.

    With `rules` it is a rule-based teacher for offline runs: the rules answer the signatures
    they know, the learner's behaviour covers the rest (proposers, reflection)."""
    return _lm(LearnerEngine(rules), model)


def naive_lm(model: str = "learner/naive") -> Any:
    """The learner with its demonstrations hidden: the fixed minimal answer to every call (4.)."""
    return _lm(LearnerEngine(demos=False), model)
