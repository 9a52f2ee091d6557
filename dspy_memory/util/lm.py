"""Language-model plumbing: which LM the write path uses, calling a program with bounded
retries and cost accounting, and the fully local Ollama set-up."""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dspy_memory.errors import LMUnavailableError, WriteProgramError
from dspy_memory.types import LMUsage
from dspy_memory.util.aio import on_caller_loop


def resolve_lm(lm: Any) -> Any:
    """The LM to use: the one given (a dspy.LM, or a model string such as
    "ollama_chat/llama3.2" built by `make_lm`), else the one set with dspy.configure(lm=...),
    else None."""
    if lm is not None:
        return make_lm(lm) if isinstance(lm, str) else _checked(lm)
    dspy = sys.modules.get("dspy")  # a program that never imported dspy configured no LM
    return None if dspy is None else _checked(dspy.settings.lm)


ADD_PURPOSE = "add(infer=True)"


def lm_for(configured: Any, infer: bool | None, *, purpose: str = ADD_PURPOSE) -> Any:
    """The LM a call is to use: none for infer=False, the configured one (or dspy's) for
    infer=None, and for infer=True that one or an error saying how to set one, naming the
    `purpose` that needs it (e.g. "answer()")."""
    if infer is False:
        return None
    lm = resolve_lm(configured)
    if lm is None and infer:
        raw = "; infer=False stores raw turns" if purpose == ADD_PURPOSE else ""
        raise LMUnavailableError(
            f"{purpose} needs an LM: dspy.configure(lm=dspy.LM('ollama_chat/llama3.2')), "
            f"Memory(path, lm=...), or DSPY_MEMORY_LM=...{raw}"
        )
    return lm


_warned_lms: set[int] = set()


def _checked(lm: Any) -> Any:
    """`lm`, after saying once when it is an Ollama model on the OpenAI-compatible route: that
    route sends no context window, so older Ollama versions cut prompts at 2,048 tokens."""
    from dspy_memory.util.ollama import is_native_ollama

    model = str(getattr(lm, "model", "") or "")
    if model.startswith("ollama") and not is_native_ollama(lm) and id(lm) not in _warned_lms:
        _warned_lms.add(id(lm))
        logging.getLogger("dspy_memory").warning(
            "%s talks to Ollama's OpenAI-compatible route, which sends no num_ctx and no output "
            "schema; build it with dspy_memory.make_lm(%r) or dspy_memory.local() instead",
            model,
            model,
        )
    return lm


def make_lm(model: str, api_base: str | None = None, *, num_ctx: int | None = None) -> Any:
    """A dspy.LM from a model string (DSPY_MEMORY_LM) and an optional API base.

    An Ollama model ("ollama_chat/<model>" or "ollama/<model>") gets what `local()` builds:
    Ollama's native chat route at `api_base` (else $OLLAMA_HOST, else localhost; a trailing /v1
    is dropped), `options.num_ctx = num_ctx` (default 8192) on every request, and answers
    constrained to each signature's output schema (see dspy_memory/util/ollama.py). `num_ctx`
    applies to Ollama models only."""
    from dspy_memory.util.ollama import ollama_lm, ollama_model_name

    if ollama_model_name(model) is not None:
        return ollama_lm(model, host=api_base, num_ctx=num_ctx)
    import dspy

    return dspy.LM(model, **({"api_base": api_base} if api_base else {}))


def adapter_for(lm: Any) -> Any:
    """The adapter `run_program` calls `lm` with: JSON constrained to the output schema on
    Ollama's native route, DSPy's field-marker chat format elsewhere; strict either way."""
    from dspy_memory.programs.strict import StrictChatAdapter
    from dspy_memory.util.ollama import OllamaJSONAdapter, is_native_ollama

    return OllamaJSONAdapter() if is_native_ollama(lm) else StrictChatAdapter()


def lm_name(lm: Any) -> str:
    return str(getattr(lm, "model", None) or type(lm).__name__)


def short_error(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error, for logs and the episode table (LM errors can embed the
    whole response, which may quote user content)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:limit]


