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


def test_write_cost_runs_and_fused_makes_one_call_per_session(tmp_path, capsys):
    from evals.write_cost import main as write_cost

    results = write_cost(["--out", str(tmp_path / "w.json"), "--plot", str(tmp_path / "w.png")])
    fused, two_step = results["modes"]["fused"], results["modes"]["two_step"]
    assert [row["lm_calls"] for row in fused["sessions"]] == [1, 1, 1, 1]
    assert [row["lm_calls"] for row in two_step["sessions"]] == [1, 2, 2, 2]  # nothing to reconcile at first
    assert len(fused["invalidated"]) == len(two_step["invalidated"]) == 3
    assert json.loads((tmp_path / "w.json").read_text())["tokenizer"] in ("cl100k_base", "estimate")
    assert "prompt tok/message" in capsys.readouterr().out
