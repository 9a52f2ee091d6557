"""The LongMemEval loader and retrieval metrics on a project-written fixture in its format."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.longmemeval import load_longmemeval, main, parse_date, retrieval_scores, session_scores

FIXTURE = Path(__file__).parent / "data" / "longmemeval_mini.json"


def test_metrics_follow_the_benchmark_definitions():
    corpus = ["a_1", "a_2", "b_1", "b_2", "c_1"]
    scores = retrieval_scores(["b_1", "a_1", "c_1"], ["a_1", "a_2"], corpus, 2)
    assert scores["recall_any"] == 1.0 and scores["recall_all"] == 0.0
    assert scores["ndcg"] == pytest.approx((1 / 1.584962500721156) / (1 + 1 / 1.584962500721156))
    # Session level: turns map to sessions and k widens to k distinct sessions.
    session = session_scores(["a_1", "a_2", "b_1"], ["b"], corpus, 2)
    assert session["recall_any"] == 1.0  # the top 3 turns cover 2 distinct sessions: a and b


def test_loader_and_runner_on_the_fixture(tmp_path, capsys):
    instances = load_longmemeval(FIXTURE)
    assert [i["question_id"] for i in instances] == ["q-mini-1", "q-mini-2"]
    assert parse_date(instances[0]["haystack_dates"][1]).isoformat() == "2023-05-10T18:30:00+00:00"
    with pytest.raises(ValueError, match="LongMemEval format"):
        bad = tmp_path / "bad.json"
        bad.write_text('[{"question": "x"}]')
        load_longmemeval(bad)
    results = main(
        [
            "--data",
            str(FIXTURE),
            "--embedder",
            "test:128",
            "--out",
            str(tmp_path / "l.json"),
            "--plot",
            str(tmp_path / "l.png"),
        ]
    )
    overall = results["summary"]["overall"]
    assert overall["questions"] == 2 and overall["session_recall_any@5"] == 1.0
    assert results["summary"]["single-session-user"]["turn_recall_any@10"] == 1.0
    assert "session_recall_any@10" in capsys.readouterr().out
