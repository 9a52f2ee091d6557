"""The shared SQL, as PostgreSQL reads it.

The store writes one SQL text per statement, in the subset SQLite and PostgreSQL share. What
still differs is mechanical and translated here, once per distinct statement (cached):
- `?` placeholders become `%s` (and a literal `%` becomes `%%`);
- `x IS ?` / `x IS NOT ?` (SQLite's null-safe equality) become `x IS [NOT] NULL` when the value
  is None and `x = %s` / `x <> %s` otherwise, decided per execution (`IS NOT DISTINCT FROM` would
  say the same, but no index can serve it);
- list parameters, bound as a JSON array: `x IN (SELECT value FROM json_each(?))` becomes
  `x = ANY(%s)` and `json_each(?) AS c CROSS JOIN ...` becomes `unnest(%s::bigint[])`, with the
  parameter decoded to a list; `json_each(<column or ?>) alias` becomes
  `jsonb_array_elements_text(...)`;
- `INDEXED BY` hints are dropped.
SQLite functions the shared SQL calls (julianday, instr, json_extract, json_remove,
json_array_length) exist in the PostgreSQL schema as SQL functions (store/postgres/schema.py).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_LIST_MARK = "\x00"
_IS_MARK, _IS_NOT_MARK = "\x01", "\x02"
_IN_LIST = re.compile(r"\b(NOT\s+)?IN\s*\(\s*SELECT\s+value\s+FROM\s+json_each\(\?\)\s*\)", re.IGNORECASE)
_CANDIDATES = re.compile(r"json_each\(\?\)\s+AS\s+(\w+)\s+CROSS\s+JOIN\b", re.IGNORECASE)
_JSON_EACH = re.compile(r"json_each\(([\w.]+|\?)\)\s+(?:AS\s+)?(\w+)", re.IGNORECASE)
_IS_PARAM = re.compile(r"\bIS\s+(NOT\s+)?\?")
_INDEXED_BY = re.compile(r"\s+INDEXED\s+BY\s+\w+", re.IGNORECASE)


class Translated(NamedTuple):
    sql: str  # with a mark where a null-safe comparison's operator depends on the value
    lists: tuple[int, ...]  # positions of parameters bound as JSON arrays, passed as lists
    nullable: tuple[tuple[int, bool], ...]  # (position, negated) of `IS ?` parameters


def _code(segment: str) -> str:
    segment = _INDEXED_BY.sub("", segment)
    segment = _IS_PARAM.sub(lambda m: _IS_NOT_MARK if m.group(1) else _IS_MARK, segment)
    segment = _IN_LIST.sub(lambda m: f"{'<> ALL' if m.group(1) else '= ANY'}({_LIST_MARK})", segment)
    segment = _CANDIDATES.sub(
        lambda m: f"unnest({_LIST_MARK}::bigint[]) AS {m.group(1)}(value) JOIN", segment
    )
    return _JSON_EACH.sub(
        lambda m: f"jsonb_array_elements_text({m.group(1)}::jsonb) AS {m.group(2)}(value)", segment
    )


@lru_cache(maxsize=4096)
def translate(sql: str) -> Translated:
    """`sql` (shared, SQLite-style placeholders) as PostgreSQL and psycopg read it."""
    parts: list[str] = []
    lists: list[int] = []
    nullable: list[tuple[int, bool]] = []
    position = 0
    last = 0
    for match in [*_LITERAL.finditer(sql), None]:
        end = match.start() if match else len(sql)
        code = _code(sql[last:end]).replace("%", "%%")
        for char in code:
            if char == "?":
                parts.append("%s")
            elif char == _LIST_MARK:
                parts.append("%s")
                lists.append(position)
            elif char in (_IS_MARK, _IS_NOT_MARK):
                parts.append(char)
                nullable.append((position, char == _IS_NOT_MARK))
            else:
                parts.append(char)
                continue
            position += 1
        if match:
            parts.append(match.group(0).replace("%", "%%"))
            last = match.end()
    return Translated("".join(parts), tuple(lists), tuple(nullable))


@lru_cache(maxsize=4096)
def _with_nulls(sql: str, nulls: tuple[bool, ...]) -> str:
    """`sql` with each null-safe comparison written for whether its value is None."""
    pieces = iter(nulls)
    out = []
    for char in sql:
        if char == _IS_MARK:
            out.append("IS NULL" if next(pieces) else "= %s")
        elif char == _IS_NOT_MARK:
            out.append("IS NOT NULL" if next(pieces) else "<> %s")
        else:
            out.append(char)
    return "".join(out)


def prepared(translated: Translated, params: Any) -> tuple[str, Any]:
    """The SQL and parameters of one execution: list parameters decoded, null-safe comparisons
    resolved for the values given."""
    if params is None or not (translated.lists or translated.nullable):
        return translated.sql, params
    params = list(params)
    for position in translated.lists:
        value = params[position]
        params[position] = json.loads(value) if isinstance(value, str) else list(value)
    if not translated.nullable:
        return translated.sql, params
    nulls = tuple(params[position] is None for position, _ in translated.nullable)
    dropped = {position for (position, _), null in zip(translated.nullable, nulls) if null}
    return _with_nulls(translated.sql, nulls), [value for i, value in enumerate(params) if i not in dropped]


class Row(tuple[Any, ...]):
    """A row read by column name (row["content"]) or position, like sqlite3.Row."""

    __slots__ = ()
    _index: dict[str, int] = {}
    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    index = {n: i for i, n in enumerate(names)}
    get = tuple.__getitem__

    # The names bound here, not looked up on the class: a write of 1,000 raw turns reads about
    # 100,000 values by name, and the lookups were a tenth of its Python time.
    def __getitem__(self: Row, key: Any) -> Any:
        return get(self, index[key]) if isinstance(key, str) else get(self, key)

    return type(
        "Row", (Row,), {"__slots__": (), "_names": names, "_index": index, "__getitem__": __getitem__}
    )


def row_factory(cursor: Any) -> Any:
    names = tuple(column.name for column in cursor.description or ())
    cls = _row_class(names)
    return cls


def number(value: Decimal) -> int | float:
    """PostgreSQL's sum() of integers is numeric; SQLite's is an integer."""
    return int(value) if value == value.to_integral_value() else float(value)
