"""The service's OpenAPI document is a contract generated clients can trust: Schemathesis
(https://schemathesis.readthedocs.io) generates requests from /openapi.json, valid and invalid,
sends them to the app in process (ASGI) with a tenant key and with an admin key, and runs every
default check on each answer: no server errors, only documented status codes, content types and
bodies, valid data accepted and invalid data refused, authentication enforced, `Allow` right,
and, following the document's links, resources available after they are created and gone after
they are deleted (docs/server.md#the-contract).

The runs are derandomized (a fixed seed) and bounded in examples and steps, so the file takes
about a minute on two cores. The service has the test embedder and no LM, so routes that need
one answer 503 `lm_unavailable`, which the document declares; that is the only 5xx allowed, and
only on those routes. One rule no schema can state is the clock's: an add's `expires_at` must be in
the future (else 422 `invalid_input`), so a generated one in the past is moved to the future."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from dspy_memory import Memory
from dspy_memory.errors import InvalidInputError
from dspy_memory.server.app import create_app
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import to_datetime, utcnow

SEED = 20240301
# Routes that call an LM when asked to (infer=true, consolidate=true, answer, recipe="rerank"):
# without one, 503.
NEEDS_AN_LM = ["add_memories", "answer", "maintain", "search"]
SETTINGS = hypothesis.settings(derandomize=True, deadline=None, database=None, max_examples=10)

# Schemathesis builds its tests when this module is imported (its lazy fixture loader does not
# work with pytest 9), so the file, its keys and the app exist from then on; the app opens the
# file for each test (ASGI lifespan) and the folder goes when the process ends.
FOLDER = Path(tempfile.mkdtemp(prefix="dspy-memory-contract-"))
atexit.register(shutil.rmtree, FOLDER, ignore_errors=True)
BASELINE = "Ada likes green tea."
with Memory(FOLDER / "m.db", embedder="test") as _memory:
    TOKENS = {
        "tenant": _memory.keys.create(Scope.of("ada"))[1],
        "admin": _memory.keys.create(None, admin=True, name="ops")[1],
    }
    _memory.add(BASELINE, user_id="ada", infer=False)


def erase_what_scenarios_stored() -> None:
    """Back to the file's first memories: Hypothesis replays a scenario (to shrink it, or to
    check it is deterministic) and needs the same answers each time, which it would not get from
    a file where an earlier scenario already stored the same text (an add of a text held is a
    no-op: no new id to follow)."""
    with Memory(FOLDER / "m.db", embedder="test") as memory:
        for user_id, agent_id, run_id in {*memory.store.scopes(None), ("ada", None, None)}:
            memory.delete_scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
        memory.add(BASELINE, user_id="ada", infer=False)


APP = create_app(str(FOLDER / "m.db"), embedder="test", rate_per_second=0)  # no 429s hiding answers


def contract(who: str) -> schemathesis.schemas.BaseSchema:
    """The document as Schemathesis reads it, calling the app as `who` (tenant or admin)."""
    config = SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": 10, "deterministic": True},
            "phases": {"stateful": {"max-steps": 12}},
            "auth": {"openapi": {"APIKeyHeader": {"api_key": TOKENS[who]}}},
            "operations": [
                {
                    "include-operation-id": NEEDS_AN_LM,
                    "checks": {"not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "503"]}},
                }
            ],
        }
    )
    return schemathesis.openapi.from_asgi("/openapi.json", APP, config=config)


def expiring_later(context, case):
    """The case with a valid `expires_at` that has passed moved to a time still to come: whether
    a time has passed is the clock's to say, not the document's (docs/server.md#the-contract). A
    case hook, as every phase (the coverage phase too) applies those."""
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("expires_at"), str):
        try:
            passed = to_datetime(body["expires_at"]) <= utcnow() + timedelta(minutes=10)
        except InvalidInputError:
            passed = False  # not a time: the request is invalid anyway
        if passed:
            case.body = {**body, "expires_at": "9999-01-01"}
    return case


AS_TENANT, AS_ADMIN = contract("tenant"), contract("admin")
for _schema in (AS_TENANT, AS_ADMIN):
    _schema.hooks.register_hook_with_name(expiring_later, "map_case")


@AS_TENANT.parametrize()
@SETTINGS
def test_every_route_keeps_its_contract_for_a_tenant_key(case):
    case.call_and_validate()


@AS_ADMIN.parametrize()
@SETTINGS
def test_every_route_keeps_its_contract_for_an_admin_key(case):
    case.call_and_validate()


@pytest.mark.parametrize("schema", [AS_TENANT, AS_ADMIN], ids=["tenant", "admin"])
def test_linked_calls_keep_the_contract(schema):
    class Scenarios(schema.as_state_machine()):  # type: ignore[misc]  # a class made at run time
        def setup(self) -> None:
            erase_what_scenarios_stored()

    Scenarios.run(settings=hypothesis.settings(SETTINGS, max_examples=30, stateful_step_count=10))
