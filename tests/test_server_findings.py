"""One test per finding of the Schemathesis run against the service (issue 29): each failed on the
code before its fix. The whole contract is tests/test_server_contract.py; these name the cases."""

from __future__ import annotations

import json

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.errors import InvalidInputError, LMUnavailableError
from dspy_memory.server.app import create_app, running
from dspy_memory.types import Scope


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    memory = Memory(tmp_path_factory.mktemp("findings") / "m.db", embedder="test")
    admin = memory.store.keys.create(None, admin=True)[1]
    ada = memory.store.keys.create(Scope.of("ada"))[1]
    with running(create_app(memory=memory, rate_per_second=0)) as url:
        clients = {
            name: httpx.Client(base_url=url, headers=headers, timeout=30)
            for name, headers in (
                ("admin", {"X-API-Key": admin}),
                ("ada", {"X-API-Key": ada}),
                ("anonymous", {}),
            )
        }
        yield {"url": url, "memory": memory, **clients}
        for client in clients.values():
            client.close()
    memory.close()


def error_of(response: httpx.Response) -> dict:
    """The error body, after checking it has the one shape every error has."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, response.text
    assert response.headers["content-type"].startswith("application/json")
    return body["error"]


# -- limits --------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [9223372036854775808, -5, 0, 10_001])
def test_reprocess_refuses_a_limit_out_of_range(service, limit):
    response = service["admin"].post("/v1/reprocess", params={"limit": limit})
    assert response.status_code == 422 and error_of(response)["code"] == "invalid_request"


@pytest.mark.parametrize("limit", [2**63, 2**64, -5, 0])
def test_reprocess_in_python_refuses_a_limit_out_of_range(tmp_path, limit):
    with Memory(tmp_path / "m.db", embedder="test") as memory:
        with pytest.raises(InvalidInputError, match="limit must be an integer from 1"):
            memory.reprocess(limit=limit)


# -- one error shape -----------------------------------------------------------------------------


def test_malformed_json_is_400_in_the_error_shape(service):
    response = service["ada"].post(
        "/v1/search", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and error_of(response)["code"] == "malformed_body"


def test_a_body_that_is_not_utf8_is_400_in_the_error_shape(service):
    response = service["ada"].post(
        "/v1/search", content=b'{"query": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and error_of(response)["code"] == "malformed_body"


def test_a_schema_violation_is_422_invalid_request_naming_the_field(service):
    response = service["ada"].post("/v1/search", json={"query": "tea", "k": 0})
    error = error_of(response)
    assert response.status_code == 422 and error["code"] == "invalid_request" and "k" in error["message"]


def test_an_unknown_route_is_404_not_found(service):
    response = service["ada"].get("/v1/nothing-here")
    assert response.status_code == 404 and error_of(response)["code"] == "not_found"


def test_a_method_a_path_lacks_is_405_listing_every_method_it_has(service):
    response = service["ada"].put("/v1/memories")
    assert response.status_code == 405 and error_of(response)["code"] == "method_not_allowed"
    assert set(response.headers["allow"].split(", ")) == {"GET", "POST", "OPTIONS"}


def test_options_lists_every_method_of_the_path(service):
    response = service["ada"].options("/v1/memories")
    assert response.status_code == 204
    assert set(response.headers["allow"].split(", ")) == {"GET", "POST", "OPTIONS"}
    by_id = service["ada"].options("/v1/memories/00000000-0000-0000-0000-000000000000")
    assert set(by_id.headers["allow"].split(", ")) == {"GET", "PATCH", "DELETE", "OPTIONS"}


def test_an_unexpected_failure_is_500_internal_error_without_internals(service, monkeypatch, caplog):
    def broken(**_):
        raise RuntimeError("secret internals: /srv/db password=hunter2")

    monkeypatch.setattr(service["memory"], "stats", broken)
    with caplog.at_level("ERROR", logger="dspy_memory"):
        response = service["admin"].get("/v1/stats")
    error = error_of(response)
    assert response.status_code == 500 and error["code"] == "internal_error"
    assert "hunter2" not in response.text and "RuntimeError" not in response.text
    assert response.headers["x-request-id"] in error["message"]
    assert "hunter2" in caplog.text  # the traceback is in the log, for whoever runs the service


def test_a_missing_key_is_401_in_the_error_shape(service):
    response = service["anonymous"].get("/v1/memories")
    assert response.status_code == 401 and error_of(response)["code"] == "unauthorized"


# -- the document --------------------------------------------------------------------------------


def openapi(service) -> dict:
    return service["anonymous"].get("/openapi.json").json()


def test_the_document_names_the_api_key_schemes_and_every_keyed_route_needs_one(service):
    spec = openapi(service)
    schemes = spec["components"]["securitySchemes"]
    assert schemes["APIKeyHeader"] == {
        **schemes["APIKeyHeader"], "type": "apiKey", "in": "header", "name": "X-API-Key"
    }  # fmt: skip
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            keyed = path not in ("/healthz", "/readyz")
            assert bool(operation.get("security")) == keyed, (method, path)


def test_the_document_lists_each_routes_errors_with_the_error_body(service):
    spec = openapi(service)
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            errors = {status for status in operation["responses"] if status >= "400"}
            expected = {"401", "403", "422", "429", "500", "503"} if operation.get("security") else {"500"}
            assert expected <= errors, (method, path, errors)
            for status in errors:
                schema = operation["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)


def test_admin_routes_say_so_in_the_document(service):
    paths = openapi(service)["paths"]
    admin_only = {
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if operation.get("x-admin-only")
    }
    assert admin_only == {
        ("POST", "/v1/reprocess"), ("GET", "/v1/stats"),
        ("POST", "/v1/keys"), ("GET", "/v1/keys"), ("DELETE", "/v1/keys/{key_id}"),
    }  # fmt: skip
    assert "admin API key" in paths["/v1/stats"]["get"]["description"]


# -- the schema says what the code enforces ------------------------------------------------------


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/search", {"query": "tea", "user_id": ""}),
        ("/v1/search", {"query": "tea", "user_id": "   "}),
        ("/v1/search", {"query": "tea", "k": 1001}),
        ("/retrieve_memory", {"query": "tea", "top_k": 0}),
        ("/v1/search", {"query": "tea", "recipe": "psychic"}),
        ("/v1/context", {"query": "tea", "budget_tokens": 0}),
        ("/v1/search", {"query": "tea", "include_archived": 0}),
        ("/v1/maintain", {"dry_run": 0}),
        ("/v1/memories", {"messages": "  "}),
        ("/v1/memories", {"messages": "hi", "infer": 0}),
        ("/v1/search", {"query": "tea", "filters": {"a": {"$like": 1}}}),
        ("/v1/search", {"query": "tea", "filters": {"a": 2**63}}),
    ],
)
def test_what_the_code_refuses_the_schema_refuses_too(service, path, body):
    """Each of these was refused by the library with a schema-valid request (or, for the
    integers 0 and 1 as booleans, accepted); now the schema forbids them and pydantic says so."""
    response = service["ada"].post(path, json=body)
    assert response.status_code == 422 and error_of(response)["code"] == "invalid_request", response.text


def test_a_block_char_limit_out_of_range_is_refused_by_the_schema(service):
    response = service["ada"].put("/v1/blocks/persona", json={"value": "x", "char_limit": 0})
    assert response.status_code == 422 and error_of(response)["code"] == "invalid_request"


def test_entity_and_memory_id_exclude_each_other_in_the_document_and_the_code(service):
    focus = next(
        parameter
        for parameter in openapi(service)["paths"]["/v1/graph"]["get"]["parameters"]
        if parameter["name"] == "focus"
    )
    assert focus["schema"]["maxProperties"] == 1 and set(focus["schema"]["properties"]) == {
        "entity",
        "memory_id",
    }
    both = {"entity": "Ada", "memory_id": "00000000-0000-0000-0000-000000000000"}
    response = service["ada"].get("/v1/graph", params=both)
    assert response.status_code == 422 and error_of(response)["code"] == "invalid_request"
    assert service["ada"].get("/v1/graph", params={"entity": "Ada"}).status_code == 200


def test_an_admin_key_naming_no_scope_is_told_to_name_one(service):
    response = service["admin"].post("/v1/search", json={"query": "tea"})
    assert response.status_code == 403 and error_of(response)["code"] == "scope_required"


# -- LM message ----------------------------------------------------------------------------------


def test_an_lm_refusal_names_what_needed_the_lm():
    from dspy_memory.util.lm import lm_for

    with pytest.raises(LMUnavailableError, match=r"^answer\(\) needs an LM"):
        lm_for(None, True, purpose="answer()")
    with pytest.raises(
        LMUnavailableError, match=r"^add\(infer=True\) needs an LM.*infer=False stores raw turns"
    ):
        lm_for(None, True)


# -- MCP -----------------------------------------------------------------------------------------

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_mcp_needs_a_key_for_every_method(service, method):
    body = json.dumps(LIST_TOOLS) if method == "POST" else None
    response = service["anonymous"].request(method, "/mcp/", content=body, headers=MCP_HEADERS)
    assert response.status_code == 401 and error_of(response)["code"] == "unauthorized"
    forged = {**MCP_HEADERS, "x-api-key": "dm_000000000000_forged"}
    response = service["anonymous"].request(method, "/mcp/", content=body, headers=forged)
    assert response.status_code == 401


def test_mcp_lists_its_tools_to_a_valid_key(service):
    response = service["ada"].post("/mcp/", json=LIST_TOOLS, headers=MCP_HEADERS)
    assert response.status_code == 200 and response.json()["result"]["tools"]


# -- CLI -----------------------------------------------------------------------------------------


def test_keys_create_and_revoke_print_json_with_json(tmp_path, capsys):
    from dspy_memory.cli import main

    db = ["--db", str(tmp_path / "keys.db"), "--embedder", "test"]
    assert main(["keys", "create", "--user-id", "ada", "--name", "laptop", "--json", *db]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["key"].startswith("dm_") and created["name"] == "laptop" and created["user_id"] == "ada"
    assert created["admin"] is False and created["revoked_at"] is None
    assert main(["keys", "revoke", created["id"], "--json", *db]) == 0
    assert json.loads(capsys.readouterr().out) == {"status": "revoked", "id": created["id"]}
    assert main(["keys", "list", "--json", *db]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["id"] == created["id"] and listed["revoked_at"] and "key" not in listed


def test_the_schema_offers_exactly_the_librarys_recipes():
    from dspy_memory.read.retrieval import RECIPES
    from dspy_memory.types import RECIPE_NAMES

    assert tuple(RECIPES) == RECIPE_NAMES


def test_a_write_to_a_read_only_service_is_a_403_read_only_not_a_500(tmp_path):
    path = tmp_path / "m.db"
    Memory(path, embedder="test").close()  # the file and its schema exist
    with (
        Memory(path, embedder="test", read_only=True) as memory,
        running(create_app(memory=memory, rate_per_second=0, insecure=True)) as url,
    ):
        response = httpx.post(f"{url}/v1/memories", json={"messages": "hi", "user_id": "ada"}, timeout=30)
        assert response.status_code == 403, response.text
        assert error_of(response)["code"] == "read_only"
        assert (
            httpx.post(f"{url}/v1/search", json={"query": "hi", "user_id": "ada"}, timeout=30).status_code
            == 200
        )