def run_program(
    program: Any, lm: Any, inputs: dict[str, Any], *, max_attempts: int, timeout_s: float | None = None
) -> tuple[Any, LMUsage]:
    """Call a DSPy program with `lm`, retrying failures (malformed or truncated answers, LM
    errors) up to `max_attempts` times. Answers are parsed strictly (programs/strict.py): a
    truncated answer is a failure, never a fragment. An attempt that has not finished after
    `timeout_s` seconds fails the whole run (a hung LM would hang every retry too). Returns
    (prediction, usage over all attempts); raises WriteProgramError when no attempt succeeded."""
    import dspy

    adapter = adapter_for(lm)
    usage = LMUsage()
    last: BaseException | None = None
    for attempt in range(max_attempts):
        # A retry must reach the model: DSPy caches answers (on disk, across processes) under
        # a key without the API base, and a rollout id changes nothing at temperature 0, so a
        # cached bad answer would be served to every retry and every later reprocess().
        config = {"rollout_id": attempt, "cache": False} if attempt else {}
        # Inside an awaitable call (`await memory.aadd(...)`) the requests go to the caller's
        # event loop through DSPy's async path; otherwise this is `lm` itself.
        attempt_lm = on_caller_loop(lm.copy(**config) if config else lm)
        with dspy.context(lm=attempt_lm, adapter=adapter):
            with dspy.track_usage() as tracker:
                try:
                    prediction = _call_with_deadline(program, inputs, timeout_s)
                except _Timeout as exc:
                    raise WriteProgramError(str(exc), usage=usage + _usage_of(tracker)) from None
                except Exception as exc:
                    last = exc
                    prediction = None
        usage = usage + _usage_of(tracker)
        if prediction is not None:
            return prediction, usage
    assert last is not None
    raise WriteProgramError(
        f"{type(program).__name__} failed {max_attempts} times: {short_error(last)}", usage=usage
    )


class _Timeout(Exception):
    pass


