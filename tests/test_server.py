"""The memory service through a real uvicorn on 127.0.0.1 and httpx (docs/server.md): the seed
endpoints' exact shapes, every /v1 route, tenancy by API key on every route, revoked and hashed
keys, rate limits, insecure mode, errors as JSON with a stable code."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.server.app import create_app, running
from dspy_memory.types import Scope

from .leakscan import file_bytes, table_values


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("srv") / "m.db"
    memory = Memory(path, embedder=HashEmbedder(64))
    keys = {
        "admin": memory.store.keys.create(None, admin=True, name="ops")[1],
        "ada": memory.store.keys.create(Scope.of("ada"))[1],
        "bob": memory.store.keys.create(Scope.of("bob"))[1],
    }
    with running(create_app(memory=memory)) as url:
        clients = {
            name: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            for name, token in keys.items()
        }
        bob_memory = (
            clients["bob"].post("/store_memory", json={"content": "Bob's locker code is 4412."}).json()
        )
        ada_memory = clients["ada"].post("/store_memory", json={"content": "Ada likes green tea."}).json()
        yield {"url": url, "keys": keys, "clients": clients, "path": str(path), "memory": memory,
               "bob_id": bob_memory["memory_id"], "ada_id": ada_memory["memory_id"]}  # fmt: skip
        for client in clients.values():
            client.close()
    memory.close()


def test_the_seed_endpoints_have_the_seed_shapes(service):
    ada = service["clients"]["ada"]
    stored = ada.post(
        "/store_memory", json={"content": "Ada moved to Lisbon.", "metadata": {"user_id": "ada"}}
    )
    assert stored.status_code == 200 and set(stored.json()) == {"memory_id", "status"}
    assert stored.json()["status"] == "stored"
    found = ada.post("/retrieve_memory", json={"query": "Lisbon", "top_k": 3, "metadata": {"user_id": "ada"}})
    assert found.status_code == 200 and set(found.json()) == {"memories"}
    first = found.json()["memories"][0]
    assert set(first) == {"memory_id", "content", "timestamp", "score"}
    assert first["memory_id"] == stored.json()["memory_id"] and first["content"] == "Ada moved to Lisbon."
    forgotten = ada.post("/forget_memory", json={"memory_id": first["memory_id"]})
    assert forgotten.json() == {"status": "deleted", "memory_id": first["memory_id"]}
    again = ada.post("/retrieve_memory", json={"query": "Lisbon", "top_k": 3, "metadata": {"user_id": "ada"}})
    assert all(hit["memory_id"] != first["memory_id"] for hit in again.json()["memories"])


def routes(ada_id: str, bob_id: str) -> dict[str, tuple[str, str, dict]]:
    """Every /v1 route as ada may call it (name: method, path, request options)."""
    return {
        "add": ("POST", "/v1/memories", {"json": {"messages": "Ada runs on Sundays.", "infer": False}}),
        "add_expiring": (
            "POST",
            "/v1/memories",
            {"json": {"messages": "Ada's parcel code is 7730.", "infer": False, "expires_in": "1d"}},
        ),
        "list": ("GET", "/v1/memories", {}),
        "get": ("GET", f"/v1/memories/{ada_id}", {}),
        "history": ("GET", f"/v1/memories/{ada_id}/history", {}),
        "update": (
            "PATCH",
            f"/v1/memories/{ada_id}",
            {"json": {"content": "Ada likes green and white tea."}},
        ),
        "pin": ("POST", f"/v1/memories/{ada_id}/pin", {"json": {}}),
        "restore": ("POST", f"/v1/memories/{ada_id}/restore", {"json": {}}),
        "search": ("POST", "/v1/search", {"json": {"query": "tea", "recipe": "keyword"}}),
        "timeline": ("GET", "/v1/timeline", {"params": {"subject": "Ada"}}),
        "graph": ("GET", "/v1/graph", {}),
        "context": ("POST", "/v1/context", {"json": {"query": "tea"}}),
        "answer": ("POST", "/v1/answer", {"json": {"question": "what tea?"}}),
        "blocks": ("GET", "/v1/blocks", {}),
        "set_block": ("PUT", "/v1/blocks/persona", {"json": {"value": "Ada's helper."}}),
        "profile": ("GET", "/v1/profile", {}),
        "maintain": ("POST", "/v1/maintain", {"json": {"dry_run": True}}),
        "retention": ("GET", "/v1/retention", {}),
        "set_retention": ("PUT", "/v1/retention", {"json": {"erase_runs_after": "30d"}}),
        "feedback": ("POST", "/v1/feedback", {"json": {"memory_id": ada_id, "verdict": "useful"}}),
        "list_feedback": ("GET", "/v1/feedback", {"params": {"source": "verdict"}}),
        "delete": ("DELETE", f"/v1/memories/{ada_id}", {}),
        "delete_scope": ("DELETE", "/v1/scope", {"params": {"run_id": "scratch"}}),
    }


def test_every_v1_route_works_for_its_tenant(service):
    ada = service["clients"]["ada"]
    own = ada.post("/store_memory", json={"content": "Ada drinks oolong."}).json()["memory_id"]
    for name, (method, path, options) in routes(own, service["bob_id"]).items():
        response = ada.request(method, path, **options)
        if name == "answer":  # this service has no LM: a clear 503, after the scope was checked
            assert response.status_code == 503 and response.json()["error"]["code"] == "lm_unavailable"
            continue
        assert response.status_code in (200, 201), (name, response.text)


def _naming_bob(options: dict) -> dict:
    """The same request naming bob's scope where a request can name one."""
    if "json" in options:
        return {**options, "json": {**options["json"], "user_id": "bob"}}
    return {**options, "params": {**options.get("params", {}), "user_id": "bob"}}


