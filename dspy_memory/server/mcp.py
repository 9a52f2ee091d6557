"""The agent memory tools over MCP (docs/server.md): `dspy-memory mcp`, stdio or streamable HTTP.

The tools are exactly the ones `memory.tools()` makes (agent/tools.py): same names, docstrings,
typed parameters and "error: ..." answers; this module only publishes them. They are bound to
one scope chosen by whoever starts the server (arguments, else DSPY_MEMORY_MCP_* variables),
never by the model or the client. As in Python, the default tools cannot destroy data; `forget`
is published only with allow_forget=True (`dspy-memory mcp --allow-forget`), `memory_feedback`
only with allow_feedback=True (`--allow-feedback`). `build_mcp_server` takes the scope as a
parameter so an HTTP mount behind an API key can pass the key's scope instead.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dspy_memory.agent.tool_answers import argument_error, clip
from dspy_memory.agent.tools import DESTRUCTIVE_TOOLS, chosen_tools
from dspy_memory.errors import InvalidInputError, ScopeError
from dspy_memory.memory import Memory
from dspy_memory.types import Scope

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from dspy_memory.config import MemoryConfig
    from dspy_memory.tool_settings import ToolSettings

ENV_PREFIX = "DSPY_MEMORY_MCP_"
SCOPE_KEYS = ("user_id", "agent_id", "run_id")
TRANSPORTS = ("stdio", "streamable-http")
# Hints an MCP client may use (e.g. to ask the user before a destructive call); they change
# nothing about what a tool does. revise and core_memory_replace keep the old version.
READ_ONLY = frozenset({"recall", "memory_history"})
DESTRUCTIVE = DESTRUCTIVE_TOOLS
INSTRUCTIONS = (
    "Long-term memory of one user or agent. Call recall before answering questions about the "
    "user or past events; remember lasting facts as self-contained sentences with absolute dates."
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
log = logging.getLogger(__name__)


def _needs_mcp() -> Any:
    try:
        from mcp.server import mcpserver
    except ImportError as exc:  # mcp 1.x has no mcpserver (FastMCP was renamed in 2.0)
        raise ImportError(
            'the MCP server needs the official MCP SDK 2.x: pip install "dspy-memory[server]"'
        ) from exc
    return mcpserver


def _published(tool: Any, scoped: Callable[[Any], Any] | None = None) -> Callable[..., Any]:
    """The tool's own function (agent/tools.py: errors already one line, answers bounded), with
    its signature, whose annotations carry each argument's description and bounds: the MCP input
    schema is built from the same declarations as DSPy's. `scoped(ctx)`, when given, picks the
    function per request: the same tool bound to the scope of the API key the request carries
    (or an "error: ..." line)."""
    from mcp.server.mcpserver import Context
    from mcp.types import CallToolResult, TextContent

    signature = inspect.signature(tool.func)
    parameters = list(signature.parameters.values())

    def call(ctx: Context | None = None, **arguments: Any) -> Any:
        bound = tool if scoped is None else scoped(ctx)
        answer = bound if isinstance(bound, str) else bound.func(**arguments)
        if answer.startswith("error: "):
            # The same line the agent would read, flagged as a failed call for MCP clients.
            return CallToolResult(content=[TextContent(type="text", text=answer)], is_error=True)
        return answer

    call.__name__ = tool.name
    call.__doc__ = inspect.cleandoc(tool.desc)
    if scoped is not None:  # the SDK passes the request context to a parameter typed Context
        context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
        parameters.append(context)
        call.__annotations__ = {"ctx": Context}
    else:
        call.__annotations__ = {}
    call.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]  # inspect reads it; functions have no such declared attribute
    return call


@functools.cache
def _server_class() -> Any:
    _needs_mcp()
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent
    from pydantic import ValidationError

    class MemoryMCPServer(MCPServer):
        """An MCPServer whose tools answer arguments that fail their input schema with the one
        "error: ..." line every other failure gets (the SDK's own is pydantic's, several lines)."""

        def __init__(self, settings: ToolSettings, **options: Any) -> None:
            super().__init__(**options)
            self.tool_settings = settings

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                line = clip(argument_error(exc.__cause__), self.tool_settings.max_item_chars)
                return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)

    return MemoryMCPServer


def _server(memory: Memory, name: str) -> MCPServer:
    return _server_class()(memory.config.tools, name=name, instructions=INSTRUCTIONS)


def build_mcp_server(
    memory: Memory,
    scope: Scope | Mapping[str, str | None],
    *,
    allow: Iterable[str] | None = None,
    allow_forget: bool = False,
    allow_feedback: bool = False,
    name: str = "dspy-memory",
) -> MCPServer:
    """An MCP server (mcp's `MCPServer`, formerly FastMCP) publishing `memory.tools(**scope,
    allow=allow, allow_forget=allow_forget, allow_feedback=allow_feedback)`: recall, remember,
    revise, memory_history, core_memory_append, core_memory_replace by default (none destroys
    data); `allow` picks some; forget, which deletes for good, only with allow_forget=True;
    memory_feedback only with allow_feedback=True."""
    _needs_mcp()
    from mcp.types import ToolAnnotations

    given = scope.model_dump() if isinstance(scope, Scope) else dict(scope)
    ids = {key: value for key, value in given.items() if value is not None}
    server = _server(memory, name)
    for tool in memory.tools(allow=allow, allow_forget=allow_forget, allow_feedback=allow_feedback, **ids):
        hints = ToolAnnotations(
            read_only_hint=tool.name in READ_ONLY, destructive_hint=tool.name in DESTRUCTIVE
        )
        # Plain text results, as the tools return to a DSPy agent (no structured-output wrapper).
        server.add_tool(_published(tool), name=tool.name, annotations=hints, structured_output=False)
    return server


def build_keyed_mcp_server(
    memory: Memory,
    *,
    allow: Iterable[str] | None = None,
    allow_forget: bool = False,
    name: str = "dspy-memory",
) -> MCPServer:
    """An MCP server for the memory service's `/mcp/` (streamable HTTP): the same tools, each
    call bound to the scope of the API key its HTTP request carries (`Authorization: Bearer` or
    `X-API-Key`), as every REST route is; a call without a valid tenant key gets an error line."""
    _needs_mcp()
    from mcp.types import ToolAnnotations

    bound: dict[Scope, dict[str, Any]] = {}

    def scoped_tool(tool_name: str) -> Callable[[Any], Any]:
        def pick(ctx: Any) -> Any:
            headers = {key.lower(): value for key, value in ((ctx.headers if ctx else None) or {}).items()}
            token = (
                headers.get("authorization", "")[7:].strip()
                if headers.get("authorization", "").lower().startswith("bearer ")
                else headers.get("x-api-key")
            )
            key = memory.keys.verify(token) if token else None
            if key is None:
                return "error: an API key is required (Authorization: Bearer <key>)"
            if key.scope is None:
                return "error: an admin key has no scope of its own; the tools need a tenant's key"
            if key.scope not in bound:
                bound[key.scope] = {
                    tool.name: tool
                    for tool in memory.tools(
                        allow=allow, allow_forget=allow_forget, **key.scope.model_dump(exclude_none=True)
                    )
                }
            return bound[key.scope][tool_name]

        return pick

    server = _server(memory, name)
    # The tools' names, descriptions and parameters are the same in every scope.
    for tool in memory.tools(allow=allow, allow_forget=allow_forget, user_id="schema"):
        hints = ToolAnnotations(
            read_only_hint=tool.name in READ_ONLY, destructive_hint=tool.name in DESTRUCTIVE
        )
        server.add_tool(
            _published(tool, scoped_tool(tool.name)),
            name=tool.name,
            annotations=hints,
            structured_output=False,
        )
    return server


def mcp_scope(
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Scope:
    """The scope the server binds: the arguments if any is given, else DSPY_MEMORY_MCP_USER_ID,
    _AGENT_ID, _RUN_ID. All or nothing, never mixed: an id from a forgotten variable must not
    narrow or shift the scope someone typed."""
    given = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    if all(value is None for value in given.values()):
        environ = os.environ if environ is None else environ
        given = {key: environ.get(ENV_PREFIX + key.upper()) or None for key in SCOPE_KEYS}
    if all(value is None for value in given.values()):
        raise ScopeError(
            "the MCP server binds its tools to one scope and none was given: pass --user-id "
            "(and/or --agent-id, --run-id; user_id= in Python), or set "
            f"{ENV_PREFIX}USER_ID ({ENV_PREFIX}AGENT_ID, {ENV_PREFIX}RUN_ID)"
        )
    return Scope.of(given["user_id"], given["agent_id"], given["run_id"])


def run_mcp(
    config_or_path: str | os.PathLike[str] | MemoryConfig,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    allow: Iterable[str] | None = None,
    allow_forget: bool = False,
    allow_feedback: bool = False,
    embedder: Any = None,
    lm: Any = None,
) -> None:
    """Open the memory file, serve its tools over `transport` until stopped, close the file.
    Streamable HTTP listens on http://{host}:{port}/mcp."""
    if transport not in TRANSPORTS:
        raise InvalidInputError(f"transport must be one of {list(TRANSPORTS)}, not {transport!r:.40}")
    scope = mcp_scope(user_id, agent_id, run_id)  # before opening: no file is created for nothing
    chosen_tools(allow, allow_forget, allow_feedback)  # a refused tool list too
    _needs_mcp()
    if transport == "streamable-http" and host not in _LOOPBACK:
        # The scope is fixed and there is no key check yet: whoever reaches the port is that user.
        who = scope.model_dump(exclude_none=True)
        log.warning(
            "MCP over HTTP on %s: anyone who can reach it reads and writes the memory of %s", host, who
        )
    with Memory(config_or_path, embedder=embedder, lm=lm) as memory:
        server = build_mcp_server(
            memory, scope, allow=allow, allow_forget=allow_forget, allow_feedback=allow_feedback
        )
        if transport == "stdio":
            server.run("stdio")  # stdout carries the protocol; logs go to stderr
        else:
            server.run("streamable-http", host=host, port=port)