def _call_with_deadline(program: Any, inputs: dict[str, Any], timeout_s: float | None) -> Any:
    """program(**inputs), given up after `timeout_s` seconds. The call runs in a daemon thread
    with this thread's context (DSPy's settings and usage tracking live in context variables);
    a call that never returns is abandoned: its answer, if it ever comes, is dropped."""
    if timeout_s is None:
        return program(**inputs)
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome["value"] = context.run(program, **inputs)
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, name="dspy-memory-lm-call", daemon=True).start()
    if not done.wait(timeout_s):
        raise _Timeout(f"the LM did not answer within {timeout_s:g} s (write.lm_timeout_s)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def prompt_tokens(program: Any, inputs: dict[str, Any], lm: Any = None) -> int:
    """Tokens of the prompt the program's first LM call to `lm` will send for `inputs`
    (instructions, demos and inputs as `run_program`'s adapter for `lm` renders them), counted
    before the call."""
    from dspy_memory.util.tokens import count_tokens

    predictor = program.named_predictors()[0][1]
    messages = adapter_for(lm).format(predictor.signature, predictor.demos, inputs)
    return sum(count_tokens(str(message.get("content") or "")) for message in messages)


def program_hash(program: Any) -> str:
    """A short hash of a program's state (instructions, demos): which compiled program wrote."""
    import hashlib
    import json

    try:
        state = json.dumps(program.dump_state(), sort_keys=True, default=str)
    except Exception:  # a program that cannot dump its state is named by its class
        state = type(program).__qualname__
    return hashlib.sha256(f"{type(program).__qualname__}\n{state}".encode()).hexdigest()[:16]


def history_mark(program: Any) -> Any:
    """Where the program's LM call history ends now (DSPy records every call of a module's LMs
    in the module's `history`, retries' copies included)."""
    history = getattr(program, "history", None) or []
    return history[-1] if history else None


def lm_call_ids(program: Any, mark: Any) -> list[str]:
    """The ids of the LM calls the program made since `mark` (history_mark): the provider's
    response id when there is one, else DSPy's id of the call. The history is capped, so a run
    of more calls than it keeps reports the last ones."""
    history = list(getattr(program, "history", None) or [])
    start = next((i + 1 for i in range(len(history) - 1, -1, -1) if history[i] is mark), 0) if mark else 0
    ids = []
    for entry in history[start:]:
        response_id = getattr(entry.get("response"), "id", None)
        ids.append(
            str(response_id) if isinstance(response_id, str) and response_id else str(entry.get("uuid"))
        )
    return ids


def _usage_of(tracker: Any) -> LMUsage:
    calls = prompt = completion = 0
    for entries in tracker.usage_data.values():
        for entry in entries:
            calls += 1
            prompt += int(entry.get("prompt_tokens") or 0)
            completion += int(entry.get("completion_tokens") or 0)
    return LMUsage(lm_calls=calls, prompt_tokens=prompt, completion_tokens=completion)


# -- fully local: Ollama ------------------------------------------------------------------------


@dataclass
class LocalModels:
    """The LM and the embedder of a local Ollama, ready for `Memory(path, lm=..., embedder=...)`."""

    lm: Any
    embedder: Any
    host: str


def check_ollama(host: str, models: Sequence[str | None], *, timeout: float = 5.0) -> None:
    """Fail now, with what to run, unless the Ollama at `host` answers and has `models` pulled
    (LMUnavailableError): better than the same connection error on every write, minutes later."""
    from dspy_memory.util.ollama import has_model, ollama_models, output_format

    available = ollama_models(host, timeout)
    missing = [name for name in models if name is not None and not has_model(available, name)]
    if missing:
        pulls = " && ".join(f"ollama pull {name}" for name in missing)
        raise LMUnavailableError(
            f"Ollama at {host} does not have {', '.join(missing)} (it has: "
            f"{', '.join(available) or 'no models'}). Run: {pulls}"
        )
    output_format(host, timeout=timeout)  # read the version now, not on the first write


def checked_lm(
    model: str, api_base: str | None = None, *, num_ctx: int | None = None, timeout: float = 5.0
) -> Any:
    """`make_lm(model, ...)`, after checking up front that an Ollama model can answer (other
    providers are not called before the first write: a check would cost a paid call)."""
    from dspy_memory.util.ollama import ollama_host, ollama_model_name

    name = ollama_model_name(model)
    if name is not None:
        check_ollama(ollama_host(api_base), [name], timeout=timeout)
    return make_lm(model, api_base, num_ctx=num_ctx)


def local(
    llm: str = "llama3.2",
    embed: str | None = "nomic-embed-text",
    *,
    host: str | None = None,
    num_ctx: int | None = None,
    configure: bool = True,
    check: bool = True,
    timeout: float = 5.0,
    **lm_kwargs: Any,
) -> LocalModels:
    """Use a local Ollama for everything: the chat model `llm` writes memories and `embed`
    embeds them (None keeps the bundled MiniLM embedder).

    >>> models = dspy_memory.local(llm="llama3.2", embed="nomic-embed-text")
    >>> memory = Memory("agent.db", lm=models.lm, embedder=models.embedder)

    `host` defaults to $OLLAMA_HOST, else http://localhost:11434. Checks that Ollama answers
    and that both models are pulled, and says what to run when not. The LM uses Ollama's
    native chat route with a `num_ctx`-token window (default 8192; Ollama cuts longer prompts
    silently) and
    asks for answers constrained to each signature's output schema (JSON mode before Ollama
    0.5.0); see dspy_memory/util/ollama.py. With configure=True (default) the LM is also set with
    dspy.configure(lm=...).
    """
    import dspy

    from dspy_memory.util.ollama import ollama_host, ollama_lm, ollama_model_name

    host = ollama_host(host)
    chat_model = ollama_model_name(llm) or llm
    if check:
        check_ollama(host, [chat_model, embed], timeout=timeout)
    lm = ollama_lm(chat_model, host=host, num_ctx=num_ctx, **lm_kwargs)
    if configure:
        dspy.configure(lm=lm)
    from dspy_memory.embed import OllamaEmbedder

    embedder = OllamaEmbedder(embed, host=host) if embed is not None else "local"
    return LocalModels(lm=lm, embedder=embedder, host=host)
