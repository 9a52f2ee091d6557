"""Retention over the service (docs/server.md, docs/governance.md#retention): an add that expires
(`expires_at`, `expires_in`) shows its expiry on every record it made, no route returns it once
the library's clock passes it, and `/v1/maintain` erases it and says so (`erased`); a bad
expiry is a 422 that names the field and stores nothing; `GET`/`PUT /v1/retention` read and
replace a scope's policy within the key's scope. A real uvicorn on 127.0.0.1 and httpx, as
tests/test_server.py; the clock is the library's (set_clock), which the server's threads share."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.server.app import create_app, running
from dspy_memory.types import Scope

from .clock import START, clock_fixture  # noqa: F401 - the `clock` fixture


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    memory = Memory(tmp_path_factory.mktemp("retention") / "m.db", embedder="test")
    with running(create_app(memory=memory, rate_per_second=0)) as url:
        opened: list[httpx.Client] = []

        def client(user_id: str | None = None, *, agent_id: str | None = None, admin: bool = False):
            """A client with a new key: bound to the scope given, or an admin key."""
            scope = None if admin else Scope.of(user_id, agent_id)
            token = memory.keys.create(scope, admin=admin)[1]
            opened.append(httpx.Client(base_url=url, headers={"X-API-Key": token}, timeout=30))
            return opened[-1]

        yield {"memory": memory, "client": client}
        for each in opened:
            each.close()
    memory.close()


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, response.text
    return body["error"]


def reads(client: httpx.Client, memory_id: str) -> dict[str, str]:
    """What each read route of the key's scope answers, as text."""
    return {
        "list": client.get("/v1/memories").text,
        "list archived too": client.get("/v1/memories", params={"include_archived": True}).text,
        "get": client.get(f"/v1/memories/{memory_id}").text,
        "search": client.post("/v1/search", json={"query": "gate code 4417"}).text,
        "keyword": client.post("/v1/search", json={"query": "gate code", "recipe": "keyword"}).text,
        "retrieve": client.post("/retrieve_memory", json={"query": "gate code 4417"}).text,
        "context": client.post("/v1/context", json={"query": "gate code"}).text,
    }


# -- adds that expire -------------------------------------------------------------------------


def test_an_add_that_expires_shows_when_and_no_route_returns_it_after(service, clock):
    dee = service["client"]("dee")
    added = dee.post(
        "/v1/memories", json={"messages": "The gate code is 4417.", "infer": False, "expires_in": "1h"}
    )
    assert added.status_code == 200, added.text
    [record] = added.json()["memories"]
    assert when(record["expires_at"]) == START + timedelta(hours=1)
    kept = dee.post("/v1/memories", json={"messages": "Dee waters the ferns.", "infer": False})
    assert kept.json()["memories"][0]["expires_at"] is None
    assert when(dee.get(f"/v1/memories/{record['id']}").json()["expires_at"]) == START + timedelta(hours=1)
    before = reads(dee, record["id"])
    assert all("4417" in answer for answer in before.values()), before

    clock.advance(hours=1)  # exactly at expires_at: gone
    after = reads(dee, record["id"])
    assert not [route for route, answer in after.items() if "4417" in answer], after
    assert error_of(dee.get(f"/v1/memories/{record['id']}"), 404)["code"] == "memory_not_found"
    assert "Dee waters the ferns." in after["list"]  # what does not expire stays

    report = dee.post("/v1/maintain", json={})
    assert report.status_code == 200, report.text
    assert report.json()["erased"]["memories"] == 1 and report.json()["erased"]["episodes"] == 1
    assert dee.post("/v1/maintain", json={}).json()["erased"] == {}  # nothing left to erase
    assert [item["content"] for item in dee.get("/v1/memories").json()] == ["Dee waters the ferns."]


def test_expires_at_takes_an_rfc_3339_time_with_its_offset(service, clock):
    eve = service["client"]("eve")
    added = eve.post(
        "/v1/memories",
        json={"messages": ["Eve's visitor pass is 88.", "It works at gate B."], "infer": False,
              "expires_at": "2026-03-02T12:30:00+02:00"},
    )  # fmt: skip
    assert added.status_code == 200, added.text
    assert {when(item["expires_at"]) for item in added.json()["memories"]} == {START + timedelta(hours=1.5)}
    clock.advance(hours=1, minutes=29)
    assert len(eve.get("/v1/memories").json()) == 2
    clock.advance(minutes=1)
    assert eve.get("/v1/memories").json() == []


