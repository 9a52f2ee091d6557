"""LoCoMo QA end to end on the mini fixture: a scripted reader, the judge, the official F1."""

from __future__ import annotations

import json
import shlex

import evals.qa
from dspy_memory.cli import main as cli_main
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
    assert "p95 ms" in out and (tmp_path / "qa.png").exists()


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


def markdown_rows(text: str) -> dict[str, dict[str, str]]:
    """The Markdown table in `text` as {first cell: {header: cell}}."""
    lines = [line for line in text.splitlines() if line.startswith("|") and not line.startswith("|-")]
    headers = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]
    return {row[0]: dict(zip(headers, row)) for row in rows}


def test_one_command_for_a_real_model_writes_json_markdown_and_png(tmp_path, monkeypatch, capsys):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(MINI))
    built: list[str] = []

    def make_lm(spec):  # what a user's model string becomes; here a scripted model stands in
        built.append(spec)
        return scripted_lm(reader, model=spec)

    monkeypatch.setattr(evals.qa, "make_lm", make_lm)
    argv = ["--lm", "ollama_chat/llama3.2", "--judge-lm", "ollama_chat/llama3.2", "--rewrite"]
    argv += ["--data", str(path), "--embedder", "test", "--out", str(tmp_path / "qa.json")]
    argv += ["--plot", str(tmp_path / "qa.png")]
    assert cli_main(["eval", "qa", *argv]) == 0
    assert built == ["ollama_chat/llama3.2", "ollama_chat/llama3.2"]

    results = json.loads((tmp_path / "qa.json").read_text())
    report = (tmp_path / "qa.md").read_text()
    assert (tmp_path / "qa.png").stat().st_size > 0
    table = markdown_rows(report)
    # By the scripted reader: temporal answers the support group (F1 1, judged right) but not
    # the sunrise (F1 0, judged wrong); single-hop finds adoption agencies; the broken
    # multi-hop question gets no answer; adversarial says "No information available" (F1 1,
    # never judged). Each question costs a plan and an answer: 2 LM calls.
    expected = {
        "1-4": ("4", "0.500", "0.500", "8"),
        "multi-hop": ("1", "0.000", "0.000", "2"),
        "temporal": ("2", "0.500", "0.500", "4"),
        "single-hop": ("1", "1.000", "1.000", "2"),
        "adversarial": ("1", "1.000", "-", "2"),
    }
    assert set(table) == set(expected)
    for category, (questions, f1, judge, calls) in expected.items():
        row = table[category]
        assert (row["questions"], row["F1"], row["judge"], row["LM calls"]) == (questions, f1, judge, calls)
        summary = results["summary"][category]
        assert int(row["tokens"]) == summary["tokens"] > 0
        assert float(row["p95 ms"]) >= float(row["p50 ms"]) > 0 and row["failed"] == "0"
    # The judge is asked about the four questions of categories 1-4, once each.
    assert "judge ollama_chat/llama3.2 (4 LM calls," in report
    assert results["summary"]["1-4"]["judge_lm_calls"] == 4
    assert f"- command: `python -m evals.qa {shlex.join(argv)}`" in report
    assert "- LM: ollama_chat/llama3.2" in report and "- machine: Python " in report
    assert "![LoCoMo QA (official F1)](qa.png)" in report
    assert report.count("| category ") == 1 and "p95 ms" in capsys.readouterr().out
