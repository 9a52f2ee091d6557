"""Where MemoryConfig's settings come from besides keywords: TOML files and DSPY_MEMORY_*
environment variables (read by pydantic-settings, imported only when needed)."""

from __future__ import annotations

import difflib
import functools
import logging
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspy_memory.config_errors import toml_errors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from dspy_memory.config import MemoryConfig

ENV_PREFIX = "DSPY_MEMORY_"
logger = logging.getLogger("dspy_memory")


def read_environment(
    config: type[MemoryConfig], env: Mapping[str, str], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The settings of `env` (and of the TOML file its DSPY_MEMORY_CONFIG names), `overrides`
    on top; unknown DSPY_MEMORY_* variables are warned about."""
    toml_path = env.get(ENV_PREFIX + "CONFIG")
    from_file = toml_settings(Path(toml_path)) if toml_path else {}
    _warn_unknown(env, config)
    token = _ENVIRON.set((env, from_file))
    try:
        loaded = _env_settings_class(config)(**overrides)
    finally:
        _ENVIRON.reset(token)
    return loaded.model_dump()


# DSPY_MEMORY_* variables that are not settings: read by the set-up scripts and by the store.
OTHER_VARIABLES = frozenset({"CONFIG", "VENV", "SQLITE_DRIVER"})
_ENVIRON: ContextVar[tuple[Mapping[str, str], dict[str, Any]]] = ContextVar("dspy_memory_environ")


@functools.cache
def _env_settings_class(config: type[MemoryConfig]) -> type[MemoryConfig]:
    """MemoryConfig as a pydantic-settings class reading the mapping in _ENVIRON (built on
    first use: pydantic-settings costs ~35 ms to import, and most programs never read env)."""
    from pydantic_settings import (
        BaseSettings,
        EnvSettingsSource,
        InitSettingsSource,
        PydanticBaseSettingsSource,
        SettingsConfigDict,
    )
    from pydantic_settings.sources.utils import parse_env_vars

    class MappingEnvSource(EnvSettingsSource):
        """Environment variables from a given mapping, so from_env(environ) needs no os.environ."""

        def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
            self._environ = environ
            super().__init__(settings_cls)

        def _load_env_vars(self) -> Mapping[str, str | None]:
            # The extension point pydantic-settings' own DotEnvSettingsSource overrides.
            return parse_env_vars(
                self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
            )

    class FromEnv(BaseSettings, config):  # type: ignore[valid-type,misc]  # a class given at run time
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX,
            env_nested_delimiter="__",
            extra="ignore",
            nested_model_default_partial_update=True,
        )

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            environ, from_file = _ENVIRON.get()
            toml = InitSettingsSource(settings_cls, init_kwargs=from_file)
            return init_settings, MappingEnvSource(settings_cls, environ), toml

    return FromEnv


def toml_settings(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle, toml_errors(path):
        loaded = tomllib.load(handle)
    return loaded.get("dspy_memory", loaded)


def _warn_unknown(env: Mapping[str, str], config: type[MemoryConfig]) -> None:
    fields = {name.upper() for name in config.model_fields}
    for key in env:
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :]
        if name.split("__")[0] in fields or name in OTHER_VARIABLES:
            continue
        close = difflib.get_close_matches(name, [*fields, *OTHER_VARIABLES], n=1)
        hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
        logger.warning("%s is not a dspy-memory setting and is ignored%s", key, hint)


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged
