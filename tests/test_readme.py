"""Every Python snippet in the README runs, in order, as a user would paste them."""

import re
from pathlib import Path

import pytest

from dspy_memory.testing import oracle_responder
from tests.fakes import chat_by_signature, embedding_server, ollama_server

# What the local model "knows" in the README's Ollama example.
README_FACTS = {
    "I live in Boston.": [
        {
            "content": "Ada lives in Boston.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Boston",
            "valid_at": "2024-01-10",
        }
    ],
    "I moved to Denver last week!": [
        {
            "content": "Ada lives in Denver.",
            "subject": "Ada",
            "predicate": "lives_in",
            "object": "Denver",
            "valid_at": "2024-03-08",
        }
    ],
}

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(*, encrypted: bool = False):
    """The README's Python blocks, in order: those on an encrypted file (they name
    `encryption_key=`) apart, for the sqlcipher3 process (tests/test_readme_encrypted.py)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [block for block in blocks if ("encryption_key=" in block) == encrypted]


def test_readme_has_snippets():
    assert len(python_blocks()) >= 4


@pytest.mark.integration
def test_readme_snippets_run(tmp_path, monkeypatch, minilm, postgres_server, request):
    monkeypatch.chdir(tmp_path)
    import dspy

    from tests.pg import fresh_schema

    database_url, drop = fresh_schema(postgres_server)
    request.addfinalizer(drop)
    monkeypatch.setenv("DATABASE_URL", database_url)

    chat = chat_by_signature(oracle_responder(README_FACTS))
    with (
        ollama_server(chat=chat) as (ollama_url, _),
        embedding_server("openai", dim=1536) as (openai_url, _),
        dspy.context(),
    ):
        monkeypatch.setenv("OLLAMA_HOST", ollama_url)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        # Twice, on the same files: a user re-running the examples must get the same results
        # (the same raw text at the same time is one memory, not a duplicate).
        for run in ("first", "second"):
            namespace: dict = {}
            for index, block in enumerate(python_blocks()):
                try:
                    exec(compile(block, f"README.md python block {index + 1}", "exec"), namespace)
                except Exception as exc:  # pragma: no cover - the message names the block
                    raise AssertionError(
                        f"README python block {index + 1} failed on the {run} run: {exc!r}\n{block}"
                    ) from exc
                finally:
                    dspy.configure(lm=None)  # the Ollama example configures dspy's LM globally
