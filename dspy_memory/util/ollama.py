"""Ollama, spoken natively: the chat model on `/api/chat` with a context window (`num_ctx`) that
does not silently cut the prompt, and answers constrained to the output schema of the signature
being called.

Why the native route: DSPy's default client reaches Ollama through its OpenAI-compatible `/v1`
route, which cannot carry `options.num_ctx`; older Ollama versions then run a 2048-token window
and drop the start of a longer prompt without a word. LiteLLM's `ollama_chat` provider (DSPy's
`engine="litellm"`) posts to `/api/chat`, sends extra keyword arguments such as `num_ctx` as
`options`, and turns an OpenAI-style `response_format` JSON schema into Ollama's `format`.

Structured output: Ollama >= 0.5.0 takes a JSON schema in `format` and constrains sampling to it;
older versions take only `format: "json"` (any JSON object). The version is read once per host
from `/api/version`; a server that refuses the schema anyway is asked again in JSON mode, and
the host is remembered as JSON-only. Either way the answer is one JSON object, parsed strictly
(programs/strict.py): a reply that is not JSON, is cut short or lacks a field fails the call.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import urllib.error
import urllib.request
from typing import Any, Literal

import dspy
import pydantic
from dspy.adapters.json_adapter import _get_structured_outputs_response_format
from dspy.utils.exceptions import LMInvalidRequestError

from dspy_memory.errors import InvalidInputError, LMUnavailableError
from dspy_memory.programs.strict import StrictJSONAdapter

logger = logging.getLogger(__name__)

OLLAMA_HOST = "http://localhost:11434"
# Big enough for the write path's default prompt budget (write.max_prompt_tokens, 6000) plus
# the answer; Ollama's own default was 2048 tokens before 0.6.
DEFAULT_NUM_CTX = 8192
SCHEMA_FORMAT_SINCE = (0, 5, 0)

OutputFormat = Literal["schema", "json"]


def ollama_host(host: str | None = None) -> str:
    """`host`, else $OLLAMA_HOST (as the ollama CLI reads it), else localhost; with a scheme and
    without a trailing /v1 (a base URL written for the OpenAI-compatible route works too)."""
    host = host or os.environ.get("OLLAMA_HOST") or OLLAMA_HOST
    if "://" not in host:
        host = "http://" + host
    return host.rstrip("/").removesuffix("/v1")


def ollama_model_name(model: str) -> str | None:
    """The Ollama model of a DSPy model string ("ollama_chat/llama3.2" or "ollama/llama3.2"),
    else None."""
    prefix, _, name = model.partition("/")
    return name if prefix in ("ollama_chat", "ollama") and name else None


# -- the server: reachable, version, models ----------------------------------------------------


class OllamaHTTPError(Exception):
    """Ollama answered with an HTTP error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def ollama_api(host: str, path: str, payload: dict[str, Any] | None = None, *, timeout: float = 5.0) -> Any:
    """GET (or POST `payload` to) one of Ollama's JSON endpoints. Raises LMUnavailableError when
    nothing answers at `host`, OllamaHTTPError on an error status."""
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(f"{host}{path}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        try:
            message = json.loads(body).get("error", body)
        except (ValueError, AttributeError):
            message = body
        raise OllamaHTTPError(exc.code, str(message)[:300]) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LMUnavailableError(
            f"Ollama is not running at {host} ({reason}). Start it with `ollama serve` "
            "(install from https://ollama.com), or pass host= (or set OLLAMA_HOST) if it runs elsewhere."
        ) from None


def ollama_models(host: str, timeout: float = 5.0) -> list[str]:
    """Names of the models pulled into the Ollama at `host` (LMUnavailableError if it is down)."""
    try:
        payload = ollama_api(host, "/api/tags", timeout=timeout)
    except OllamaHTTPError as exc:
        raise LMUnavailableError(f"Ollama at {host} could not list its models ({exc})") from None
    return [model.get("name", "") for model in payload.get("models", [])]


def has_model(available: list[str], wanted: str) -> bool:
    # Ollama lists "llama3.2:latest" for a model pulled as "llama3.2".
    names = set(available) | {name.removesuffix(":latest") for name in available}
    return wanted in names or wanted.removesuffix(":latest") in names


def ollama_version(host: str, timeout: float = 5.0) -> str | None:
    """The version the Ollama at `host` reports, or None if it has no /api/version."""
    try:
        payload = ollama_api(host, "/api/version", timeout=timeout)
    except OllamaHTTPError:
        return None
    version = payload.get("version") if isinstance(payload, dict) else None
    return str(version) if version else None


def parse_version(version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of "0.5.7", "v0.4.0-rc1", ...; None when unreadable. Builds from
    source report 0.0.0, which says nothing about features: None too."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version or "")
    if match is None:
        return None
    parsed = (int(match[1]), int(match[2]), int(match[3]))
    return None if parsed == (0, 0, 0) else parsed


def format_for_version(version: str | None) -> OutputFormat:
    """How to ask a server of `version` for structured output: "schema" from 0.5.0 on, "json"
    before; an unknown version is asked for the schema (a refusal falls back to "json")."""
    parsed = parse_version(version)
    return "json" if parsed is not None and parsed < SCHEMA_FORMAT_SINCE else "schema"


_formats: dict[str, OutputFormat] = {}
_formats_lock = threading.Lock()


def output_format(host: str, *, timeout: float = 5.0) -> OutputFormat:
    """How to ask the Ollama at `host` for structured output: read from its version once per
    process, or learnt from a refusal. An unreachable host is asked again next time."""
    with _formats_lock:
        known = _formats.get(host)
    if known is not None:
        return known
    try:
        found = format_for_version(ollama_version(host, timeout))
    except LMUnavailableError:
        return "schema"  # the chat call will fail with the reason; decide when it is back
    with _formats_lock:
        return _formats.setdefault(host, found)


def _remember_json_only(host: str) -> None:
    with _formats_lock:
        _formats[host] = "json"


def trained_context(host: str, model: str, *, timeout: float = 5.0) -> int | None:
    """The context length `model` was trained for, from /api/show (None when Ollama does not
    say). The window a request runs with is its `options.num_ctx`, which may exceed it."""
    info = ollama_api(host, "/api/show", {"model": model}, timeout=timeout)
    lengths = [
        value for key, value in (info.get("model_info") or {}).items() if key.endswith(".context_length")
    ]
    return int(lengths[0]) if lengths else None


# -- the LM ------------------------------------------------------------------------------------


def ollama_lm(model: str, *, host: str | None = None, num_ctx: int | None = None, **lm_kwargs: Any) -> Any:
    """A dspy.LM for the Ollama chat model `model` ("llama3.2", "ollama_chat/llama3.2" or
    "ollama/llama3.2") on Ollama's native chat route, with `options.num_ctx = num_ctx` (default
    8192) on every request. `host` defaults to $OLLAMA_HOST, else http://localhost:11434."""
    num_ctx = DEFAULT_NUM_CTX if num_ctx is None else num_ctx
    if isinstance(num_ctx, bool) or not isinstance(num_ctx, int) or num_ctx < 512:
        raise InvalidInputError(f"num_ctx must be a whole number of tokens >= 512, got {num_ctx!r}")
    name = ollama_model_name(model) or model
    if "litellm" not in sys.modules:
        # A local model has no price; without this LiteLLM fetches its price list from GitHub on
        # import, and an offline machine waits and logs warnings for it.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return dspy.LM(
        f"ollama_chat/{name}", api_base=ollama_host(host), engine="litellm", num_ctx=num_ctx, **lm_kwargs
    )


def is_native_ollama(lm: Any) -> bool:
    """Whether `lm` talks to Ollama's native chat route (where `format` is understood)."""
    return getattr(lm, "engine", None) == "litellm" and str(getattr(lm, "model", "")).startswith(
        "ollama_chat/"
    )


def response_format(signature: type[dspy.Signature], mode: OutputFormat) -> dict[str, Any]:
    """The OpenAI-style response_format LiteLLM turns into Ollama's `format`: the JSON schema of
    the signature's output fields (built by DSPy, as its JSONAdapter does for OpenAI), or JSON
    mode when the server is older or the outputs have no fixed shape (a dict field)."""
    if mode == "schema":
        try:
            outputs = _get_structured_outputs_response_format(signature)
        except (ValueError, pydantic.PydanticInvalidForJsonSchema, pydantic.PydanticSchemaGenerationError):
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": "outputs", "schema": outputs.model_json_schema()},
        }
    return {"type": "json_object"}


