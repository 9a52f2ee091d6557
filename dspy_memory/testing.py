"""Scripted LMs for tests, examples and notebooks: no network, no model, real prompts.

`scripted_lm(responder)` returns a `dspy.LM` whose answers come from `responder(call)`, a
function that sees which signature is being called (its input values and output field names)
and returns the output fields as a dict (formatted by the adapter that asked, as a real LM's
answer would be) or a raw string (to test malformed answers). Token usage is counted on the
real prompt with a real tokenizer, so cost accounting can be measured without an LM.

    def responder(call):
        if "facts" in call.output_fields:
            return {"facts": [{"content": "Ada lives in Denver.", "subject": "Ada"}]}
        return {"ops": []}

    dspy.configure(lm=scripted_lm(responder))

The prompt text is never parsed: a DSPy callback records, for every prompt an adapter
formats, the signature, input values and demos it formatted (`AdapterCall`), and the scripted
LM looks its prompt up there. A change in how DSPy renders prompts cannot break these LMs.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy import lm15
from dspy.utils.callback import BaseCallback
from pydantic_core import to_jsonable_python

from dspy_memory.util.text import SINGLE_VALUED_PREDICATES
from dspy_memory.util.tokens import count_tokens


@dataclass(frozen=True)
class AdapterCall:
    """What a DSPy adapter formatted into one prompt: the adapter, the signature (as the adapter
    saw it, e.g. with ReAct's tool fields), the input values and the demos."""

    adapter: Any
    signature: Any
    inputs: dict[str, Any]
    demos: list[dict[str, Any]]


def _prompt_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: the text ones, as an LM request carries them
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return str(content or "")


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return _text(next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), ""))


class AdapterCalls(BaseCallback):
    """A DSPy callback that remembers the AdapterCall behind each prompt an adapter formats,
    by the text of its last user message (the current inputs); the most recent 4096."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, AdapterCall] = {}
        self._by_prompt: OrderedDict[str, AdapterCall] = OrderedDict()
        self._lock = threading.Lock()

    def on_adapter_format_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        if "signature" not in inputs:
            # An adapter subclassing another is wrapped twice (DSPy decorates format() in each
            # subclass); the outer wrapper sees (*args, **kwargs), the inner one the names.
            return
        call = AdapterCall(instance, inputs["signature"], dict(inputs["inputs"]), list(inputs["demos"] or []))
        with self._lock:
            self._pending[call_id] = call

    def on_adapter_format_end(
        self, call_id: str, outputs: Any, exception: BaseException | None = None
    ) -> None:
        with self._lock:
            call = self._pending.pop(call_id, None)
            if call is None or exception is not None or not outputs:
                return
            key = _prompt_key(_last_user_text(outputs))
            self._by_prompt[key] = call
            self._by_prompt.move_to_end(key)
            while len(self._by_prompt) > 4096:
                self._by_prompt.popitem(last=False)

    def find(self, messages: Sequence[Mapping[str, Any]]) -> AdapterCall | None:
        """The AdapterCall whose prompt ends with these messages' last user message."""
        with self._lock:
            return self._by_prompt.get(_prompt_key(_last_user_text(messages)))


ADAPTER_CALLS = AdapterCalls()


def watch_adapters() -> None:
    """Put ADAPTER_CALLS among DSPy's global callbacks (once). The list is extended in place:
    `dspy.configure` may only be called from the thread that configured DSPy first."""
    callbacks = dspy.settings.callbacks
    if not any(callback is ADAPTER_CALLS for callback in callbacks):
        callbacks.append(ADAPTER_CALLS)


@dataclass
class LMCall:
    """One request to a scripted LM: the signature asked for and its input values."""

    input_fields: list[str]
    output_fields: list[str]
    inputs: dict[str, Any]  # the input values, as JSON data (pydantic models as dicts)
    prompt: str  # system prompt and every message, as sent (for token counts and spot checks)
    json_mode: bool  # the JSON adapter asked (the answer must be a JSON object)
    demos: list[dict[str, Any]] = field(default_factory=list)  # input and output values, as JSON data
    adapter_call: AdapterCall | None = field(default=None, repr=False)

    @property
    def signature(self) -> str:
        return ", ".join(self.input_fields) + " -> " + ", ".join(self.output_fields)

    @property
    def output_types(self) -> dict[str, Any]:
        """{output field: its type annotation}, as the signature declares them."""
        if self.adapter_call is None:
            return {name: str for name in self.output_fields}
        return {name: info.annotation for name, info in self.adapter_call.signature.output_fields.items()}


Responder = Callable[[LMCall], "str | Mapping[str, Any]"]


def call_for(messages: Sequence[Mapping[str, Any]]) -> LMCall:
    """The LMCall of a request with these messages ({"role", "content"} dicts, the system
    message included): the signature and values the adapter formatted into them. A prompt no
    adapter formatted (a direct `lm("...")`, GEPA's reflection) has no fields."""
    prompt = "\n\n".join(_text(message.get("content")) for message in messages)
    found = ADAPTER_CALLS.find(messages)
    if found is None:
        return LMCall([], [], {}, prompt, json_mode=False)
    signature = found.signature
    return LMCall(
        input_fields=list(signature.input_fields),
        output_fields=list(signature.output_fields),
        inputs=to_jsonable_python(found.inputs, fallback=str),
        prompt=prompt,
        json_mode=isinstance(found.adapter, dspy.JSONAdapter),
        demos=[to_jsonable_python(dict(demo), fallback=str) for demo in found.demos],
        adapter_call=found,
    )


def format_answer(call: LMCall, fields: Mapping[str, Any]) -> str:
    """Output fields as the adapter that asked expects an LM to write them."""
    if call.adapter_call is None:
        raise ValueError("a prompt no DSPy adapter formatted: answer it with a string")
    found = call.adapter_call
    return found.adapter.format_assistant_message_content(found.signature, dict(fields))


@dataclass
class ScriptedEngine:
    """A DSPy LM engine (`complete(request) -> Response`) that answers with `responder`."""

    responder: Responder
    calls: list[LMCall] = field(default_factory=list)
    delay_s: float = 0.0  # how long each answer takes, as a remote model's would
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def complete(self, request: Any) -> Any:
        time.sleep(self.delay_s)
        return self.answer(request)

    def answer(self, request: Any) -> Any:
        messages = [{"role": "system", "content": request.system}] if isinstance(request.system, str) else []
        messages += [{"role": message.role, "content": message.text or ""} for message in request.messages]
        call = call_for(messages)
        with self._lock:
            self.calls.append(call)
        answer = self.responder(call)
        text = answer if isinstance(answer, str) else format_answer(call, answer)
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
        await asyncio.sleep(self.engine.delay_s)  # waits as a remote model's answer would: off the loop
        return self.engine.answer(request)


def scripted_lm(responder: Responder, *, model: str = "scripted/lm", delay_s: float = 0.0) -> Any:
    """A `dspy.LM` answering with `responder`; `lm.engine.calls` lists the calls it received.
    Each answer takes `delay_s` seconds: slept in a sync call, awaited in an async one."""
    watch_adapters()
    engine = ScriptedEngine(responder, delay_s=delay_s)
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
