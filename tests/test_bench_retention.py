"""The retention benchmark is not a timed test; this keeps the script from rotting, and checks
what it reports on both backends: everything that expired erased, the rest left."""

import json

from evals.bench_retention import main


def test_bench_retention_erases_what_expired_on_both_backends(tmp_path, capsys, postgres_server):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                *("--size", "200", "--users", "4", "--queries", "5", "--postgres-url", postgres_server),
                *("--out", str(out), "--plot", str(tmp_path / "r.png")),
            ]
        )
        == 0
    )
    results = json.loads(out.read_text())["results"]
    assert [r["backend"] for r in results] == ["sqlite", "postgres"]
    for result in results:
        assert result["expiring"] == 20 and result["erased"]["memories"] == 20 and result["left"] == 180
    assert "maintain s" in capsys.readouterr().out and (tmp_path / "r.png").exists()
