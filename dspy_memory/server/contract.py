"""The service's HTTP contract besides the routes (docs/server.md#errors): every error in one
shape, `{"error": {"code", "message"}}`, with a stable code; `Allow` that lists every method of
a path; the error responses each route documents in the OpenAPI document.

Errors raised by the library and by the service's own checks (server/auth.py) meet errors raised
by FastAPI and Starlette (request validation, unknown routes and methods, unreadable bodies) and
errors nobody expected (500: logged with the traceback, the message holds no internals)."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from dspy_memory.server.auth import error_response
from dspy_memory.server.models import MEMORY_ID_PATTERN, ErrorBody

logger = logging.getLogger("dspy_memory")

# The codes of errors the service answers itself (the library's come from its exception classes:
# server/auth.py error_code). docs/server.md lists them all; tests/test_server_contract.py checks.
HTTP_CODES = {
    400: "malformed_body",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    500: "internal_error",
}

# What each status means on this service, for the OpenAPI document.
_MEANING = {
    400: "The body is not JSON, or not UTF-8 (`malformed_body`).",
    401: "No API key, or an unknown or revoked one (`unauthorized`).",
    403: "The key cannot do this: another tenant's scope (`scope_denied`), an admin route or an "
    "agent's retention policy (`admin_required`), an admin key naming no scope where one is needed "
    "(`scope_required`), or a write to a service opened read-only (`read_only`).",
    404: "No such memory, key or route in the key's scope (`memory_not_found`, `key_not_found`, `not_found`).",
    409: "The file's state refuses it: a concurrent change (`write_conflict`), a read-only or full block (`block`).",
    422: "The request does not fit the schema (`invalid_request`), or the library refused a value "
    "(`invalid_input`, `scope`).",
    429: "Over the key's rate (`rate_limited`): slow down.",
    500: "An unexpected failure (`internal_error`, `not_stored`); the service logged it.",
    502: "The LM answered, but not usably, on every attempt (`write_program`).",
    503: "No LM configured (`lm_unavailable`), the embedder failed (`embedding`), the reranker "
    "cannot run (`reranker_unavailable`), the memory is closed (`memory_closed`), or the file "
    "could not be read or written (`storage`).",
    507: "The disk holding the memory file is full (`storage_full`): nothing of this request was "
    "written; retry once space is freed.",
}

KEYED = (401, 403, 422, 429, 500, 503, 507)  # every route behind an API key


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: each status with the error body and what it means here."""
    return {status: {"model": ErrorBody, "description": _MEANING[status]} for status in sorted(set(statuses))}


ADMIN_ONLY = {"x-admin-only": True}  # and the description says so; 403 admin_required otherwise
ADMIN_NOTE = "Needs an admin API key (else 403 `admin_required`)."


def _exploded(name: str, description: str, schema: dict[str, Any], *, required: bool) -> dict[str, Any]:
    """One query parameter that is an object, sent as its fields (`?a=1&b=2`): how OpenAPI says
    which query fields go together (parameters alone cannot say "one of" or "at least one")."""
    parameter = dict(name=name, description=description, required=required, style="form", explode=True)
    return {"parameters": [{**parameter, "in": "query", "schema": {"type": "object", **schema}}]}


TIMELINE_FACT = _exploded(
    "fact",
    "The fact to follow: `subject`, `predicate` (e.g. lives_in) or both.",
    {
        "properties": {"subject": {"type": "string"}, "predicate": {"type": "string"}},
        "additionalProperties": False,
        "minProperties": 1,
    },
    required=True,
)
GRAPH_FOCUS = _exploded(
    "focus",
    "The graph around an `entity` (by name) or a memory (`memory_id`: its entities), not both; "
    "neither: the whole scope.",
    {
        "properties": {
            "entity": {"type": "string"},
            "memory_id": {"type": "string", "pattern": MEMORY_ID_PATTERN},
        },
        "additionalProperties": False,
        "maxProperties": 1,
    },
    required=False,
)


def links(**targets: dict[str, str]) -> dict[str, Any]:
    """OpenAPI links from a route's 200 answer to other routes (by operationId), e.g. from an
    added memory to reading it: the stateful contract test follows them."""
    links = {name: {"operationId": name, "parameters": parameters} for name, parameters in targets.items()}
    return {"responses": {"200": {"links": links}}}


ADDED_MEMORY = {"memory_id": "$response.body#/memories/0/id"}


def _code(status: int) -> str:
    if status in HTTP_CODES:
        return HTTP_CODES[status]
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def allowed_methods(app: Any, scope: Any) -> list[str]:
    """Every method some route serves at this request's path (FastAPI's own 405 names only the
    first route that matched the path)."""
    methods: set[str] = set()
    for route in app.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches({**scope, "method": next(iter(route_methods))})[0] is Match.FULL:
            methods |= set(route_methods)
    return sorted(methods)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def install_error_handlers(app: FastAPI) -> None:
    """Every error FastAPI or Starlette raises, in the service's error shape."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        if any(error.get("type") == "json_invalid" for error in exc.errors()):
            return error_response(
                400, "malformed_body", f"the body is not valid JSON: {_validation_message(exc)}"
            )
        return error_response(422, "invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        status = exc.status_code
        if status == 405:
            allow = ", ".join([*allowed_methods(request.app, request.scope), "OPTIONS"])
            if request.method == "OPTIONS":  # what this path supports, as RFC 9110 has it
                return Response(status_code=204, headers={"Allow": allow})
            message = f"{request.method} is not allowed on {request.url.path}; use {allow}"
            response = error_response(405, "method_not_allowed", message)
            response.headers["Allow"] = allow
            return response
        if status == 404:
            return error_response(404, "not_found", f"no route {request.method} {request.url.path}")
        if status == 400:
            return error_response(400, "malformed_body", "the body cannot be read: send UTF-8 JSON")
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        return error_response(status, _code(status), message)


class InternalErrorMiddleware:
    """Any exception nobody handled becomes a 500 `internal_error` in the error shape; its
    traceback goes to the log, never to the client (pure ASGI: the request id of
    AuditContextMiddleware is still set when it logs)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            from dspy_memory.governance.audit import current_context

            request_id = current_context().request_id
            logger.exception("%s %s failed (request %s)", scope.get("method"), scope.get("path"), request_id)
            if started:  # the client already has part of an answer; the server closes it
                raise
            message = f"the service failed on this request; it is logged under request id {request_id}"
            await error_response(500, "internal_error", message)(scope, receive, send)
