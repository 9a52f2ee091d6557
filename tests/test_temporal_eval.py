"""The temporal scenario set and its runner."""

from __future__ import annotations

from dspy_memory.testing import oracle_responder, scripted_lm
from evals.temporal import evaluate, load_scenarios


def test_the_set_covers_present_past_dates_and_changes():
    scenarios = load_scenarios()
    types = {q["type"] for s in scenarios for q in s["questions"]}
    assert types == {"present", "past", "when", "what_changed"} and len(scenarios) >= 8
    for scenario in scenarios:
        for question in scenario["questions"]:
            assert question["type"] != "past" or question["as_of"], question
        assert all(m.get("facts") for s in scenario["sessions"] for m in s["messages"]), scenario["id"]


def test_the_baseline_answers_past_questions_when_told_the_date(tmp_path):
    results = evaluate(
        load_scenarios(), lm=None, embedder="test", out=tmp_path / "t.json", plot=tmp_path / "t.png"
    )
    summary = results["summary"]
    assert summary["overall"]["questions"] == 24 and summary["overall"]["lm_calls"] == 0
    assert summary["past"]["contains"] >= 0.75  # the oracle wrote invalidations; as_of finds the old fact
    report = (tmp_path / "t.md").read_text()
    assert "| type " in report and "Temporal eval: 8 scenarios, 24 questions" in report


def test_with_an_lm_the_write_path_and_memory_answer_run(tmp_path):
    scenarios = load_scenarios()[:2]
    facts = {
        m["content"]: m["facts"] for s in scenarios for session in s["sessions"] for m in session["messages"]
    }
    write = oracle_responder(facts)

    def model(call):
        if call.output_fields == ["answer"]:
            first = next(
                (line[2:] for line in call.inputs["context"].splitlines() if line.startswith("- ")), ""
            )
            return {"answer": first or "No information available"}
        if call.output_fields == ["plan"]:
            return {"plan": {"queries": [call.inputs["question"]], "as_of": None}}
        return write(call)

    results = evaluate(
        scenarios,
        lm=scripted_lm(model),
        embedder="test",
        rewrite=True,
        out=tmp_path / "t.json",
        plot=tmp_path / "t.png",
    )
    rows = results["rows"]
    assert len(rows) == 7 and all(row["lm_calls"] == 2 for row in rows)
    now = next(row for row in rows if row["question"] == "Where does Ada live now?")
    assert "Austin" in now["answer"] and now["contains"] == 1.0
