"""Who is calling and what they may reach: API keys bound to tenants, a token bucket per key,
and errors as JSON with a stable `code` (docs/server.md).

Every request's scope comes from its key: a body or query that names another user is refused
(403 `scope_denied`), whatever it says. A key bound to a user may narrow to one of the user's
agents or runs; an admin key names any scope and manages keys. A service with no key at all
runs only when started `insecure` (on loopback, or with --insecure): then the request names
its scope.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from dspy_memory.errors import (
    BlockError,
    DSPyMemoryError,
    EmbeddingError,
    InvalidInputError,
    LMUnavailableError,
    MemoryClosedError,
    MemoryNotFoundError,
    ReadOnlyError,
    RerankerUnavailableError,
    ScopeError,
    StorageError,
    StorageFullError,
    WriteConflictError,
    WriteProgramError,
)
from dspy_memory.server.key_record import SCOPE_FIELDS

if TYPE_CHECKING:
    from dspy_memory.store.keys import ApiKey


class ServiceError(Exception):
    """An HTTP error with a stable code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


_STATUS = (
    (MemoryNotFoundError, 404),
    (ReadOnlyError, 403),  # a service over a read replica (DSPY_MEMORY_READ_ONLY) searches only
    (ScopeError, 422),
    (BlockError, 409),  # the block's state refuses it: read-only, or the text is over its limit
    (InvalidInputError, 422),
    (WriteConflictError, 409),
    (LMUnavailableError, 503),
    (RerankerUnavailableError, 503),
    (EmbeddingError, 503),
    (WriteProgramError, 502),
    (MemoryClosedError, 503),
    (StorageFullError, 507),  # before StorageError, which it is too
    (StorageError, 503),
)


def error_code(exc: DSPyMemoryError) -> str:
    """ "MemoryNotFoundError" -> "memory_not_found": the class is the stable contract."""
    name = type(exc).__name__.removesuffix("Error").replace("DSPy", "Dspy")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower() or "error"


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message}})


def memory_error_response(exc: DSPyMemoryError) -> JSONResponse:
    status = next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)
    return error_response(status, error_code(exc), str(exc))


@dataclass(frozen=True)
class Caller:
    """The authenticated caller: its key (None in insecure mode without keys)."""

    key: ApiKey | None

    @property
    def admin(self) -> bool:
        return self.key is None or self.key.admin

    def scope(self, named: dict[str, Any]) -> dict[str, Any]:
        """The scope a request acts on: its key's, narrowed by what the request names. Naming
        an id the key does not hold is refused, never silently replaced."""
        named = {field: named.get(field) for field in SCOPE_FIELDS}
        if self.key is None or self.key.scope is None:  # insecure mode, or an admin key
            return named
        bound = self.key.scope.model_dump()
        for field in SCOPE_FIELDS:
            wanted, own = named[field], bound[field]
            if wanted is not None and own is not None and wanted != own:
                raise ServiceError(403, "scope_denied", f"this API key cannot reach {field}={wanted!r}")
            if own is not None:
                named[field] = own
        return named

    def acting_scope(self, named: dict[str, Any]) -> dict[str, Any]:
        """The scope of a route that acts on one scope: an admin key, having none of its own,
        must name it (403 `scope_required`; a tenant key never needs to)."""
        scope = self.scope(named)
        if self.key is not None and self.key.scope is None and not any(scope.values()):
            raise ServiceError(
                403,
                "scope_required",
                "this admin key has no scope of its own: name user_id, agent_id or run_id",
            )
        return scope

    def require_admin(self) -> None:
        if not self.admin:
            raise ServiceError(403, "admin_required", "this needs an admin API key")


class RateLimiter:
    """A token bucket per key: `rate` requests a second on average, bursts up to `burst`."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key_id: str) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1:
                self._buckets[key_id] = (tokens, now)
                return False
            self._buckets[key_id] = (tokens - 1, now)
            return True


def token_of(request: Request) -> str | None:
    """The key a request carries: `Authorization: Bearer <key>` or `X-API-Key: <key>`."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get("x-api-key") or None


# The two ways a request carries its key, as OpenAPI security schemes (either one will do).
API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key: dm_...")
BEARER = HTTPBearer(
    auto_error=False, description="an API key as a bearer token: Authorization: Bearer dm_..."
)


def authenticate(
    request: Request,
    _header: Annotated[str | None, Security(API_KEY_HEADER)] = None,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
) -> Caller:
    """The caller of a route (FastAPI dependency; the two parameters put the key's schemes in
    the OpenAPI document, token_of reads the key)."""
    return caller_of(request)


def caller_of(request: Request) -> Caller:
    """The caller of a request; 401 without a valid key unless the service runs insecure with
    no key configured, 429 over the key's rate."""
    state = request.app.state
    token = token_of(request)
    if token is None:
        if state.insecure and state.memory.keys.count_live() == 0:
            return Caller(key=None)
        raise ServiceError(401, "unauthorized", "an API key is required: Authorization: Bearer <key>")
    key = state.memory.keys.verify(token)
    if key is None:
        raise ServiceError(401, "unauthorized", "unknown or revoked API key")
    if not state.limiter.allow(key.id):
        raise ServiceError(429, "rate_limited", "too many requests for this API key; slow down")
    return Caller(key=key)


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/=+-]{1,128}")


class AuditContextMiddleware:
    """Each request acts as its API key ("api-key:<id>"; the id is public, the token's secret is
    never logged) with a request id (its `X-Request-ID` when well formed, else a new one, sent
    back in the response): the audit log names both for every change the request makes. A pure
    ASGI middleware, so the context variable reaches the endpoint and its worker thread. A
    token that is not a valid key never gets as far as a change (authenticate refuses it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import uuid

        from dspy_memory.governance.audit import acting_as
        from dspy_memory.types import API_KEY_PREFIX as PREFIX

        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        given = headers.get("x-request-id", "").strip()
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        token = headers.get("x-api-key", "")
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
        key_id = token[len(PREFIX) :].split("_", 1)[0] if token.startswith(PREFIX) else ""
        actor = f"api-key:{key_id}" if re.fullmatch(r"[0-9a-f]{1,32}", key_id) else None

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        with acting_as(actor, request_id=request_id):
            await self.app(scope, receive, send_with_id)