class OllamaJSONAdapter(StrictJSONAdapter):
    """Strict JSON answers from Ollama's native route: `format` carries the output schema (or
    "json" on servers before 0.5.0); a server that refuses the schema is asked again in JSON
    mode, once, and remembered."""

    def _prepare_response_format(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any) -> None:
        lm_kwargs["response_format"] = response_format(signature, output_format(_host_of(lm)))

    def __call__(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: Any, inputs: Any) -> Any:
        try:
            return super().__call__(lm, lm_kwargs, signature, demos, inputs)
        except LMInvalidRequestError as exc:
            if not _refused_schema(lm, exc):
                raise
        return super().__call__(lm, lm_kwargs, signature, demos, inputs)


def _host_of(lm: Any) -> str:
    return ollama_host(lm.kwargs.get("api_base"))


def _refused_schema(lm: Any, exc: Exception) -> bool:
    """Whether the request failed because the server does not take a schema in `format` (then
    the host is JSON-only from now on)."""
    host = _host_of(lm)
    if output_format(host) != "schema" or "format" not in str(exc).lower():
        return False
    logger.warning(
        "Ollama at %s refused a JSON schema in `format` (%s); asking in JSON mode from now on. "
        "Ollama >= 0.5.0 constrains answers to the schema.",
        host,
        str(exc)[:200],
    )
    _remember_json_only(host)
    return True
