"""The shared SQL, as PostgreSQL reads it.

The store writes one SQL text per statement, in the subset SQLite and PostgreSQL share. What
still differs is mechanical and translated here, once per distinct statement (cached):
- `?` placeholders become `%s` (and a literal `%` becomes `%%`);
- `IS ?` / `IS NOT ?` (SQLite's null-safe equality) become `IS [NOT] DISTINCT FROM`;
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
_IN_LIST = re.compile(r"\b(NOT\s+)?IN\s*\(\s*SELECT\s+value\s+FROM\s+json_each\(\?\)\s*\)", re.IGNORECASE)
_CANDIDATES = re.compile(r"json_each\(\?\)\s+AS\s+(\w+)\s+CROSS\s+JOIN\b", re.IGNORECASE)
_JSON_EACH = re.compile(r"json_each\(([\w.]+|\?)\)\s+(?:AS\s+)?(\w+)", re.IGNORECASE)
_IS_PARAM = re.compile(r"\bIS\s+(NOT\s+)?\?")
_INDEXED_BY = re.compile(r"\s+INDEXED\s+BY\s+\w+", re.IGNORECASE)


class Translated(NamedTuple):
    sql: str
    lists: tuple[int, ...]  # positions of parameters bound as JSON arrays, passed as lists


def _code(segment: str) -> str:
    segment = _INDEXED_BY.sub("", segment)
    segment = _IS_PARAM.sub(lambda m: f"IS {'' if m.group(1) else 'NOT '}DISTINCT FROM ?", segment)
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
    position = 0
    last = 0
    for match in [*_LITERAL.finditer(sql), None]:
        end = match.start() if match else len(sql)
        code = _code(sql[last:end]).replace("%", "%%")
        for char in code:
            if char == "?":
                parts.append("%s")
                position += 1
            elif char == _LIST_MARK:
                parts.append("%s")
                lists.append(position)
                position += 1
            else:
                parts.append(char)
        if match:
            parts.append(match.group(0).replace("%", "%%"))
            last = match.end()
    return Translated("".join(parts), tuple(lists))


def bind(translated: Translated, params: Any) -> Any:
    """The parameters of one execution, list parameters decoded."""
    if not translated.lists or params is None:
        return params
    params = list(params)
    for position in translated.lists:
        value = params[position]
        params[position] = json.loads(value) if isinstance(value, str) else list(value)
    return params


class Row(tuple):
    """A row read by column name (row["content"]) or position, like sqlite3.Row."""

    __slots__ = ()
    _index: dict[str, int] = {}
    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type(
        "Row", (Row,), {"__slots__": (), "_names": names, "_index": {n: i for i, n in enumerate(names)}}
    )


def row_factory(cursor: Any) -> Any:
    names = tuple(column.name for column in cursor.description or ())
    cls = _row_class(names)
    return cls


def number(value: Decimal) -> int | float:
    """PostgreSQL's sum() of integers is numeric; SQLite's is an integer."""
    return int(value) if value == value.to_integral_value() else float(value)
