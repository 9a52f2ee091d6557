"""Refused settings as one ConfigError: a line per setting, named by its dotted path
("write.max_ops"), saying what it may be. Settings models derive from CheckedSettings, so a
MemoryConfig built directly, from TOML or from the environment refuses the same way."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from typing_extensions import Self

from dspy_memory.errors import ConfigError
from dspy_memory.util.text import shown

# Values never repeated in an error: they may be secrets (a key, a password in a URL).
UNSHOWN = frozenset({"encryption_key", "path", "store", "lm_api_base"})
RANGE_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of"}
)
LENGTH_ERRORS = frozenset({"string_too_short", "string_too_long", "too_short", "too_long"})
_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("multiple_of", "a multiple of"))
_LENGTHS = (("min_length", "at least"), ("max_length", "at most"))


# Set while a settings model validates: the models nested in it (built through their
# __init__, as they define one) raise pydantic's error, which pydantic places under their
# setting; only the outermost one turns it into a ConfigError.
_VALIDATING: ContextVar[bool] = ContextVar("dspy_memory_validating_settings", default=False)


class CheckedSettings(BaseModel):
    """A pydantic model whose refusals are ConfigErrors, not pydantic's multi-line dump."""

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic derives from the fields

        def __init__(self, /, **data: Any) -> None:
            with _refusals(type(self)):
                super().__init__(**data)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        with _refusals(cls):
            return super().model_validate(obj, *args, **kwargs)


@contextmanager
def _refusals(model: type[BaseModel]) -> Iterator[None]:
    if _VALIDATING.get():
        yield
        return
    token = _VALIDATING.set(True)
    try:
        yield
    except ValidationError as exc:
        raise refused(exc, model) from None
    finally:
        _VALIDATING.reset(token)


def refused(exc: ValidationError, model: type[BaseModel]) -> ConfigError:
    """One ConfigError for every setting `exc` refused; a setting refused several ways (a
    value that is none of a union's types) is one line."""
    problems: dict[str, list[str]] = {}
    shown_as: dict[str, str] = {}
    for error in exc.errors():
        name, field, parent = _setting(model, error["loc"])
        why = _why(error, field, known=list(parent.model_fields), list_known=parent is not model)
        if why in problems.setdefault(name, []):
            continue
        problems[name].append(why)
        if error["type"] != "extra_forbidden" and name not in shown_as:
            secret = name.split(".")[-1] in UNSHOWN
            shown_as[name] = "" if secret or error["type"] == "missing" else "=" + shown(error["input"])
    lines = [f"{name}{shown_as.get(name, '')}: {' or '.join(whys)}" for name, whys in problems.items()]
    if len(lines) == 1:
        message = f"bad setting {lines[0]}"
    else:
        message = "\n".join([f"{len(lines)} bad settings:", *(f"- {line}" for line in lines)])
    return ConfigError(message, settings=list(problems))


def _setting(
    model: type[BaseModel], loc: tuple[int | str, ...]
) -> tuple[str, FieldInfo | None, type[BaseModel]]:
    """The dotted name of the setting at `loc`, its field (None for an unknown one) and the
    model it belongs to. Parts of `loc` below a setting that is not a model (a union member's
    type) are left out of the name, except list indexes."""
    parts: list[str] = []
    current: type[BaseModel] | None = model
    parent = model
    field: FieldInfo | None = None
    for part in loc:
        if current is not None:
            parent = current
            parts.append(str(part))
            field = current.model_fields.get(str(part))
            annotation = field.annotation if field is not None else None
            is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
            current = annotation if is_model else None  # type: ignore[assignment]  # narrowed above
        elif isinstance(part, int):
            parts[-1] += f"[{part}]"
    return ".".join(parts), field, parent


def _why(error: Any, field: FieldInfo | None, *, known: list[str], list_known: bool) -> str:
    """What is wrong and what is allowed. An unknown setting gets the nearest of `known` (the
    settings of its section), else, in a nested section (`list_known`), all of them."""
    kind = error["type"]
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
        if close:
            return f"unknown setting; did you mean {close[0]!r}?"
        return f"unknown setting (known here: {', '.join(known)})" if list_known else "unknown setting"
    if kind == "missing":
        return "required"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    allowed = _allowed(field)
    if kind in RANGE_ERRORS or kind in LENGTH_ERRORS:
        return f"out of range (allowed: {allowed})" if allowed else error["msg"]
    why = error["msg"].removeprefix("Input ")
    why = why[:1].lower() + why[1:]
    return f"{why} (allowed: {allowed})" if allowed else why


def _allowed(field: FieldInfo | None) -> str:
    """What a field's constraints allow: ">= 0 and <= 1", "at least 1 and at most 200 characters"."""
    if field is None:
        return ""
    bounds = [
        f"{symbol} {getattr(meta, attr)}"
        for meta in field.metadata
        for attr, symbol in _BOUNDS
        if getattr(meta, attr, None) is not None
    ]
    lengths = [
        f"{words} {getattr(meta, attr)}"
        for meta in field.metadata
        for attr, words in _LENGTHS
        if getattr(meta, attr, None) is not None
    ]
    if lengths:
        bounds.append(" and ".join(lengths) + " characters")
    return " and ".join(bounds)


def embedder_spec(spec: str | None) -> str | None:
    """Validates the `embedder` setting: a spec that names an embedder (embed/__init__.py)."""
    if spec is not None:
        from dspy_memory.embed import spec_problem  # embedders import numpy: not for every config

        problem = spec_problem(spec)
        if problem is not None:
            raise ValueError(problem)
    return spec


@contextmanager
def toml_errors(path: Path) -> Iterator[None]:
    """A TOML file that does not parse is a ConfigError naming it."""
    try:
        yield
    except ValueError as exc:  # tomllib's TOMLDecodeError
        raise ConfigError(f"cannot read settings from {path}: {exc}") from None