@pytest.mark.parametrize("route", sorted(routes("x", "y")))
def test_a_key_for_ada_never_reaches_bob(service, route):
    ada = service["clients"]["ada"]
    own = ada.post("/store_memory", json={"content": "Ada's spare key is under the mat."}).json()["memory_id"]
    method, path, options = routes(own, service["bob_id"])[route]
    named = ada.request(method, path, **_naming_bob(options))
    assert named.status_code == 403 and named.json()["error"]["code"] == "scope_denied", named.text
    if own in path:  # the route with bob's memory id instead of ada's, naming no scope
        by_id = ada.request(method, path.replace(own, service["bob_id"]), **options)
        if route == "history":  # an id without events in ada's scope has an empty history
            assert by_id.json() == [], by_id.text
        else:
            assert by_id.status_code == 404 and by_id.json()["error"]["code"] == "memory_not_found", (
                by_id.text
            )
    bob = service["clients"]["bob"].post("/retrieve_memory", json={"query": "locker code", "top_k": 5})
    assert [hit["content"] for hit in bob.json()["memories"]] == ["Bob's locker code is 4412."]


@pytest.mark.parametrize("endpoint", ["/store_memory", "/retrieve_memory", "/forget_memory"])
def test_the_seed_endpoints_refuse_another_tenant(service, endpoint):
    body = {
        "/store_memory": {"content": "x", "metadata": {"user_id": "bob"}},
        "/retrieve_memory": {"query": "locker", "metadata": {"user_id": "bob"}},
        "/forget_memory": {"memory_id": service["bob_id"], "metadata": {"user_id": "bob"}},
    }[endpoint]
    response = service["clients"]["ada"].post(endpoint, json=body)
    assert response.status_code == 403 and response.json()["error"]["code"] == "scope_denied"
    if endpoint == "/forget_memory":  # naming no scope: bob's id is not found among ada's
        response = service["clients"]["ada"].post(endpoint, json={"memory_id": service["bob_id"]})
        assert response.status_code == 404


def test_feedback_is_given_and_read_in_the_keys_scope_only(service):
    ada, bob = service["clients"]["ada"], service["clients"]["bob"]
    own = ada.post("/store_memory", json={"content": "Ada's bike is red."}).json()["memory_id"]
    given = ada.post("/v1/feedback", json={"memory_id": own, "verdict": "wrong", "note": "it is blue"})
    assert given.status_code == 201, given.text
    record = given.json()
    assert (record["source"], record["verdict"], record["note"], record["user_id"]) == (
        "verdict", "wrong", "it is blue", "ada",
    )  # fmt: skip
    listed = ada.get("/v1/feedback", params={"memory_id": own}).json()
    assert [item["id"] for item in listed] == [record["id"]]
    # Bob's key reaches neither ada's memory nor her feedback; ada's key not bob's memory.
    assert bob.get("/v1/feedback", params={"memory_id": own}).json() == []
    denied = bob.post("/v1/feedback", json={"memory_id": own, "verdict": "useful"})
    assert denied.status_code == 404 and denied.json()["error"]["code"] == "memory_not_found"
    denied = ada.post("/v1/feedback", json={"memory_id": service["bob_id"], "verdict": "wrong"})
    assert denied.status_code == 404
    bad = ada.post("/v1/feedback", json={"memory_id": own, "verdict": "meh"})
    assert bad.status_code == 422 and "wrong" in bad.json()["error"]["message"]


