"""`python -m evals.feedback_loop` (docs/optimization.md), small: three twins of one deployment
get the same messages; only after a compile can they differ, and the numbers it reports are the
ones its JSON holds."""

from __future__ import annotations

import json

from evals.feedback_loop import ARMS, main, report


def test_the_twins_get_the_same_messages_and_differ_only_after_a_compile(tmp_path, capsys):
    out = tmp_path / "loop.json"
    results = main(
        ["--seeds", "2", "--weeks", "2", "--per-week", "6", "--compile-after", "1", "--out", str(out),
         "--plot", str(tmp_path / "loop.png")]
    )  # fmt: skip
    first, second = results["weeks"]
    for seed in range(2):  # the same messages, week by week, in every twin; other seeds, others
        assert len({str(results["runs"][arm][seed]["messages"]) for arm in ARMS}) == 1
    assert results["runs"]["static"][0]["messages"] != results["runs"]["static"][1]["messages"]
    assert first["static"] == first["learning"] == first["uncorrected"]  # nothing compiled yet
    assert all(value is None for value in first["differences"].values())
    assert all(value is not None for value in second["differences"].values())
    for arm in ("learning", "uncorrected"):
        assert [compile["week"] for run in results["runs"][arm] for compile in run["compiles"]] == [1, 1]
    assert not any(run["compiles"] for run in results["runs"]["static"])
    assert set(results["runs"]) == set(ARMS) and len(results["runs"]["static"][0]["weeks"][0]) == 6
    saved = json.loads(out.read_text())
    assert report(saved) in capsys.readouterr().out