BAD_EXPIRIES = [
    ({"expires_in": "soon"}, "invalid_request", "expires_in"),
    ({"expires_in": "24 h"}, "invalid_request", "expires_in"),
    ({"expires_in": "0h"}, "invalid_request", "expires_in"),
    ({"expires_in": "-1h"}, "invalid_request", "expires_in"),
    ({"expires_in": 0}, "invalid_request", "expires_in"),
    ({"expires_in": 0.5}, "invalid_request", "expires_in"),
    ({"expires_in": True}, "invalid_request", "expires_in"),
    ({"expires_in": 10**11}, "invalid_request", "expires_in"),
    ({"expires_in": "99999d"}, "invalid_request", "expires_in"),
    ({"expires_at": "tomorrow"}, "invalid_request", "expires_at"),
    ({"expires_at": "2026-03-02", "expires_in": "1h"}, "invalid_request", "not both"),
    ({"expires_at": None, "expires_in": "1h"}, "invalid_request", "not both"),
    # What the schema cannot judge, the clock does: the library's refusal, in the same shape.
    ({"expires_at": "2026-03-02T08:59:59Z"}, "invalid_input", "not in the future"),
    ({"expires_at": "2026-03-02T09:00:00Z"}, "invalid_input", "not in the future"),
]


@pytest.mark.parametrize(("expiry", "code", "named"), BAD_EXPIRIES, ids=[str(b[0]) for b in BAD_EXPIRIES])
def test_a_bad_expiry_is_a_422_that_says_why_and_stores_nothing(service, clock, expiry, code, named):
    fay = service["client"]("fay")
    episodes = service["memory"].stats()["tables"]["episodes"]
    response = fay.post("/v1/memories", json={"messages": "Fay's pin is 1234.", "infer": False, **expiry})
    error = error_of(response, 422)
    assert error["code"] == code and named in error["message"], error
    if code == "invalid_request" and named.startswith("expires"):
        assert "interval" in error["message"] or "RFC 3339" in error["message"], error
    assert service["memory"].get_all(user_id="fay") == []
    assert service["memory"].stats()["tables"]["episodes"] == episodes


def test_the_openapi_document_states_the_expiry_fields_and_the_policy_routes(service):
    document = service["client"]("gus").get("/openapi.json").json()
    add = document["components"]["schemas"]["AddRequest"]
    assert {"expires_at", "expires_in"} <= set(add["properties"])
    assert add["not"] == {"required": ["expires_at", "expires_in"]}
    interval = add["properties"]["expires_in"]["anyOf"][0]
    assert interval["anyOf"][0] == {"type": "number", "minimum": 1, "maximum": 10**10}
    assert interval["anyOf"][1]["pattern"] == "^[1-9][0-9]{0,3}(\\.[0-9]{1,9})?[smhdw]$"
    assert set(document["paths"]["/v1/retention"]) == {"get", "put"}
    assert "expires_at" in document["components"]["schemas"]["MemoryRecord"]["properties"]
    assert "erased" in document["components"]["schemas"]["MaintenanceReport"]["properties"]


# -- retention policies -------------------------------------------------------------------------

NO_POLICY = {"erase_after": None, "erase_runs_after": None, "kinds": None, "pinned": False, "blocks": False}


def test_a_scope_policy_is_read_replaced_and_forgotten(service):
    hal = service["client"]("hal")
    assert hal.get("/v1/retention").json() == NO_POLICY
    put = hal.put("/v1/retention", json={"erase_after": "30d", "erase_runs_after": 3600, "kinds": ["turn"]})
    assert put.status_code == 200, put.text
    policy = {**NO_POLICY, "erase_after": 30 * 86400.0, "erase_runs_after": 3600.0, "kinds": ["turn"]}
    assert put.json() == policy == hal.get("/v1/retention").json()
    # One of hal's agents follows hal's policy until it has its own.
    assert hal.get("/v1/retention", params={"agent_id": "travel"}).json() == policy
    own = hal.put("/v1/retention", json={"agent_id": "travel", "erase_after": "2w", "pinned": True})
    assert own.json() == {**NO_POLICY, "erase_after": 14 * 86400.0, "pinned": True}
    # PUT replaces the whole policy: what it leaves out is not kept from before.
    assert hal.put("/v1/retention", json={"erase_after": "1d"}).json() == {
        **NO_POLICY,
        "erase_after": 86400.0,
    }
    # The answer goes back in as it came out.
    again = hal.put("/v1/retention", json=hal.get("/v1/retention").json())
    assert again.json() == {**NO_POLICY, "erase_after": 86400.0}
    assert hal.put("/v1/retention", json={}).json() == NO_POLICY  # no setting: forgotten
    assert service["memory"].retention(user_id="hal").erase_after is None