def test_admin_routes_need_an_admin_key(service):
    ada, admin = service["clients"]["ada"], service["clients"]["admin"]
    for method, path in (("GET", "/v1/stats"), ("GET", "/v1/keys"), ("POST", "/v1/reprocess")):
        assert ada.request(method, path).json()["error"]["code"] == "admin_required"
        assert admin.request(method, path).status_code == 200
    assert (
        admin.post("/v1/search", json={"query": "locker", "user_id": "bob"}).json()[0]["memory"]["user_id"]
        == "bob"
    )
    assert "maintenance" in admin.get("/v1/stats").json()


def test_keys_are_revoked_and_stored_only_as_hashes(service):
    admin = service["clients"]["admin"]
    created = admin.post("/v1/keys", json={"user_id": "cy", "name": "cy"}).json()
    token = created["key"]
    with httpx.Client(base_url=service["url"], headers={"X-API-Key": token}) as cy:
        assert cy.post("/store_memory", json={"content": "Cy sings."}).status_code == 200
        assert admin.delete(f"/v1/keys/{created['id']}").json() == {"status": "revoked", "id": created["id"]}
        refused = cy.post("/retrieve_memory", json={"query": "sings"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    secrets = [*service["keys"].values(), token]
    stored = b"".join(file_bytes(service["path"]).values())
    stored += b"".join(str(value).encode() for _, value in table_values(service["path"]))
    assert not [t for t in secrets if t.encode() in stored or t.split("_", 2)[2].encode() in stored]


def test_requests_without_a_valid_key_are_refused(service):
    with httpx.Client(base_url=service["url"]) as anonymous:
        response = anonymous.post("/retrieve_memory", json={"query": "tea", "metadata": {"user_id": "ada"}})
        assert response.status_code == 401
        forged = anonymous.get("/v1/memories", headers={"Authorization": "Bearer dm_000000000000_nope"})
        assert forged.status_code == 401
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        assert anonymous.get("/readyz").json() == {"status": "ready"}
        assert anonymous.get("/openapi.json").status_code == 200


def test_errors_are_json_with_a_stable_code(service):
    ada = service["clients"]["ada"]
    missing = ada.get("/v1/memories/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "memory_not_found"
    bad = ada.post("/v1/search", json={"query": "tea", "recipe": "psychic"})  # the schema's enum
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    # What only the library can check is its error, in the same shape.
    bad = ada.post("/v1/search", json={"query": "tea", "as_of": "0001-01-01"})
    assert bad.status_code == 200, bad.text
    bad = ada.get("/v1/memories/01234567", params={"user_id": "ada"})
    assert bad.status_code == 404 and bad.json()["error"]["code"] == "memory_not_found"
    assert ada.post("/v1/answer", json={"question": "what tea?"}).json()["error"]["code"] == "lm_unavailable"


def test_a_key_over_its_rate_is_told_to_slow_down(tmp_path):
    with Memory(tmp_path / "m.db", embedder="test") as memory:
        _, token = memory.store.keys.create(Scope.of("ada"))
        app = create_app(memory=memory, rate_per_second=0.5, burst=2)
        with running(app) as url, httpx.Client(base_url=url, headers={"X-API-Key": token}) as ada:
            codes = [ada.get("/v1/memories").status_code for _ in range(4)]
        assert codes[:2] == [200, 200] and codes[2:] == [429, 429]


def test_insecure_mode_without_keys_lets_requests_name_their_scope(tmp_path):
    with Memory(tmp_path / "m.db", embedder="test") as memory:
        with running(create_app(memory=memory, insecure=True)) as url, httpx.Client(base_url=url) as client:
            stored = client.post(
                "/store_memory", json={"content": "Dee paints.", "metadata": {"user_id": "dee"}}
            )
            assert stored.status_code == 200
            unnamed = client.post("/store_memory", json={"content": "no scope"})
            assert unnamed.status_code == 422 and unnamed.json()["error"]["code"] == "scope"
            memory.store.keys.create(Scope.of("dee"))  # once a key exists, keys are required
            assert client.get("/v1/memories", params={"user_id": "dee"}).status_code == 401


def test_the_app_opens_and_closes_its_own_memory(tmp_path):
    path = Path(tmp_path / "own.db")
    app = create_app(str(path), insecure=True, embedder="test")
    with running(app) as url, httpx.Client(base_url=url) as client:
        assert (
            client.post("/v1/memories", json={"messages": "hi", "user_id": "u", "infer": False}).status_code
            == 200
        )
    assert app.state.memory.store.closed


def test_scheduled_maintenance_reports_are_in_stats(tmp_path):
    import time

    with Memory(tmp_path / "m.db", embedder="test", maintenance_every=0.05) as memory:
        _, token = memory.store.keys.create(None, admin=True)
        memory.add("Eve keeps bees.", user_id="eve", infer=False)
        with (
            running(create_app(memory=memory)) as url,
            httpx.Client(base_url=url, headers={"X-API-Key": token}) as admin,
        ):
            deadline = time.monotonic() + 10
            while not admin.get("/v1/stats").json()["maintenance"] and time.monotonic() < deadline:
                time.sleep(0.05)
            report = admin.get("/v1/stats").json()["maintenance"][-1]
    assert report["scopes"] == 1 and report["examined"] == 1 and report["archived"] == 0


def test_serve_takes_every_setting_from_config_and_environment(tmp_path, monkeypatch):
    """`dspy-memory serve` switches providers and tunables by configuration (TOML or env)."""
    from dspy_memory.cli.parser import build_parser
    from dspy_memory.cli.service import service_memory

    toml = tmp_path / "memory.toml"
    toml.write_text(
        'embedder = "test"\nlm = "openai/gpt-4o-mini"\n[retrieval]\nrrf_k = 20.0\n[lifecycle]\nbase_days = 60.0\n'
    )
    db = str(tmp_path / "svc.db")
    args = build_parser().parse_args(
        ["serve", "--db", db, "--config", str(toml), "--maintenance-every", "12h"]
    )
    monkeypatch.delenv("DSPY_MEMORY_LM", raising=False)
    with service_memory(args) as memory:
        assert memory.embedder.name.startswith("test")
        assert (memory.config.retrieval.rrf_k, memory.config.lifecycle.base_days) == (20.0, 60.0)
        assert memory.config.maintenance_every == 12 * 3600 and memory.config.path == db
        assert memory._lm.model == "openai/gpt-4o-mini"
    monkeypatch.setenv("DSPY_MEMORY_RETRIEVAL__RRF_K", "7")
    monkeypatch.setenv("DSPY_MEMORY_EMBEDDER", "test")
    with service_memory(build_parser().parse_args(["serve", "--db", db])) as memory:
        assert memory.config.retrieval.rrf_k == 7.0


def test_the_agent_tools_over_mcp_take_their_scope_from_the_api_key(service):
    """/mcp/ publishes the same tools as `dspy-memory mcp`; each call reaches only the scope of
    the key its HTTP request carries, as every REST route does."""
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from dspy_memory.agent.tools import DEFAULT_TOOL_NAMES

    def as_client(token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = create_mcp_http_client(headers=headers)
        return Client(
            streamable_http_client(f"{service['url']}/mcp/", http_client=http), read_timeout_seconds=20
        )

    async def call(token, tool, arguments):
        with anyio.fail_after(20):
            async with as_client(token) as client:
                result = await client.call_tool(tool, arguments)
                return "\n".join(block.text for block in result.content), result.is_error

    async def names(token):
        async with as_client(token) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    keys = service["keys"]
    assert anyio.run(names, keys["ada"]) == list(DEFAULT_TOOL_NAMES)  # no forget over HTTP
    said, failed = anyio.run(call, keys["ada"], "remember", {"content": "Ada's locker code is 9981."})
    assert not failed and "9981" in said
    found, _ = anyio.run(call, keys["ada"], "recall", {"query": "locker code"})
    assert "9981" in found and "4412" not in found  # bob's locker stays bob's
    bob_found, _ = anyio.run(call, keys["bob"], "recall", {"query": "locker code"})
    assert "4412" in bob_found and "9981" not in bob_found
    # An admin key gets in (as on /v1) but has no scope for the tools: an error line.
    refused, failed = anyio.run(call, keys["admin"], "recall", {"query": "locker code"})
    assert failed and refused.startswith("error:") and "4412" not in refused and "9981" not in refused
    # Without a valid key the request never reaches the MCP server: the client's call fails
    # (HTTP 401, as on /v1: tests/test_server_findings.py).
    for token in (None, "dm_000000000000_forged"):
        with pytest.raises(Exception, match="unhandled errors"):
            anyio.run(call, token, "recall", {"query": "locker code"})
