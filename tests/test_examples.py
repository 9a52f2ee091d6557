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


@pytest.mark.integration
@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_run(notebook, minilm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = json.loads(notebook.read_text())["cells"]
    namespace: dict = {}
    for index, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        exec(compile("".join(cell["source"]), f"{notebook.name} cell {index + 1}", "exec"), namespace)
