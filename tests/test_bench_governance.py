"""The governance benchmark is not a timed test; this only keeps the script from rotting. It
opens its files through sqlcipher3, so it runs in the sqlcipher3 process
(tests/test_cipher_process.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
pytestmark = pytest.mark.cipher_process  # runs in the sqlcipher3 process (tests/conftest.py)


def test_bench_governance_runs_at_a_tiny_size(tmp_path, capsys):
    from evals.bench_governance import main

    out, plot = tmp_path / "g.json", tmp_path / "g.png"
    main(
        ["--size", "120", "--queries", "8", "--single-adds", "4", "--repeats", "2", "--vectors", "test"]
        + ["--tmp", str(tmp_path), "--out", str(out), "--plot", str(plot)]
    )
    saved = json.loads(out.read_text())
    assert saved["single_add_ms"]["encrypted"]["p50"] > 0 and saved["add_per_s"]["plain"] > 0
    assert all(saved["backup"][name]["backup_s"] > 0 for name in ("plain", "encrypted"))
    assert saved["delete_ms"]["encrypted"]["p50"] > 0
    assert set(saved["exchange"]) == {"with embeddings", "without embeddings"} and plot.exists()
    assert "encrypted / plain" in capsys.readouterr().out
