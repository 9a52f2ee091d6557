"""Every Python snippet in the README runs, in order, as a user would paste them."""

import re
from pathlib import Path

import pytest

from tests.fakes import embedding_server

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_snippets():
    assert len(python_blocks()) >= 4


@pytest.mark.integration
def test_readme_snippets_run(tmp_path, monkeypatch, minilm):
    monkeypatch.chdir(tmp_path)
    with (
        embedding_server("ollama", dim=768) as (ollama_url, _),
        embedding_server("openai", dim=1536) as (openai_url, _),
    ):
        monkeypatch.setenv("OLLAMA_HOST", ollama_url)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        namespace: dict = {}
        for index, block in enumerate(python_blocks()):
            try:
                exec(compile(block, f"README.md python block {index + 1}", "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the message names the block
                raise AssertionError(f"README python block {index + 1} failed: {exc!r}\n{block}") from exc
