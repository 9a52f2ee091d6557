"""evals/bench_backends.py: adds and an erasure on both backends in one run (tiny sizes)."""

from __future__ import annotations

import json

from evals.bench_backends import main


def test_bench_backends_reports_adds_and_erasure_on_both_backends_side_by_side(tmp_path, postgres_server):
    out = tmp_path / "bench.json"
    results = main(
        ["--size", "200", "--batch", "100", "--vectors", "test", "--erase-rows", "60",
         "--postgres-url", postgres_server, "--tmp", str(tmp_path), "--out", str(out),
         "--exact-max-rows", "80", "--one-block"]
    )  # fmt: skip
    assert {(run["backend"], run["layout"]) for run in results["runs"]} == {
        (backend, layout) for backend in ("sqlite", "postgres") for layout in ("one scope", "100 scopes")
    }
    assert all(run["add_per_s"] > 0 for run in results["runs"])
    searched = [run for run in results["runs"] if run["layout"] == "one scope"]
    assert all(run["search_p50_ms"] > 0 and 0.5 <= run["recall_at_10"] <= 1.0 for run in searched)
    [merged] = [run for run in searched if run["backend"] == "postgres"]
    assert merged["search_p50_ms_one_block"] > 0 and merged["recall_at_10_one_block"] >= 0.5
    assert len(results["delete_scope_s"]) == 4
    assert all(seconds > 0 for row in results["delete_scope_s"].values() for seconds in row.values())
    assert "postgres / sqlite" in results["report"] and json.loads(out.read_text())["size"] == 200
