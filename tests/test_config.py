import pytest

from dspy_memory import ConfigError, MemoryConfig


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
    with pytest.raises(ConfigError, match="pathh"):
        MemoryConfig(pathh="typo.db")
    with pytest.raises(ConfigError, match="retrieval.recency_weight"):
        MemoryConfig(retrieval={"recency_weight": 2})


def test_the_projects_own_variables_do_not_break_from_env(tmp_path, caplog):
    config = MemoryConfig.from_env(
        {
            "DSPY_MEMORY_PATH": str(tmp_path / "x.db"),
            "DSPY_MEMORY_VENV": "/opt/venv",  # read by scripts/_venv.sh
            "DSPY_MEMORY_SQLITE_DRIVER": "sqlite3",  # read by the store
        }
    )
    assert config.path.endswith("x.db")
    assert "ignored" not in caplog.text


def test_a_misspelt_variable_is_named_with_a_suggestion(caplog):
    config = MemoryConfig.from_env({"DSPY_MEMORY_EMBEDER": "test"})
    assert config.embedder is None
    assert "DSPY_MEMORY_EMBEDER is not a dspy-memory setting" in caplog.text
    assert "did you mean DSPY_MEMORY_EMBEDDER?" in caplog.text


def test_overrides_beat_variables_which_beat_the_toml_file(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(
        "[dspy_memory]\nembedder = 'test'\n[dspy_memory.retrieval]\nrrf_k = 5\ndense_weight = 0.2\n"
    )
    config = MemoryConfig.from_env(
        {
            "DSPY_MEMORY_CONFIG": str(path),
            "DSPY_MEMORY_RETRIEVAL__RRF_K": "7",
            "DSPY_MEMORY_WRITE__MAX_OPS": "9",
        },
        retrieval={"dense_weight": 0.4},
    )
    assert config.embedder == "test"
    assert (config.retrieval.rrf_k, config.retrieval.dense_weight) == (7, 0.4)
    assert config.write.max_ops == 9 and config.write.max_batch == 20  # the rest stays default


def test_a_bad_value_names_the_setting():
    with pytest.raises(ConfigError, match=r"retrieval\.rrf_k='many': should be a valid number"):
        MemoryConfig.from_env({"DSPY_MEMORY_RETRIEVAL__RRF_K": "many"})
