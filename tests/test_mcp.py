"""The MCP server (dspy_memory/server/mcp.py) through the official SDK's own client: in process
(JSON-RPC framing over memory streams, as a stdio client speaks it), over stdio with run_mcp in
a subprocess, and over streamable HTTP on a random local port. Offline: hash embedder, no LM
(raw mode), so remember stores the sentence as it was given."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="needs the MCP SDK 2.x (the server extra)")

from mcp import Client, StdioServerParameters  # noqa: E402

from dspy_memory import Memory  # noqa: E402
from dspy_memory.agent.tools import DEFAULT_TOOL_NAMES, TOOL_NAMES  # noqa: E402
from dspy_memory.embed import HashEmbedder  # noqa: E402
from dspy_memory.errors import ScopeError  # noqa: E402
from dspy_memory.server.mcp import build_mcp_server, mcp_scope, run_mcp  # noqa: E402


def connect(server):
    return Client(server, mode="legacy", read_timeout_seconds=20)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def test_the_tool_list_is_memory_tools_with_descriptions_and_parameter_schemas(memory):
    expected = {tool.name: tool for tool in memory.tools(user_id="ada")}

    async def main():
        async with connect(build_mcp_server(memory, {"user_id": "ada"})) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(main)}
    # forget (a hard delete) is not published unless the server is started with allow_forget,
    # memory_feedback unless with allow_feedback.
    opt_in = ("forget", "memory_feedback")
    assert (
        list(tools)
        == list(expected)
        == list(DEFAULT_TOOL_NAMES)
        == [n for n in TOOL_NAMES if n not in opt_in]
    )
    for name, tool in tools.items():
        assert tool.description and tool.description.split()[0] in expected[name].desc
        assert set(tool.input_schema["properties"]) == set(expected[name].args)
        for argument, schema in tool.input_schema["properties"].items():
            assert schema["description"] == expected[name].arg_desc[argument]
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].input_schema["properties"]["k"]["type"] == "integer"
    assert tools["recall"].annotations.read_only_hint is True
    assert not any(tool.annotations.destructive_hint for tool in tools.values())

    async def with_forget():
        async with connect(build_mcp_server(memory, {"user_id": "ada"}, allow_forget=True)) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    opted_in = anyio.run(with_forget)
    assert list(opted_in) == [name for name in TOOL_NAMES if name != "memory_feedback"]
    assert opted_in["forget"].annotations.destructive_hint is True


def test_memory_feedback_is_published_only_with_allow_feedback(memory):
    async def tools(**options):
        async with connect(build_mcp_server(memory, {"user_id": "ada"}, **options)) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    assert "memory_feedback" not in anyio.run(tools)
    published = anyio.run(lambda: tools(allow_feedback=True))
    assert "memory_feedback" in published and "forget" not in published
    assert set(published["memory_feedback"].input_schema["required"]) == {"memory_id", "verdict"}
    assert not published["memory_feedback"].annotations.destructive_hint


def test_allow_publishes_only_the_chosen_tools(memory):
    async def main():
        server = build_mcp_server(memory, {"user_id": "ada"}, allow=["recall", "remember"])
        async with connect(server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            refused = await client.call_tool("forget", {"memory_id": "12345678"})
            return names, refused

    names, refused = anyio.run(main)
    assert names == ["recall", "remember"]
    assert refused.is_error


def test_remember_then_recall_round_trip(memory):
    async def main():
        async with connect(build_mcp_server(memory, {"user_id": "ada"})) as client:
            saved = await client.call_tool("remember", {"content": "Ada moved to Denver in March 2024."})
            found = await client.call_tool("recall", {"query": "where does Ada live?", "k": 3})
            return saved, found

    saved, found = anyio.run(main)
    assert not saved.is_error and "Ada moved to Denver in March 2024." in text(saved)
    assert not found.is_error and "Ada moved to Denver in March 2024." in text(found)
    # The same file seen through the Python API: written in ada's scope, nowhere else.
    assert [hit.memory.content for hit in memory.search("Denver", user_id="ada")] == [
        "Ada moved to Denver in March 2024."
    ]


def test_two_servers_over_one_file_keep_their_users_apart(db_path):
    secret = "Ada's locker code is 4711."

    async def main(memory):
        async with connect(build_mcp_server(memory, {"user_id": "a"})) as a:
            await a.call_tool("remember", {"content": secret})
            shown = text(await a.call_tool("recall", {"query": "locker code"}))
        short_id = shown.split("[", 1)[1].split("]", 1)[0]
        async with connect(build_mcp_server(memory, {"user_id": "b"}, allow_forget=True)) as b:
            recalled = await b.call_tool("recall", {"query": "locker code 4711 Ada"})
            forgot = await b.call_tool("forget", {"memory_id": short_id})
            history = await b.call_tool("memory_history", {"memory_id": short_id})
        return recalled, forgot, history

    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        recalled, forgot, history = anyio.run(main, memory)
        assert "4711" not in text(recalled)
        assert forgot.is_error and "no memory" in text(forgot)
        assert history.is_error and "4711" not in text(history)
        assert [hit.memory.content for hit in memory.search("locker", user_id="a")] == [secret]


def test_a_tool_error_is_its_error_line_and_the_session_goes_on(memory):
    async def main():
        async with connect(build_mcp_server(memory, {"user_id": "ada"})) as client:
            unknown = await client.call_tool(
                "revise", {"memory_id": "deadbeef", "content": "x", "reason": "y"}
            )
            missing = await client.call_tool("recall", {})  # the SDK checks arguments against the schema
            after = await client.call_tool("remember", {"content": "Ada likes tea."})
            return unknown, missing, after

    unknown, missing, after = anyio.run(main)
    assert unknown.is_error and text(unknown) == "error: no memory 'deadbeef' here; use recall to find ids"
    assert missing.is_error and "query" in text(missing)
    assert not after.is_error and "Ada likes tea." in text(after)


def test_the_scope_comes_from_arguments_else_the_environment_never_both(monkeypatch, tmp_path):
    environ = {"DSPY_MEMORY_MCP_USER_ID": "ada", "DSPY_MEMORY_MCP_RUN_ID": "r1"}
    assert mcp_scope(environ=environ).model_dump() == {"user_id": "ada", "agent_id": None, "run_id": "r1"}
    assert mcp_scope(agent_id="bot", environ=environ).model_dump() == {
        "user_id": None,
        "agent_id": "bot",
        "run_id": None,
    }
    for key in ("USER_ID", "AGENT_ID", "RUN_ID"):
        monkeypatch.delenv(f"DSPY_MEMORY_MCP_{key}", raising=False)
    path = tmp_path / "never.db"
    with pytest.raises(ScopeError, match="pass --user-id .*DSPY_MEMORY_MCP_USER_ID"):
        run_mcp(str(path), embedder="test")
    with pytest.raises(ScopeError, match="pass --user-id"):
        mcp_scope(environ={"DSPY_MEMORY_MCP_USER_ID": ""})
    assert not path.exists()  # refused before a file was made


def test_dspy_memory_mcp_over_stdio_in_a_subprocess(db_path):
    """What an MCP client config runs: `dspy-memory mcp` serving stdio, its scope from the env."""
    args = [
        "-m",
        "dspy_memory.cli",
        "mcp",
        "--db",
        str(db_path),
        "--embedder",
        "test",
        "--allow",
        "recall,remember",
    ]
    env = {**os.environ, "DSPY_MEMORY_MCP_USER_ID": "ada"}
    params = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def main():
        with anyio.fail_after(60):
            async with connect(params) as client:
                await client.call_tool("remember", {"content": "Ada's cat is called Miso."})
                return await client.call_tool("recall", {"query": "Ada's cat"})

    assert "Miso" in text(anyio.run(main))
    with Memory(db_path, embedder="test") as memory:  # closed by the server, readable here
        assert [hit.memory.content for hit in memory.search("cat", user_id="ada")] == [
            "Ada's cat is called Miso."
        ]


def test_streamable_http_on_a_local_port(memory):
    import uvicorn

    app = build_mcp_server(memory, {"user_id": "ada"}).streamable_http_app()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)

        async def main():
            with anyio.fail_after(20):
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    names = [tool.name for tool in (await client.list_tools()).tools]
                    await client.call_tool("remember", {"content": "Ada prefers window seats."})
                    return names, await client.call_tool("recall", {"query": "seats"})

        names, found = anyio.run(main)
        assert names == list(DEFAULT_TOOL_NAMES)
        assert "Ada prefers window seats." in text(found)
    finally:
        server.should_exit = True
        thread.join(10)
