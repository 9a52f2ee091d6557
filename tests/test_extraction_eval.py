"""The extraction eval, built from a LoCoMo-format file, end to end with a scripted LM."""

from __future__ import annotations

import copy
import json
import shlex

import evals.extraction
from dspy_memory.cli import main as cli_main
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from evals.extraction import as_dataset, extraction_cases, main, run
from evals.locomo import load_locomo

from .test_locomo import MINI
from .test_qa_eval import markdown_rows

OBSERVED = copy.deepcopy(MINI)
OBSERVED[0]["observation"] = {
    "session_1_observation": {
        "Caroline": [["Caroline went to an LGBTQ support group on 7 May 2023.", "D1:1"]],
        "Melanie": [["Melanie shared a photo of a sunset over the lake.", "D1:2"]],
    },
    "session_2_observation": {
        "Melanie": [["Melanie painted a sunrise in 2022.", "D2:1"]],
        "Caroline": [["Caroline is researching adoption agencies.", "D2:2"]],
    },
}


def write(tmp_path):
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(OBSERVED))
    return path


def test_cases_come_from_sessions_with_observations(tmp_path):
    cases = extraction_cases(load_locomo(write(tmp_path)))
    assert [case["id"] for case in cases] == ["conv-mini/session_1", "conv-mini/session_2"]
    assert cases[0]["observed_at"] == "2023-05-08 (Monday)"
    assert cases[0]["turns"][1]["text"].endswith("[shared a photo: a photo of a sunset over the lake]")
    assert len(cases[1]["reference"]) == 2
    assert as_dataset(cases).num_rows == 2


def test_a_scripted_extractor_is_scored_against_the_references(tmp_path):
    cases = extraction_cases(load_locomo(write(tmp_path)))
    references = {case["turns"][0]["text"]: case["reference"] for case in cases}

    def extractor(call):
        assert call.output_fields == ["facts"]
        reference = references[call.inputs["turns"][0]["text"]]
        return {"facts": [{"content": text} for text in reference[:1]]}  # half of each session

    embed = HashEmbedder(256, cache_size=0).embed
    scored = run(cases, lm=scripted_lm(extractor), embed=embed)
    assert scored["lm_calls"] == 2 and scored["tokens"] > 0
    assert (scored["precision"], scored["recall"]) == (1.0, 0.5)
    baseline = run(cases, lm=None, embed=embed)
    # Raw turns as facts: close paraphrases of a turn match, the rest are noise.
    assert baseline["lm_calls"] == 0 and 0 < baseline["precision"] < 1


def test_the_runner_prints_and_writes(tmp_path, capsys):
    results = main(
        [
            "--data",
            str(write(tmp_path)),
            "--embedder",
            "test:256",
            "--limit",
            "5",
            "--out",
            str(tmp_path / "e.json"),
            "--plot",
            str(tmp_path / "e.png"),
        ]
    )
    assert results["sessions"] == 2 and (tmp_path / "e.png").exists()
    assert "precision" in capsys.readouterr().out


def test_one_command_for_a_real_model_writes_json_markdown_and_png(tmp_path, monkeypatch, capsys):
    # A second conversation whose one session has a single reference fact.
    second = copy.deepcopy(OBSERVED[0])
    second["sample_id"] = "conv-two"
    second["conversation"]["session_1"][0]["text"] = "I adopted a grey cat named Pebble."
    second["observation"] = {
        "session_1_observation": {"Caroline": [["Caroline adopted a grey cat named Pebble.", "D1:1"]]}
    }
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([OBSERVED[0], second]))
    references = {case["turns"][0]["text"]: case["reference"] for case in extraction_cases(load_locomo(path))}

    def extractor(call):  # the first reference fact of each session
        return {"facts": [{"content": references[call.inputs["turns"][0]["text"]][0]}]}

    built: list[str] = []

    def make_lm(spec):  # what a user's model string becomes; here a scripted model stands in
        built.append(spec)
        return scripted_lm(extractor, model=spec)

    monkeypatch.setattr(evals.extraction, "make_lm", make_lm)
    argv = ["--lm", "ollama_chat/llama3.2", "--data", str(path), "--embedder", "test:256"]
    argv += ["--out", str(tmp_path / "e.json"), "--plot", str(tmp_path / "e.png")]
    assert cli_main(["eval", "extraction", *argv]) == 0
    assert built == ["ollama_chat/llama3.2"]

    results = json.loads((tmp_path / "e.json").read_text())
    report = (tmp_path / "e.md").read_text()
    assert (tmp_path / "e.png").stat().st_size > 0
    table = markdown_rows(report)
    # conv-mini: two sessions of two references, one extracted and matched in each:
    #   precision 1, recall 1/2, F1 2 * 1 * 0.5 / 1.5 = 0.667; one LM call per session.
    # conv-two: one session of one reference, extracted: 1, 1, 1.
    # overall, means over the three sessions: precision 1, recall (0.5 + 0.5 + 1) / 3 = 0.667,
    #   F1 (0.667 + 0.667 + 1) / 3 = 0.778.
    expected = {
        "overall": ("3", "1.000", "0.667", "0.778", "3"),
        "conv-mini": ("2", "1.000", "0.500", "0.667", "2"),
        "conv-two": ("1", "1.000", "1.000", "1.000", "1"),
    }
    assert set(table) == set(expected)
    for name, (sessions, precision, recall, f1, calls) in expected.items():
        row = table[name]
        assert (row["sessions"], row["precision"], row["recall"], row["F1"], row["LM calls"]) == (
            sessions,
            precision,
            recall,
            f1,
            calls,
        )
        tokens = results["tokens"] if name == "overall" else results["conversations"][name]["tokens"]
        assert int(row["tokens"]) == tokens > 0
        assert float(row["p95 ms"]) >= float(row["p50 ms"]) > 0 and row["failed"] == "0"
    assert f"- command: `python -m evals.extraction {shlex.join(argv)}`" in report
    assert "- LM: ollama_chat/llama3.2" in report and "- machine: Python " in report
    assert "p95 ms" in capsys.readouterr().out
