"""Bad settings are refused with one ConfigError (also a ValueError): a line per refused setting,
named by its dotted path, saying what it may be; nothing is opened or written."""

from __future__ import annotations

import pytest

from dspy_memory import ConfigError, Memory, MemoryConfig, RetrievalConfig
from dspy_memory.embed import make_embedder
from dspy_memory.parts import config_with

# The six settings found refused with pydantic's dump or a bare ValueError (issue 29): what
# Memory(path, **settings) was given, and what the error must name.
FINDINGS = {
    "a negative busy timeout": ({"busy_timeout_ms": -1}, ["busy_timeout_ms=-1", ">= 0"]),
    "an unknown setting": ({"bogus": 1}, ["bogus", "unknown setting"]),
    "a nested limit out of range": ({"write": {"max_ops": 0}}, ["write.max_ops=0", ">= 1"]),
    "a retrieval weight out of range": ({"retrieval": {"rrf_k": -1}}, ["retrieval.rrf_k=-1", "> 0"]),
    "an unknown embedder": ({"embedder": "nope"}, ["embedder='nope'", "local", "ollama:<model>", "test"]),
    "a test embedder of 7 dimensions": ({"embedder": "test:7"}, ["embedder='test:7'", "multiple of 8"]),
}


def readable(message: str) -> None:
    """One line per problem, none of pydantic's dump (its model title, error types, URLs)."""
    assert "errors.pydantic.dev" not in message and "For further information" not in message
    assert "validation error" not in message and "[type=" not in message


@pytest.mark.parametrize("finding", FINDINGS)
def test_each_bad_setting_of_memory_is_a_config_error_naming_it_and_its_range(tmp_path, finding):
    settings, named = FINDINGS[finding]
    path = tmp_path / "memory.db"
    with pytest.raises(ConfigError) as raised:
        Memory(str(path), **settings)
    message = str(raised.value)
    for part in named:
        assert part in message, message
    readable(message)
    assert len(message.splitlines()) == 1
    assert isinstance(raised.value, ValueError)
    assert raised.value.settings == [next(iter(named)).split("=")[0]]
    assert not path.exists(), "a refused setting must not create the file"


@pytest.mark.parametrize("finding", FINDINGS)
def test_the_same_settings_are_refused_by_memory_config_itself(finding):
    settings, named = FINDINGS[finding]
    with pytest.raises(ConfigError) as raised:
        MemoryConfig(**settings)
    assert named[0] in str(raised.value)


def test_several_problems_are_one_line_each():
    with pytest.raises(ConfigError) as raised:
        MemoryConfig(busy_timeout_ms=-1, write={"max_ops": 0, "mode": "fast"}, retrieval={"fusion": "max"})
    lines = str(raised.value).splitlines()
    assert lines[0] == "4 bad settings:"
    body = "\n".join(lines[1:])
    assert len(lines) == 5, lines
    assert "write.mode='fast'" in body and "'fused', 'two_step', 'compact' or 'auto'" in body
    assert "retrieval.fusion='max'" in body and "'rrf', 'convex' or 'zscore'" in body
    assert sorted(raised.value.settings) == [
        "busy_timeout_ms",
        "retrieval.fusion",
        "write.max_ops",
        "write.mode",
    ]
    readable(str(raised.value))


def test_a_bounded_setting_names_both_ends_of_its_range():
    with pytest.raises(ConfigError, match=r"retrieval\.recency_weight=2: .*>= 0 and <= 1"):
        MemoryConfig(retrieval={"recency_weight": 2})


def test_an_unknown_setting_suggests_the_nearest_one():
    with pytest.raises(ConfigError, match="unknown setting; did you mean 'path'") as raised:
        MemoryConfig(pathh="typo.db")
    assert raised.value.settings == ["pathh"]
    with pytest.raises(ConfigError, match=r"write\.max_opps: unknown setting; did you mean 'max_ops'"):
        MemoryConfig(write={"max_opps": 3})


def test_a_value_of_the_wrong_type_is_named_with_what_it_should_be():
    with pytest.raises(ConfigError, match=r"write\.max_ops='many': should be a valid integer.*>= 1"):
        MemoryConfig(write={"max_ops": "many"})


def test_the_encryption_key_is_never_repeated_in_an_error():
    with pytest.raises(ConfigError) as raised:
        MemoryConfig(encryption_key=12345678901234)
    assert "12345678901234" not in str(raised.value) and "encryption_key" in str(raised.value)


def test_settings_from_toml_and_the_environment_are_refused_the_same_way(tmp_path):
    toml = tmp_path / "memory.toml"
    toml.write_text("[dspy_memory]\nbusy_timeout_ms = -1\n[dspy_memory.write]\nmax_ops = 0\n")
    with pytest.raises(ConfigError) as raised:
        MemoryConfig.from_toml(toml)
    assert "busy_timeout_ms=-1" in str(raised.value) and "write.max_ops=0" in str(raised.value)
    with pytest.raises(ConfigError, match=r"write\.max_ops='?0'?: .*>= 1"):
        MemoryConfig.from_env({"DSPY_MEMORY_WRITE__MAX_OPS": "0"})
    with pytest.raises(ConfigError, match="embedder='nope'"):
        MemoryConfig.from_env({"DSPY_MEMORY_EMBEDDER": "nope"})


def test_a_toml_file_that_does_not_parse_is_named(tmp_path):
    toml = tmp_path / "memory.toml"
    toml.write_text("[dspy_memory\npath = 'x.db'\n")
    with pytest.raises(ConfigError, match="memory.toml"):
        MemoryConfig.from_toml(toml)


def test_settings_on_top_of_a_config_are_checked_too():
    base = MemoryConfig(path="a.db")
    with pytest.raises(ConfigError, match=r"write\.max_ops=0"):
        config_with(base, {"write": {"max_ops": 0}})
    with pytest.raises(ConfigError, match="bogus"):
        Memory(base, bogus=1)


def test_a_settings_section_built_alone_is_refused_the_same_way():
    with pytest.raises(ConfigError, match=r"rrf_k=-1: .*> 0"):
        RetrievalConfig(rrf_k=-1)


@pytest.mark.parametrize("spec", ["nope", "test:7", "test:abc", "hash:0", ""])
def test_make_embedder_refuses_a_bad_spec_with_a_config_error(spec):
    with pytest.raises(ConfigError, match="embedder="):
        make_embedder(spec)


def test_good_settings_and_specs_still_pass():
    config = MemoryConfig(
        busy_timeout_ms=0, write={"max_ops": 1}, retrieval={"rrf_k": 0.5}, embedder="test:16"
    )
    assert (config.write.max_ops, config.retrieval.rrf_k, config.embedder) == (1, 0.5, "test:16")
    assert make_embedder("test:16").dim == 16
    assert make_embedder("local").name.startswith("local:")