def test_policies_stay_in_the_keys_scope(service):
    ida, jon = service["client"]("ida"), service["client"]("jon")
    admin = service["client"](admin=True)
    assert ida.put("/v1/retention", json={"erase_after": "7d"}).status_code == 200
    for response in (
        jon.get("/v1/retention", params={"user_id": "ida"}),
        jon.put("/v1/retention", json={"user_id": "ida", "erase_after": "1s"}),
    ):
        assert error_of(response, 403)["code"] == "scope_denied"
    assert jon.get("/v1/retention").json() == NO_POLICY  # ida's policy is ida's
    assert error_of(admin.get("/v1/retention"), 403)["code"] == "scope_required"
    assert error_of(admin.put("/v1/retention", json={"erase_after": "1d"}), 403)["code"] == "scope_required"
    assert admin.get("/v1/retention", params={"user_id": "ida"}).json()["erase_after"] == 7 * 86400.0
    assert admin.put("/v1/retention", json={"user_id": "jon", "erase_after": "1h"}).status_code == 200
    assert jon.get("/v1/retention").json()["erase_after"] == 3600.0
    assert ida.get("/v1/retention").json()["erase_after"] == 7 * 86400.0


@pytest.mark.parametrize(
    "body",
    [
        {"erase_after": "forever"},
        {"erase_after": "0d"},
        {"erase_after": 0.1},
        {"erase_after": 10**11},
        {"erase_runs_after": False},
        {"kinds": ["secret"]},
        {"pinned": "yes"},
        {"erase_later": "1d"},
    ],
)
def test_a_bad_policy_is_a_422_and_changes_nothing(service, body):
    kim = service["client"]("kim")
    assert kim.put("/v1/retention", json={"erase_after": "90d"}).status_code == 200
    error = error_of(kim.put("/v1/retention", json=body), 422)
    assert error["code"] == "invalid_request" and next(iter(body)) in error["message"], error
    assert kim.get("/v1/retention").json()["erase_after"] == 90 * 86400.0


def test_maintain_erases_what_the_scope_policy_says_is_due(service, clock):
    lou = service["client"]("lou")
    lou.post("/v1/memories", json={"messages": "Lou said the door code is 5150.", "infer": False})
    assert lou.put("/v1/retention", json={"erase_after": "1d", "kinds": ["turn"]}).status_code == 200
    clock.advance(hours=23)
    assert lou.post("/v1/maintain", json={}).json()["erased"] == {}
    clock.advance(hours=1)
    dry = lou.post("/v1/maintain", json={"dry_run": True}).json()["erased"]
    assert dry == {"memories": 1, "episodes": 1, "blocks": 0}
    assert len(lou.get("/v1/memories").json()) == 1  # a dry run erases nothing
    erased = lou.post("/v1/maintain", json={}).json()["erased"]
    assert erased["memories"] == 1 and erased["episodes"] == 1
    assert lou.get("/v1/memories").json() == []


def test_an_agents_policy_reaches_every_users_scope_so_it_needs_an_admin_key(service):
    """A policy stored for an agent alone applies to the agent's memories in every user's scope
    without a policy of its own (or of its user); the scope it is stored for reaches only the
    agent's memories stored without a user (docs/scopes.md)."""
    support, admin = service["client"](agent_id="support"), service["client"](admin=True)
    refused = support.put("/v1/retention", json={"erase_runs_after": "24h"})
    assert error_of(refused, 403)["code"] == "admin_required" and "admin key" in refused.text
    assert support.get("/v1/retention").json() == NO_POLICY  # reading it is within its scope
    assert support.put("/v1/retention", json={"run_id": "r1", "erase_after": "1d"}).status_code == 200
    put = admin.put("/v1/retention", json={"agent_id": "support", "erase_runs_after": "24h"})
    assert put.status_code == 200 and put.json()["erase_runs_after"] == 86400.0
    moe = service["client"]("moe")
    assert moe.get("/v1/retention", params={"agent_id": "support"}).json()["erase_runs_after"] == 86400.0
    assert moe.get("/v1/retention").json() == NO_POLICY  # moe's own scope does not follow the agent
