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
    assert saved["with_model"]["sqlite"]["batched_add_per_s"] > 0
    assert "Search latency" in capsys.readouterr().out


def test_bench_store_puts_both_backends_side_by_side(tmp_path, capsys, postgres_server):
    results = main(
        ["--backend", "both", "--postgres-url", postgres_server, "--postgres-partitions", "4"]
        + ["--sizes", "150", "--queries", "8"]
        + ["--vectors", "test", "--e2e-memories", "10", "--e2e-batch", "5", "--single-adds", "2"]
        + ["--tmp", str(tmp_path), "--out", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.png")]
    )
    assert [(c["backend"], c["layout"]) for c in results["configs"]] == [
        ("sqlite", "one scope"), ("postgres", "one scope"), ("sqlite", "100 scopes"), ("postgres", "100 scopes"),
    ]  # fmt: skip
    for config in results["configs"]:
        assert config["dense_recall_at_10"] > 0.5 and config["disk_mb"] > 0
        assert all(latency["p99"] >= latency["p50"] > 0 for latency in config["search_ms"].values())
    assert set(results["with_model"]) == {"sqlite", "postgres"} and results["postgres_partitions"] == 4
    out = capsys.readouterr().out
    assert "sqlite p50 ms | sqlite p99 ms | postgres p50 ms | postgres p99 ms" in out
    import psycopg  # every schema the run made is gone

    with psycopg.connect(postgres_server) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_%'").fetchone()[0]
    assert left == 0 and (tmp_path / "b.png").exists()


def test_write_cost_runs_and_fused_makes_one_call_per_session(tmp_path, capsys):
    from evals.write_cost import main as write_cost

    results = write_cost(["--out", str(tmp_path / "w.json"), "--plot", str(tmp_path / "w.png")])
    fused, two_step = results["modes"]["fused"], results["modes"]["two_step"]
    assert [row["lm_calls"] for row in fused["sessions"]] == [1, 1, 1, 1]
    assert [row["lm_calls"] for row in two_step["sessions"]] == [1, 2, 2, 2]  # nothing to reconcile at first
    assert len(fused["invalidated"]) == len(two_step["invalidated"]) == 3
    assert json.loads((tmp_path / "w.json").read_text())["tokenizer"] in ("cl100k_base", "estimate")
    assert "prompt tok/message" in capsys.readouterr().out
