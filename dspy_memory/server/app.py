"""The memory service: `create_app(config)` is a FastAPI app over one Memory (docs/server.md).

Routes (server/routes.py): the three seed endpoints (`/store_memory`, `/retrieve_memory`,
`/forget_memory`, with exactly their request and response shapes), `/v1/...` for everything
else (a scope's retention policy: server/retention_routes.py), `/healthz`, `/readyz`, OpenAPI
at `/docs`; the agent tools over MCP at `/mcp/` (behind the same API keys); the web inspector
at `/ui`. Every error is JSON `{"error": {"code", "message"}}` (server/contract.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request

from dspy_memory.config import MemoryConfig
from dspy_memory.errors import DSPyMemoryError
from dspy_memory.server.auth import (
    AuditContextMiddleware,
    RateLimiter,
    ServiceError,
    caller_of,
    error_response,
    memory_error_response,
)
from dspy_memory.server.contract import InternalErrorMiddleware, install_error_handlers
from dspy_memory.server.inspector import inspector_router
from dspy_memory.server.retention_routes import add_retention_routes
from dspy_memory.server.routes import add_routes

logger = logging.getLogger("dspy_memory")
API_DESCRIPTION = (
    "Long-term, time-aware memory for agents (docs/server.md). Every route but /healthz and /readyz "
    "needs an API key (`X-API-Key: dm_...` or `Authorization: Bearer dm_...`); its scope is the "
    "key's. Routes marked `x-admin-only` need an admin key. Every error is "
    '`{"error": {"code", "message"}}` with a stable `code`.'
)


# -- the app -------------------------------------------------------------------------------------


def create_app(
    config: MemoryConfig | str | None = None,
    *,
    memory: Any = None,
    insecure: bool = False,
    rate_per_second: float = 50.0,
    burst: int = 100,
    close_memory: bool = False,
    **memory_options: Any,
) -> FastAPI:
    """The service over `memory` (a Memory), or over a Memory opened from `config` (a
    MemoryConfig or a path; None: MemoryConfig.from_env()) when the app starts and closed
    when it stops. `insecure`: without any API key, requests name their own scope (for
    loopback development only; `dspy-memory serve` refuses it elsewhere). `close_memory`: the
    app closes the `memory` it was given when it stops (`serve`: uvicorn re-raises SIGTERM after
    its shutdown, so code after `uvicorn.run` never runs)."""
    from dspy_memory.memory import Memory

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        owned = memory is None or close_memory
        app.state.memory = (
            Memory(config or MemoryConfig.from_env(), **memory_options) if memory is None else memory
        )
        try:
            async with _mcp_session(app):
                yield
        finally:
            if owned:
                app.state.memory.close()

    app = FastAPI(
        title="dspy-memory",
        version="1",
        lifespan=lifespan,
        description=API_DESCRIPTION,
        generate_unique_id_function=lambda route: route.name,  # operationIds: add_memories, search, ...
    )
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(AuditContextMiddleware)  # added last, so it runs first: errors get its request id
    app.state.insecure = insecure
    app.state.limiter = RateLimiter(rate_per_second, burst)
    app.state.memory = memory

    @app.exception_handler(DSPyMemoryError)
    async def _memory_error(request: Request, exc: DSPyMemoryError) -> Any:
        return memory_error_response(exc)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> Any:
        return error_response(exc.status, exc.code, exc.message)

    install_error_handlers(app)
    add_routes(app)
    add_retention_routes(app)
    app.include_router(inspector_router())
    app.mount("/mcp", _forward_to_mcp)
    return app


@contextlib.asynccontextmanager
async def _mcp_session(app: FastAPI) -> Any:
    """The agent tools over MCP at /mcp/ (streamable HTTP), each call bound to the scope of the
    API key its request carries (server/mcp.py); its session manager lives as long as the app."""
    from mcp.server.transport_security import TransportSecuritySettings

    from dspy_memory.server.mcp import build_keyed_mcp_server

    server = build_keyed_mcp_server(app.state.memory)
    # Host checks guard unauthenticated local servers from DNS rebinding; every call here
    # needs an API key, and the service may sit behind any host name.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app.state.mcp_app = server.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, transport_security=security
    )
    async with server.session_manager.run():
        yield


async def _forward_to_mcp(scope: Any, receive: Any, send: Any) -> None:
    """Every MCP request needs an API key, as every /v1 route does (the tools then act in the
    key's scope); without one it is refused before the MCP server sees it."""
    if scope["type"] == "http":
        try:
            await anyio.to_thread.run_sync(caller_of, Request(scope))
        except ServiceError as exc:
            await error_response(exc.status, exc.code, exc.message)(scope, receive, send)
            return
    await scope["app"].state.mcp_app(scope, receive, send)


@contextlib.contextmanager
def running(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `app` with uvicorn in a thread (tests, benchmarks); yields its base URL."""
    import socket
    import threading

    import uvicorn

    sock = socket.socket()
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server did not start")
            thread.join(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
