"""LoCoMo QA end to end on the mini fixture: a scripted reader, the judge, the official F1."""

from __future__ import annotations

import json

from dspy_memory.testing import scripted_lm
from evals.locomo import load_locomo
from evals.qa import evaluate, main

from .test_locomo import MINI


def reader(call):
    """Answers AnswerFromMemory from the context like a careful model; plans and judges too."""
    if call.output_fields == ["plan"]:
        return {"plan": {"queries": [call.inputs["question"]], "as_of": None}}
    if call.output_fields == ["correct", "reason"]:
        return {
            "correct": str(call.inputs["answer"]).lower() in str(call.inputs["gold_answer"]).lower(),
            "reason": "compared",
        }
    question, context = call.inputs["question"], call.inputs["context"]
    if "researching" in question:
        return {
            "answer": "adoption agencies" if "adoption agencies" in context else "No information available"
        }
    if "support group" in question:
        return {"answer": "7 May 2023" if "support group" in context else "No information available"}
    return {"answer": "No information available"}


def test_qa_end_to_end_with_a_scripted_reader_and_judge(tmp_path, capsys):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    lm = scripted_lm(reader)
    results = evaluate(
        load_locomo(path),
        lm=lm,
        judge_lm=lm,
        embedder="test",
        rewrite=True,
        limit=5,
        out=tmp_path / "qa.json",
        plot=tmp_path / "qa.png",
    )
    rows = {row["question"]: row for row in results["rows"]}
    assert rows["What is Caroline researching?"]["f1"] == 1.0
    assert rows["What is Caroline researching?"]["judge"] == 1.0
    assert rows["When did Caroline go to the LGBTQ support group?"]["f1"] == 1.0
    assert rows["What did Melanie say about adoption?"]["f1"] == 1.0  # adversarial: says it is not there
    assert "judge" not in rows["What did Melanie say about adoption?"]
    summary = results["summary"]
    assert summary["1-4"]["questions"] == 4 and summary["adversarial"]["questions"] == 1
    assert summary["1-4"]["lm_calls"] == 8  # a plan and an answer per question
    assert results["ingestion"]["turns"] == 4 and results["ingestion"]["lm_calls"] == 0
    out = capsys.readouterr().out
    assert "answer p50 ms" in out and (tmp_path / "qa.png").exists()


def test_qa_baseline_without_an_lm(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    results = main(
        [
            "--data",
            str(path),
            "--embedder",
            "test",
            "--limit",
            "5",
            "--out",
            str(tmp_path / "q.json"),
            "--plot",
            str(tmp_path / "q.png"),
        ]
    )
    assert results["lm"] == "baseline: top memory" and results["summary"]["1-4"]["lm_calls"] == 0
