"""Examples and notebooks run, so they cannot rot."""

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_time_travel_example_with_the_test_embedder(capsys):
    module = runpy.run_path(str(ROOT / "examples" / "time_travel.py"))
    result = module["main"]("test")
    assert all("Porto" not in text for text in result["before"])
    assert "aisle" in result["then"][0] and "window" in result["current"][0]
    assert "UPDATE" in capsys.readouterr().out


def test_gdpr_request_example_exports_then_erases_with_a_receipt(capsys):
    module = runpy.run_path(str(ROOT / "examples" / "gdpr_request.py"))
    result = module["main"]("test")
    assert result["export_counts"]["memory"] == 2 and result["left_for_ada"] == []
    receipt = result["receipt"]
    assert receipt.request_id == "DSR-2024-017" and receipt.actor == "privacy-desk"
    assert receipt.counts["memories"] == 2 and result["chain_ok"]
    assert not result["porto_in_file"] and "chess" in result["bob"]  # Ada's gone, Bob's kept
    assert "Porto" not in receipt.model_dump_json()
    assert "audit chain intact: True" in capsys.readouterr().out


@pytest.mark.integration
@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_run(notebook, minilm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = json.loads(notebook.read_text())["cells"]
    namespace: dict = {}
    for index, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        exec(compile("".join(cell["source"]), f"{notebook.name} cell {index + 1}", "exec"), namespace)


def test_agent_two_sessions_example(monkeypatch, capsys):
    monkeypatch.delenv("DSPY_MEMORY_LM", raising=False)
    module = runpy.run_path(str(ROOT / "examples" / "agent_two_sessions.py"))
    result = module["main"]("test")
    assert "Denver" in result["second"] and "2024-03-08" in result["second"]
    assert any(line.startswith("tool_step: recall(") for line in result["logged"])
    assert "session 2:" in capsys.readouterr().out


def test_local_ollama_example_against_a_loopback_ollama(monkeypatch, capsys):
    from dspy_memory.testing import oracle_responder

    from .fakes import chat_by_signature, ollama_server

    module = runpy.run_path(str(ROOT / "examples" / "local_ollama.py"))
    first, second = (text for _, text in module["CHATS"])
    facts = {
        first: [
            {
                "content": "Ada lives in Boston.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Boston",
                "valid_at": "2024-01-10",
            },
            {
                "content": "Ada works as a nurse at Boston General.",
                "subject": "Ada",
                "predicate": "works_at",
                "object": "Boston General",
                "valid_at": "2024-01-10",
            },
        ],
        second: [
            {
                "content": "Ada lives in Denver.",
                "subject": "Ada",
                "predicate": "lives_in",
                "object": "Denver",
                "valid_at": "2024-03-08",
            },
            {
                "content": "Ada works at Denver Health.",
                "subject": "Ada",
                "predicate": "works_at",
                "object": "Denver Health",
                "valid_at": "2024-03-15",
            },
        ],
    }
    with ollama_server(chat=chat_by_signature(oracle_responder(facts))) as (url, requests):
        monkeypatch.setenv("OLLAMA_HOST", url)
        result = module["main"]()
    assert sorted(result["timeline"]) == sorted(
        [
            ("Ada lives in Boston.", "superseded"),
            ("Ada works as a nurse at Boston General.", "superseded"),
            ("Ada lives in Denver.", "current"),
            ("Ada works at Denver Health.", "current"),
        ]
    )
    assert "## How facts changed" in result["context"] or "Ada lives in Denver." in result["context"]
    assert sum(r["path"] == "/api/chat" for r in requests) == 2
    assert "INVALIDATE" in capsys.readouterr().out


def test_planner_executor_example_avoids_a_tool_that_failed(capsys):
    module = runpy.run_path(str(ROOT / "examples" / "planner_executor.py"))
    result = module["main"]("test")
    assert result["first"] == "no answer" and result["second"].startswith("sunny")
    assert {run for run, _ in result["steps"]} == {"run-1", "run-2"}
