"""`python -m evals.bench_server` in miniature: a real `dspy-memory serve` in its own process,
two tenants, a few seconds of mixed traffic; then the leak checks themselves, on hits and on a
file where one tenant's memory was planted in the other's scope."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.server.app import create_app, running
from dspy_memory.types import Scope
from evals.bench_server import ENDPOINTS, TENANTS, cross_tenant_check, foreign, hits_of, main


def test_the_load_test_runs_stops_and_finds_no_errors_and_no_leaks(tmp_path, capsys):
    results = main(
        [
            "--seconds", "3",
            "--clients", "4",
            "--embedder", "test",
            "--seed-memories", "20",
            "--ceiling-seconds", "0.5",
            "--workdir", str(tmp_path / "work"),
            "--out", str(tmp_path / "bench_server.json"),
            "--plot", str(tmp_path / "bench_server.png"),
        ]
    )  # fmt: skip
    saved = json.loads((tmp_path / "bench_server.json").read_text())
    assert set(saved["endpoints"]) == set(ENDPOINTS)
    for path, stats in saved["endpoints"].items():
        assert stats["requests"] > 0 and stats["ok"] == stats["requests"], path
        assert 0 < stats["p50_ms"] <= stats["p99_ms"], path
    assert saved["errors"] == 0, saved["error_samples"]
    assert saved["leaks"] == 0 and saved["leaks_during_load"] == 0, saved["cross_tenant"]["leaks"]
    assert saved["hits_checked"] > 0 and saved["cross_tenant"]["probes"] > 0
    assert all(saved["cross_tenant"]["own_marker_hits"].values())  # the check is not vacuous
    assert saved["lost"] == 0 and saved["ok"] is True and results["ok"] is True
    # The embedder's own rate on the clients' texts, in batches of as many as can be in flight.
    ceiling = saved["embedder_ceiling"]
    assert ceiling["batched"]["batch"] == 4 and ceiling["alone"]["batch"] == 1
    assert ceiling["batched"]["texts"] >= 3 * 4 and ceiling["batched"]["texts_per_s"] > 0
    assert saved["share_of_ceiling"] == saved["per_s"] / ceiling["batched"]["texts_per_s"]
    assert (tmp_path / "bench_server.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "POST /retrieve_memory" in printed and "of the ceiling" in printed
    # It stopped by itself and took the server with it.
    assert saved["server"]["returncode"] is not None
    with pytest.raises(ProcessLookupError):
        os.kill(saved["server"]["pid"], 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{saved['server']['url']}/healthz", timeout=2)


def test_foreign_flags_what_a_tenant_must_not_see():
    a, b = TENANTS["tenant-a"], TENANTS["tenant-b"]
    hits = [
        (f"Ada moved to Lisbon. Filed under {a}.", None),  # its own
        (f"Ada moved to Lisbon. Filed under {a}.", "tenant-a"),  # its own, owner known
        (f"Bob's code is 4412. Filed under {b}.", None),  # the other's marker
        ("Bob's code is 4412.", None),  # no marker of its own
        (f"Filed under {a} and {b}.", None),  # both
        (f"Ada moved to Lisbon. Filed under {a}.", "tenant-b"),  # owned by the other
    ]
    assert len(foreign(hits, "tenant-a")) == 4
    assert foreign(hits[:2], "tenant-a") == []
    assert foreign(hits, "tenant-b") == [content for i, (content, _) in enumerate(hits) if i != 2]


def test_hits_of_reads_each_response_shape():
    memory = {"id": "m1", "content": "x", "user_id": "tenant-a"}
    assert hits_of("/retrieve_memory", {"memories": [{"content": "x"}]}) == [("x", None)]
    assert hits_of("/v1/search", [{"memory": memory}]) == [("x", "tenant-a")]
    assert hits_of("/v1/memories", [memory]) == [("x", "tenant-a")]


def test_the_cross_tenant_check_catches_a_planted_leak(tmp_path):
    """A memory carrying tenant-b's marker stored in tenant-a's scope (what a broken scope
    filter would serve): the check must count it, while the control and listing still work."""
    memory = Memory(tmp_path / "m.db", embedder=HashEmbedder(64))
    keys = {tenant: memory.store.keys.create(Scope.of(tenant))[1] for tenant in TENANTS}
    ids = {}
    for tenant, marker in TENANTS.items():
        added = memory.add([f"Note {i} of {tenant}. Filed under {marker}." for i in range(5)], user_id=tenant)
        ids[tenant] = [record.id for record in added.memories]
    memory.add(f"Bob's locker code is 4412. Filed under {TENANTS['tenant-b']}.", user_id="tenant-a")
    corpus = {"questions": {tenant: [f"What is noted for {tenant}?"] for tenant in TENANTS}}
    try:
        with running(create_app(memory=memory)) as url:
            check = cross_tenant_check(url, keys, ids, corpus)
    finally:
        memory.close()
    assert check["leaks"] and {leak["tenant"] for leak in check["leaks"]} == {"tenant-a"}
    assert any("4412" in leak.get("content", "") for leak in check["leaks"])
    assert all(check["own_marker_hits"].values()) and check["lost"] == {"tenant-a": 0, "tenant-b": 0}
