"""Families of bad (and odd but good) values for the bad-input catalogue: text, metadata,
times, ids, counts, filters, kinds, recipes, block labels, and tool calls as an LM sends them."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any


def _circular() -> dict[str, Any]:
    data: dict[str, Any] = {"a": 1}
    data["self"] = data
    return data


def _nested(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        data = {"x": data}
    return data


class _BrokenZone(tzinfo):
    def utcoffset(self, dt: Any) -> timedelta:
        raise RuntimeError("this zone is broken")

    def dst(self, dt: Any) -> timedelta:
        return timedelta(0)


class _HugeZone(tzinfo):
    def utcoffset(self, dt: Any) -> timedelta:
        return timedelta(hours=30)

    def dst(self, dt: Any) -> timedelta:
        return timedelta(0)


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


NAN, INF = float("nan"), float("inf")
HUGE = "word " * 200_000  # 1 MB

# Text: what may be stored as given, and what must be refused.
GOOD_TEXT = {
    "plain": "Ada moved to Denver.",
    "unicode": "café naïve 日本語 🙂 \U0010ffff",
    "nul": "a\x00b",
    "only-nul": "\x00",
    "controls": "bell\x07 esc\x1b[31m red\r\n\ttab\x7f",
    "bidi": "\u202eevil\u202c \ufeffbom \u200bzero-width",
    "huge": HUGE,
    "quotes": "He said \"NEAR(a b)\" OR 'x' -- ; DROP TABLE memories;",
}
BAD_TEXT = {
    "lone-high-surrogate": "\ud800",
    "lone-low-surrogate": "a\udfffb",
    "split-pair": "smile \ud83d\ude00",
    "surrogate-escape": b"caf\xe9".decode("utf-8", "surrogateescape"),
    "empty": "",
    "blank": "  \n\t ",
    "none": None,
    "int": 5,
    "float-nan": NAN,
    "bool": True,
    "bytes": b"bytes",
    "bytearray": bytearray(b"x"),
    "list-of-int": [1, 2],
    "object": object(),
    "set": {"a"},
}
METADATA_GOOD = {
    "empty": {},
    "scalars": {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None},
    "nested": {"a": {"b": [1, {"c": None}], "d": "é"}},
    "int64-edges": {"hi": 2**63 - 1, "lo": -(2**63)},
    "big-float": {"f": 1e308, "tiny": 5e-324},
    "empty-key": {"": "empty key"},
    "nul-value": {"k": "a\x00b"},
    "tuple": {"t": (1, 2)},
    "odd-keys": {'quote"key': 1, "back\\slash": 2, "dots.in.key": 3, "$dollar": 4},
    "deep-16": _nested(16),
}
METADATA_BAD = {
    "nan": {"x": NAN},
    "inf": {"x": INF},
    "-inf": {"x": -INF},
    "nan-in-list": {"x": [1, NAN]},
    "inf-nested": {"x": {"y": INF}},
    "int-key": {1: "a"},
    "none-key": {None: "a"},
    "tuple-key": {(1, 2): "a"},
    "bool-key": {True: "a"},
    "int-2**64": {"x": 2**64},
    "int--2**70": {"x": -(2**70)},
    "int-10**400": {"x": 10**400},
    "surrogate-key": {"\ud800": 1},
    "surrogate-value": {"x": "\ud800"},
    "surrogate-deep": {"x": {"y": ["ok", "\udfff"]}},
    "object": {"x": object()},
    "set": {"x": {1, 2}},
    "bytes": {"x": b"raw"},
    "datetime": {"x": datetime(2024, 1, 1)},
    "decimal": {"x": Decimal("1.5")},
    "deep-200": _nested(200),
    "deep-5000": _nested(5000),
    "circular": _circular(),
    "unprintable": {"x": _Unprintable()},
    "not-a-dict": "topic=x",
    "list": [("a", 1)],
    "int": 5,
}
TIME_GOOD = {
    "none": None,
    "date-str": "2024-03-01",
    "offset": "2024-03-01T09:30:00+02:00",
    "zulu": "2024-03-01T07:30:00Z",
    "epoch": 1709278200,
    "epoch-zero": 0,
    "epoch-negative": -86400.5,
    "date": date(2024, 1, 2),
    "naive": datetime(2024, 5, 1, 12, 0),
    "aware": datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5))),
    "year-999": "0999-06-01",
    "year-1": "0001-01-01",
    "year-9999": "9999-12-31",
    "max-plus-1h": "9999-12-31T23:59:59+01:00",
    "odd-offset": "2024-03-01T00:00:00+23:59",
    "padded": "  2024-03-01  ",
    "datetime-max": datetime.max,
    "epoch-year-1": -62135596800,
    "week-date": "2024-W10-1",
}
TIME_BAD = {
    "1e20": 1e20,
    "-1e20": -1e20,
    "2**70": 2**70,
    "-1e11": -1e11,
    "nan": NAN,
    "inf": INF,
    "max-minus-1h": "9999-12-31T23:59:59-01:00",
    "min-plus-1h": "0001-01-01T00:00:00+01:00",
    "datetime-min-aware": datetime.min.replace(tzinfo=timezone(timedelta(hours=1))),
    "year-0": "0000-01-01",
    "year-10000": "10000-01-01",
    "words": "yesterday",
    "empty": "",
    "bad-month": "2024-13-45",
    "bad-hour": "2024-03-01T25:00",
    "offset-24h": "2024-03-01T00:00:00+24:00",
    "surrogate": "2024-03-01\ud800",
    "nul": "2024-03-01\x00",
    "long-digits": "2" * 10_000,
    "bool": True,
    "object": object(),
    "list": [2024, 3, 1],
    "bytes": b"2024-03-01",
    "decimal": Decimal("1709278200"),
    "broken-zone": datetime(2024, 1, 1, tzinfo=_BrokenZone()),
    "unprintable": _Unprintable(),
    "30h-zone": datetime(2024, 1, 1, tzinfo=_HugeZone()),
}
ID_GOOD = {"plain": "ada2", "int": 7, "emoji": "🙂 user", "nul": "a\x00b", "spaces": "  padded  "}
ID_BAD = {
    "surrogate": "ad\ud800a",
    "empty": "",
    "blank": "   ",
    "bool": True,
    "float": 1.5,
    "object": object(),
    "bytes": b"ada",
    "list": ["ada"],
    "too-long": "x" * 257,
}
COUNT_BAD = {
    "zero": 0,
    "negative": -1,
    "float": 1.5,
    "str": "5",
    "bool": True,
    "none": None,
    "2**70": 2**70,
    "nan": NAN,
    "inf": INF,
    "object": object(),
    "unprintable": _Unprintable(),
}
FILTERS_GOOD = {
    "eq": {"topic": "seed"},
    "null": {"missing": None},
    "ops": {"n": {"$gte": 1, "$lt": 5, "$ne": None}},
    "in": {"topic": {"$in": ["seed", "other"]}},
    "nin-set": {"topic": {"$nin": {"x"}}},
    "exists": {"topic": {"$exists": True}},
    "int64": {"n": {"$lt": 2**63 - 1}},
    "big-float": {"n": {"$lt": 1e308}},
    "unicode": {"topic": "café 🙂"},
    "bool": {"flag": True},
    "empty": {},
}
FILTERS_BAD = {
    "2**70": {"n": 2**70},
    "gt-2**70": {"n": {"$gt": 2**70}},
    "lt--2**64": {"n": {"$lt": -(2**64)}},
    "in-2**70": {"n": {"$in": [1, 2**70]}},
    "nan": {"n": NAN},
    "inf": {"n": {"$lte": INF}},
    "in-nan": {"n": {"$in": [NAN]}},
    "surrogate-value": {"topic": "\ud800"},
    "surrogate-in": {"topic": {"$in": ["\udfff"]}},
    "surrogate-key": {"\ud800": 1},
    "int-key": {1: "a"},
    "empty-key": {"": 1},
    "quote-key": {'a"b': 1},
    "long-key": {"k" * 300: 1},
    "list-value": {"topic": ["seed"]},
    "empty-condition": {"topic": {}},
    "plain-dict": {"topic": {"a": 1}},
    "unknown-op": {"topic": {"$regex": ".*"}},
    "in-not-list": {"topic": {"$in": "seed"}},
    "in-objects": {"topic": {"$in": [object()]}},
    "exists-str": {"topic": {"$exists": "yes"}},
    "gt-list": {"n": {"$gt": [1]}},
    "str": "topic=seed",
    "list": [("topic", "seed")],
    "object-value": {"topic": object()},
}
KINDS_GOOD = {"str": "fact", "list": ["fact", "turn"], "tuple": ("turn",), "set": {"turn"}, "empty": []}
KINDS_BAD = {
    "unknown": ["bogus"],
    "none-item": [None],
    "int": 5,
    "nested": [["fact"]],
    "surrogate": ["\ud800"],
    "object": [object()],
    "dict": {"fact": 1},
    "bytes": b"fact",
}
RECIPES_BAD = {
    "unknown": "bogus",
    "none": None,
    "int": 5,
    "empty": "",
    "surrogate": "\ud800",
    "list": ["hybrid"],
}
LABEL_BAD = {
    "empty": "",
    "long": "a" * 65,
    "space": "bad label",
    "path": "../etc",
    "surrogate": "\ud800",
    "none": None,
    "int": 5,
    "accented": "ünï",
}


# Tool calls as an LM sends them: {case: (tool, arguments)}.
TOOL_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "recall ok": ("recall", {"query": "tea"}),
    "recall no args": ("recall", {}),
    "recall extra arg": ("recall", {"query": "tea", "user_id": "bob"}),
    "recall query null": ("recall", {"query": None}),
    "recall query int": ("recall", {"query": 42}),
    "recall query list": ("recall", {"query": ["tea"]}),
    "recall query dict": ("recall", {"query": {"text": "tea"}}),
    "recall query surrogate": ("recall", {"query": "tea \ud83d"}),
    "recall query huge": ("recall", {"query": HUGE}),
    "recall k str": ("recall", {"query": "tea", "k": "3"}),
    "recall k word": ("recall", {"query": "tea", "k": "three"}),
    "recall k negative": ("recall", {"query": "tea", "k": -4}),
    "recall k float": ("recall", {"query": "tea", "k": 2.5}),
    "recall k huge": ("recall", {"query": "tea", "k": 10**30}),
    "recall k null": ("recall", {"query": "tea", "k": None}),
    "recall k nan": ("recall", {"query": "tea", "k": NAN}),
    "recall as_of ok": ("recall", {"query": "tea", "as_of": "2024-01-01"}),
    "recall as_of empty": ("recall", {"query": "tea", "as_of": ""}),
    "recall as_of words": ("recall", {"query": "tea", "as_of": "last week"}),
    "recall as_of year 999": ("recall", {"query": "tea", "as_of": "0999-01-01"}),
    "recall as_of overflow": ("recall", {"query": "tea", "as_of": "9999-12-31T23:59:59-01:00"}),
    "recall as_of epoch huge": ("recall", {"query": "tea", "as_of": 1e20}),
    "recall as_of surrogate": ("recall", {"query": "tea", "as_of": "\ud800"}),
    "recall as_of list": ("recall", {"query": "tea", "as_of": ["2024"]}),
    "remember ok": ("remember", {"content": "Ada owns a red bike."}),
    "remember empty": ("remember", {"content": ""}),
    "remember null": ("remember", {"content": None}),
    "remember int": ("remember", {"content": 7}),
    "remember list": ("remember", {"content": ["a", "b"]}),
    "remember dict": ("remember", {"content": {"fact": "x"}}),
    "remember surrogate": ("remember", {"content": "bad \udfff text"}),
    "remember nul": ("remember", {"content": "nul \x00 text"}),
    "remember missing": ("remember", {}),
    "revise unknown id": ("revise", {"memory_id": "zzzzzzzz", "content": "x", "reason": "r"}),
    "revise short id": ("revise", {"memory_id": "ab", "content": "x", "reason": "r"}),
    "revise id null": ("revise", {"memory_id": None, "content": "x", "reason": "r"}),
    "revise id int": ("revise", {"memory_id": 12345678, "content": "x", "reason": "r"}),
    "revise id surrogate": (
        "revise",
        {"memory_id": "\ud800\ud800\ud800\ud800", "content": "x", "reason": "r"},
    ),
    "revise id wildcard": ("revise", {"memory_id": "%%%%", "content": "x", "reason": "r"}),
    "revise id underscore": ("revise", {"memory_id": "____", "content": "x", "reason": "r"}),
    "revise missing reason": ("revise", {"memory_id": "zzzzzzzz", "content": "x"}),
    "forget empty": ("forget", {"memory_id": ""}),
    "forget brackets": ("forget", {"memory_id": "[zzzzzzzz]"}),
    "forget dict": ("forget", {"memory_id": {"id": "x"}}),
    "forget glob": ("forget", {"memory_id": "****"}),
    "history unknown": ("memory_history", {"memory_id": "zzzzzzzz"}),
    "history null": ("memory_history", {"memory_id": None}),
    "append ok": ("core_memory_append", {"label": "human", "text": "Likes tea."}),
    "append surrogate": ("core_memory_append", {"label": "human", "text": "\ud800"}),
    "append missing block": ("core_memory_append", {"label": "nope", "text": "x"}),
    "append bad label": ("core_memory_append", {"label": "Human Notes!", "text": "x"}),
    "append label surrogate": ("core_memory_append", {"label": "\ud800", "text": "x"}),
    "append label null": ("core_memory_append", {"label": None, "text": "x"}),
    "append text int": ("core_memory_append", {"label": "human", "text": 5}),
    "append huge": ("core_memory_append", {"label": "human", "text": HUGE}),
    "replace ok": ("core_memory_replace", {"label": "human", "old": "Name", "new": "Name"}),
    "replace missing old": ("core_memory_replace", {"label": "human", "old": "zzz", "new": "x"}),
    "replace new surrogate": ("core_memory_replace", {"label": "human", "old": "Name", "new": "\ud800"}),
    "replace old null": ("core_memory_replace", {"label": "human", "old": None, "new": "x"}),
    "replace new list": ("core_memory_replace", {"label": "human", "old": "Name", "new": ["x"]}),
}
