"""The extraction eval, built from a LoCoMo-format file, end to end with a scripted LM."""

from __future__ import annotations

import copy
import json

from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from evals.extraction import as_dataset, extraction_cases, main, run
from evals.locomo import load_locomo

from .test_locomo import MINI

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
