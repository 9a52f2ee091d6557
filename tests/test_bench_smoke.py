"""The benchmark is not a timed test; this only keeps the script from rotting."""

import json

from evals.bench_store import main


def test_bench_store_runs_at_tiny_sizes(tmp_path, capsys):
    results = main(
        [
            "--sizes",
            "60,200",
            "--queries",
            "10",
            "--vectors",
            "test",
            "--e2e-memories",
            "20",
            "--e2e-batch",
            "10",
            "--single-adds",
            "3",
            "--tmp",
            str(tmp_path),
            "--out",
            str(tmp_path / "b.json"),
            "--plot",
            str(tmp_path / "b.png"),
        ]
    )
    assert len(results["configs"]) == 4
    saved = json.loads((tmp_path / "b.json").read_text())
    for config in saved["configs"]:
        assert set(config["search_ms"]) == {f"{r} excl. embedding" for r in ("dense", "keyword", "hybrid")}
        assert config["add_per_s_precomputed"] > 0
    assert saved["batched_add_per_s_with_model"] > 0
    assert "Search latency" in capsys.readouterr().out
