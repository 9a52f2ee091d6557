import pytest
from pydantic import ValidationError

from dspy_memory import MemoryConfig


def test_from_env_reads_nested_settings(tmp_path):
    config = MemoryConfig.from_env(
        {
            "DSPY_MEMORY_PATH": str(tmp_path / "x.db"),
            "DSPY_MEMORY_EMBEDDER": "test",
            "DSPY_MEMORY_RETRIEVAL__RRF_K": "25",
            "DSPY_MEMORY_TRACK_ACCESS": "false",
            "UNRELATED": "1",
        }
    )
    assert config.path.endswith("x.db")
    assert config.embedder == "test"
    assert config.retrieval.rrf_k == 25
    assert config.track_access is False


def test_from_toml_with_table_and_overrides(tmp_path):
    path = tmp_path / "memory.toml"
    path.write_text('[dspy_memory]\npath = "a.db"\n[dspy_memory.retrieval]\ndense_weight = 0.3\n')
    config = MemoryConfig.from_toml(path, retrieval={"keyword_weight": 2.0})
    assert config.path == "a.db"
    assert config.retrieval.dense_weight == 0.3
    assert config.retrieval.keyword_weight == 2.0


def test_env_can_point_at_a_toml_file(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('path = "from-toml.db"\nembedder = "test"\n')
    config = MemoryConfig.from_env({"DSPY_MEMORY_CONFIG": str(path), "DSPY_MEMORY_EMBEDDER": "local"})
    assert config.path == "from-toml.db"
    assert config.embedder == "local"


def test_unknown_settings_are_rejected():
    with pytest.raises(ValidationError):
        MemoryConfig(pathh="typo.db")
    with pytest.raises(ValidationError):
        MemoryConfig(retrieval={"recency_weight": 2})
