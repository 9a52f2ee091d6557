"""Scripted LMs for tests, examples and notebooks: no network, no model, real prompts.

`scripted_lm(responder)` returns a `dspy.LM` whose answers come from `responder(call)`, a
function that sees which signature is being called (its input values and output field names)
and returns the output fields as a dict (formatted for whichever DSPy adapter asked) or a raw
string (to test malformed answers). Token usage is counted on the real prompt with a real
tokenizer, so cost accounting can be measured without an LM.

    def responder(call):
        if "facts" in call.output_fields:
            return {"facts": [{"content": "Ada lives in Denver.", "subject": "Ada"}]}
        return {"ops": []}

    dspy.configure(lm=scripted_lm(responder))
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dspy_memory.util.text import SINGLE_VALUED_PREDICATES
from dspy_memory.util.tokens import count_tokens

_FIELD_LIST = re.compile(r"^\d+\. `(\w+)`", re.MULTILINE)
_SECTION = re.compile(
    r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.DOTALL
)


@dataclass
class LMCall:
    """One request to a scripted LM, parsed."""

    input_fields: list[str]
    output_fields: list[str]
    inputs: dict[str, Any]  # values of the last user message, JSON-decoded when possible
    prompt: str  # system prompt and every message, as sent
    json_mode: bool  # the JSON adapter asked (the answer must be a JSON object)

    @property
    def signature(self) -> str:
        return ", ".join(self.input_fields) + " -> " + ", ".join(self.output_fields)


Responder = Callable[[LMCall], "str | Mapping[str, Any]"]


def _fields(system: str, heading: str) -> list[str]:
    start = system.find(heading)
    if start < 0:
        return []
    section = system[start + len(heading) :]
    end = section.find("Your output fields are:") if heading.startswith("Your input") else -1
    if end < 0:
        end = section.find("All interactions will be structured")
    return _FIELD_LIST.findall(section[: end if end >= 0 else None])


def _inputs(text: str, names: list[str]) -> dict[str, Any]:
    """Values of the named input fields; a value may itself contain [[ ## x ## ]] markers (a
    ReAct trajectory does), so only the signature's own field names split the text."""
    if not names:
        return {name: _decode(value) for name, value in _SECTION.findall(text)}
    fields = "|".join(re.escape(name) for name in names)
    marker = re.compile(rf"\[\[ ## ({fields}) ## \]\]\n")
    found = list(marker.finditer(text))
    values = {}
    for match, following in zip(found, [*found[1:], None]):
        end = following.start() if following else len(text)
        value = text[match.end() : end]
        value = re.split(r"\n\nRespond with", value)[0]
        values[match.group(1)] = _decode(value.strip())
    return values


def parse_call(system: str, messages: list[tuple[str, str]]) -> LMCall:
    """Parse a DSPy prompt (system text and (role, text) messages) into an LMCall."""
    last_user = next((text for role, text in reversed(messages) if role == "user"), "")
    input_fields = _fields(system, "Your input fields are:")
    return LMCall(
        input_fields=input_fields,
        output_fields=_fields(system, "Your output fields are:"),
        inputs=_inputs(last_user, input_fields),
        prompt="\n\n".join([system, *(text for _, text in messages)]),
        json_mode="Respond with a JSON object" in last_user,
    )


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value.strip()


def format_answer(fields: Mapping[str, Any], *, json_mode: bool) -> str:
    """Output fields as DSPy's ChatAdapter (or JSONAdapter) expects them."""
    if json_mode:
        return json.dumps(dict(fields), default=_jsonable)
    parts = []
    for name, value in fields.items():
        text = value if isinstance(value, str) else json.dumps(value, default=_jsonable)
        parts.append(f"[[ ## {name} ## ]]\n{text}")
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump()
    raise TypeError(f"cannot serialize {type(value).__name__}")


@dataclass
class ScriptedEngine:
    """A DSPy LM engine (`complete(request) -> Response`) that answers with `responder`."""

    responder: Responder
    calls: list[LMCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def complete(self, request: Any) -> Any:
        from dspy import lm15

        system = request.system if isinstance(request.system, str) else ""
        call = parse_call(system, [(message.role, message.text or "") for message in request.messages])
        with self._lock:
            self.calls.append(call)
        answer = self.responder(call)
        text = answer if isinstance(answer, str) else format_answer(answer, json_mode=call.json_mode)
        prompt_tokens, completion_tokens = count_tokens(call.prompt), count_tokens(text)
        return lm15.Response(
            id=f"scripted-{len(self.calls)}",
            model=request.model,
            message=lm15.Message(role="assistant", parts=(lm15.TextPart(text=text),)),
            finish_reason="stop",
            usage=lm15.Usage(
                input_tokens=prompt_tokens,
                output_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
        )


@dataclass
class _AsyncScriptedEngine:
    """The async counterpart DSPy needs for `acall`: the same engine, awaited."""

    engine: ScriptedEngine

    async def complete(self, request: Any) -> Any:
        return self.engine.complete(request)


def scripted_lm(responder: Responder, *, model: str = "scripted/lm") -> Any:
    """A `dspy.LM` answering with `responder`; `lm.engine.calls` lists the calls it received."""
    import dspy

    engine = ScriptedEngine(responder)
    return dspy.LM(model, engine=engine, async_engine=_AsyncScriptedEngine(engine), cache=False)


# -- a write LM that knows the right facts --------------------------------------------------------

# The oracle invalidates a changed value of these relations and adds everything else.
FUNCTIONAL_PREDICATES = SINGLE_VALUED_PREDICATES


def _key(text: str | None) -> str:
    return " ".join((text or "").casefold().replace("_", " ").split())


def oracle_decisions(
    facts: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    functional: frozenset[str] = FUNCTIONAL_PREDICATES,
) -> list[dict[str, Any]]:
    """What a careful LM decides: NOOP for a fact already known, INVALIDATE when a one-valued
    relation (`functional`) of the same subject changes, ADD otherwise."""
    ops: list[dict[str, Any]] = []
    used: set[int] = set()
    for fact in facts:
        same = next(
            (m for m in existing if m["alias"] not in used and _key(m["content"]) == _key(fact["content"])),
            None,
        )
        if same is not None:
            used.add(same["alias"])
            ops.append({"action": "NOOP", "target": same["alias"], "reason": "already known"})
            continue
        prior = None
        if _key(fact.get("predicate")).replace(" ", "_") in functional:
            prior = next(
                (
                    m
                    for m in existing
                    if m["alias"] not in used
                    and _key(m.get("subject")) == _key(fact.get("subject"))
                    and _key(m.get("predicate")) == _key(fact.get("predicate"))
                ),
                None,
            )
        if prior is not None:
            used.add(prior["alias"])
            ops.append({"action": "INVALIDATE", "target": prior["alias"], "reason": "changed", **fact})
        else:
            ops.append({"action": "ADD", **fact})
    return ops


def oracle_write_lm(
    facts_by_text: Mapping[str, list[dict[str, Any]]], *, model: str = "scripted/oracle"
) -> Any:
    """A scripted LM for the three write signatures that knows which facts each message holds
    (`facts_by_text`: message text -> fact dicts) and decides like `oracle_decisions`."""
    return scripted_lm(oracle_responder(facts_by_text), model=model)


def oracle_responder(facts_by_text: Mapping[str, list[dict[str, Any]]]) -> Responder:
    """The responder of `oracle_write_lm` (also for fake servers speaking an LM's HTTP API)."""

    def facts_of(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [fact for turn in turns for fact in facts_by_text.get(turn["text"], [])]

    def responder(call: LMCall) -> Mapping[str, Any]:
        if call.output_fields == ["facts"]:
            return {"facts": facts_of(call.inputs["turns"])}
        new = call.inputs["new_facts"] if "new_facts" in call.inputs else facts_of(call.inputs["turns"])
        return {"ops": oracle_decisions(new, call.inputs["existing_memories"])}

    return responder


# -- a scripted ReAct agent --------------------------------------------------------------------


def tools_called(trajectory: str) -> list[str]:
    """Tool names in a ReAct trajectory as DSPy formats it for the LM."""
    return re.findall(r"\[\[ ## tool_name_\d+ ## \]\]\n(\w+)", trajectory)


def scripted_agent_lm(
    plan: Callable[[str, str, str], tuple[str, dict[str, Any]] | None],
    answer: Callable[[str, str], str],
    *,
    write: Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
    model: str = "scripted/agent",
) -> Any:
    """A scripted LM for `dspy.ReAct` (and `MemoryReAct`): `plan(question, trajectory,
    memory_context)` returns the next (tool name, arguments), or None to finish; `answer(question,
    trajectory)` the final answer; `write(turns, existing_memories)` the write program's
    operations when memory asks (default: none)."""

    def responder(call: LMCall) -> Mapping[str, Any]:
        inputs = call.inputs
        if call.output_fields == ["ops"]:
            return {"ops": write(inputs["turns"], inputs["existing_memories"]) if write else []}
        question = str(inputs.get("question", ""))
        trajectory = str(inputs.get("trajectory", ""))
        if "next_tool_name" in call.output_fields:
            step = plan(question, trajectory, str(inputs.get("memory_context", "")))
            name, args = step if step else ("finish", {})
            return {"next_thought": f"Next: {name}.", "next_tool_name": name, "next_tool_args": args}
        return {"reasoning": "From the trajectory.", "answer": answer(question, trajectory)}

    return scripted_lm(responder, model=model)
