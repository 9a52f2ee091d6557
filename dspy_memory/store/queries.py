"""SQL predicates over `memories m` and conversion of rows to records.

Every predicate is built from bound parameters; user values never become SQL text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from dspy_memory.errors import InvalidInputError, MemoryNotFoundError
from dspy_memory.types import INT64_MAX, INT64_MIN, MEMORY_KINDS, MemoryRecord, MemoryStatus, Scope
from dspy_memory.util.text import shown, valid_text
from dspy_memory.util.timeutil import TimeLike, now_db, to_db

# A MemoryRecord's fields that are read as they are stored; rows are read by these names.
_RECORD_COLUMNS = (
    "id", "version", "user_id", "agent_id", "run_id", "content", "kind", "predicate", "confidence",
    "importance", "strength", "access_count", "last_accessed_at", "content_hash", "valid_at",
    "invalid_at", "created_at", "expired_at", "superseded_by", "archived_at", "expires_at",
)  # fmt: skip
MEMORY_COLUMNS = ", ".join(
    [
        "m.row_id",
        *(f"m.{name}" for name in _RECORD_COLUMNS),
        "m.metadata",
        "m.pinned",
        "subj.name AS subject",
        "obj.name AS object",
    ]
)
# The entity names MEMORY_COLUMNS reads (subj.name, obj.name).
ENTITY_JOINS = (
    "LEFT JOIN entities subj ON subj.id = m.subject_id LEFT JOIN entities obj ON obj.id = m.object_id"
)
MEMORY_FROM = f"memories m {ENTITY_JOINS}"
# Joins a list of row ids (bound as a JSON array) to their memories, driven by the list: without
# CROSS JOIN the planner may scan the scope's rows instead (measured: 140 ms instead of 1 ms).
CANDIDATES_FROM = "json_each(?) AS candidate CROSS JOIN memories m ON m.row_id = candidate.value"


def event_new_content(alias: str) -> str:
    """The new text of the event `alias` as it reads: an ADD event stores none when it is the
    text of the version it created (store/writes.py), which that version's row holds."""
    return (
        f"CASE WHEN {alias}.event = 'ADD' AND {alias}.new_content IS NULL THEN (SELECT v.content "
        f"FROM memories v WHERE v.id = {alias}.memory_id AND v.version = {alias}.version) "
        f"ELSE {alias}.new_content END"
    )


def link_sources(conn: Any, links: Iterable[tuple[str, str, str]]) -> None:
    """Link memories to episodes they came from ((memory id, episode id, time) each); a link
    that exists stays as it is. No ON CONFLICT: on SQLite `memory_sources` is a view
    (store/sqlite/schema_compact.py, V13), and SQLite takes no UPSERT on a view."""
    conn.executemany(
        "INSERT INTO memory_sources (memory_id, episode_id, created_at) SELECT ?, ?, ? "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_sources WHERE memory_id = ? AND episode_id = ?)",
        [(memory_id, episode_id, at, memory_id, episode_id) for memory_id, episode_id, at in links],
    )


M = TypeVar("M", bound=BaseModel)

_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class TimeView:
    """Reference times of a read: world time `as_of` and system time `known_at` (db format)."""

    as_of: str
    known_at: str

    @classmethod
    def at(cls, as_of: TimeLike | None = None, known_at: TimeLike | None = None) -> TimeView:
        now = now_db()
        known = to_db(known_at, name="known_at") if known_at is not None else now
        # "What did we believe at T" asks about the world at T too, unless as_of says otherwise.
        world = to_db(as_of, name="as_of") if as_of is not None else known
        return cls(as_of=world, known_at=known)


class Predicate:
    """An AND of SQL conditions with their parameters."""

    def __init__(self) -> None:
        self.clauses: list[str] = []
        self.params: list[Any] = []

    def add(self, clause: str, *params: Any) -> Predicate:
        self.clauses.append(clause)
        self.params.extend(params)
        return self

    def copy(self) -> Predicate:
        copied = Predicate()
        copied.clauses, copied.params = list(self.clauses), list(self.params)
        return copied

    @property
    def sql(self) -> str:
        return " AND ".join(f"({clause})" for clause in self.clauses) if self.clauses else "TRUE"


def scope_predicate(predicate: Predicate, scope: Scope | None, alias: str = "m") -> Predicate:
    """Rows of `scope` (docs/scopes.md). user_id is a wall: left out, it matches rows stored
    without a user, unless `scope.any_user`; left-out agent_id and run_id match any value.
    None: no scope condition at all (callers that opted into all scopes)."""
    if scope is None:
        return predicate
    if scope.user_id is None and not scope.any_user:
        predicate.add(f"{alias}.user_id IS NULL")
    for column in ("user_id", "agent_id", "run_id"):
        value = getattr(scope, column)
        if value is not None:
            predicate.add(f"{alias}.{column} = ?", value)
    return predicate


def unexpired(predicate: Predicate, alias: str = "m") -> Predicate:
    """Rows (of memories or episodes) not past their `expires_at` now, by the clock, whatever
    world or system time a read asks about: from the moment a memory expires no read returns
    it, before maintenance erases it (docs/governance.md#retention)."""
    return predicate.add(f"{alias}.expires_at IS NULL OR {alias}.expires_at > ?", now_db())


def not_about_expired(predicate: Predicate, column: str) -> Predicate:
    """Rows (events, feedback) whose memory `column` names has not expired: they quote it."""
    return predicate.add(
        f"NOT EXISTS (SELECT 1 FROM memories x WHERE x.id = {column} AND x.expires_at <= ?)", now_db()
    )


def unexpired_entity(alias: str = "e") -> tuple[str, str]:
    """(a condition on entities `alias`, its parameter): not named only by expired memories (an
    entity's name is content of the memories that name it)."""
    named = f"SELECT 1 FROM memories x WHERE (x.subject_id = {alias}.id OR x.object_id = {alias}.id)"
    return (
        f"NOT EXISTS ({named}) OR EXISTS ({named} AND (x.expires_at IS NULL OR x.expires_at > ?))",
        now_db(),
    )


def time_predicate(predicate: Predicate, view: TimeView | None) -> Predicate:
    if view is None:
        return predicate
    unexpired(predicate)
    predicate.add("m.valid_at IS NULL OR m.valid_at <= ?", view.as_of)
    predicate.add("m.invalid_at IS NULL OR m.invalid_at > ?", view.as_of)
    predicate.add("m.created_at <= ?", view.known_at)
    predicate.add("m.expired_at IS NULL OR m.expired_at > ?", view.known_at)
    return predicate


def kinds_predicate(predicate: Predicate, kinds: Iterable[str] | None) -> Predicate:
    if kinds is None:
        return predicate
    if isinstance(kinds, str):
        kinds = [kinds]
    if isinstance(kinds, (bytes, bytearray, Mapping)) or not isinstance(kinds, Iterable):
        raise InvalidInputError(
            f"kinds must be a list of memory kinds from {list(MEMORY_KINDS)}, not {type(kinds).__name__}"
        )
    kinds = list(kinds)
    unknown = [shown(kind) for kind in kinds if not isinstance(kind, str) or kind not in MEMORY_KINDS]
    if unknown:
        raise InvalidInputError(
            f"unknown memory kind(s) {', '.join(unknown)}; choose from {list(MEMORY_KINDS)}"
        )
    return predicate.add("m.kind IN (SELECT value FROM json_each(?))", json.dumps(kinds))


def metadata_predicate(predicate: Predicate, filters: dict[str, Any] | None, json_paths: Any) -> Predicate:
    """Filters on metadata keys: {"key": value}, {"key": None} (missing or null), or
    {"key": {"$in": [...], "$nin": [...], "$ne"|"$gt"|"$gte"|"$lt"|"$lte"|"$eq": v,
    "$exists": bool}}. Values are str, int (64-bit), finite float, bool or None. The SQL comes
    from the backend's `json_paths` (store/backend.py::JsonPaths)."""
    if filters is None:
        return predicate
    if not isinstance(filters, Mapping):
        raise InvalidInputError(
            f"filters must be a dict of metadata key -> condition, not {type(filters).__name__}"
        )
    for key, condition in filters.items():
        if not isinstance(key, str) or not key or '"' in key or "\\" in key or len(key) > 200:
            raise InvalidInputError(
                f"bad filter key {shown(key)}: use a metadata key name (1-200 characters) without "
                "quotes or backslashes"
            )
        valid_text(key, "a filter key")
        value_sql, value_params = json_paths.value(key)
        if (
            isinstance(condition, Mapping)
            and condition
            and all(isinstance(op, str) and op.startswith("$") for op in condition)
        ):
            for op, operand in condition.items():
                if op in _COMPARISONS:
                    _check_scalar(key, op, operand)
                    if operand is None and op in ("$eq", "$ne"):
                        negate = "NOT " if op == "$ne" else ""
                        predicate.add(f"{value_sql} IS {negate}NULL", *value_params)
                    else:
                        predicate.add(
                            json_paths.compare(value_sql, _COMPARISONS[op]),
                            *value_params,
                            json_paths.param(operand),
                        )
                elif op in ("$in", "$nin"):
                    if not isinstance(operand, (list, tuple, set, frozenset)):
                        raise InvalidInputError(f"filter {key!r}: {op} takes a list, got {shown(operand)}")
                    for item in operand:
                        _check_scalar(key, op, item)
                    sql, params = json_paths.one_of(value_sql, list(operand), negate=op == "$nin")
                    predicate.add(sql, *value_params, *params)
                elif op == "$exists":
                    if not isinstance(operand, bool):
                        raise InvalidInputError(f"filter {key!r}: $exists takes True or False")
                    sql, params = json_paths.exists(key)
                    predicate.add(sql if operand else f"NOT ({sql})", *params)
                else:
                    raise InvalidInputError(
                        f"filter {key!r}: unknown operator {shown(op)}; use one of "
                        f"{sorted([*_COMPARISONS, '$in', '$nin', '$exists'])}"
                    )
        else:
            _check_scalar(key, "=", condition)
            if condition is None:
                predicate.add(f"{value_sql} IS NULL", *value_params)
            else:
                predicate.add(json_paths.compare(value_sql, "="), *value_params, json_paths.param(condition))
    return predicate


def _check_scalar(key: str, op: str, value: Any) -> None:
    """A value metadata can hold and SQLite can compare: no NaN or infinity (not JSON), no
    integer beyond 64 bits (SQLite's range), no lone surrogate (not Unicode)."""
    if not isinstance(value, _SCALARS):
        raise InvalidInputError(
            f"filter {key!r} {op}: values must be str, int, float, bool or None, not {type(value).__name__}"
        )
    if isinstance(value, str):
        valid_text(value, f"filter {key!r} {op}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"filter {key!r} {op}: {shown(value)} is not a number metadata can hold")
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInputError(f"filter {key!r} {op}: {shown(value)} does not fit in 64 bits")


# What ranking needs of a candidate row, selected next to its score. The parameter is the
# reference time; SQLite computes the age so Python parses no timestamps on this path.
SIGNAL_COLUMNS = (
    "m.row_id, julianday(?) - julianday(coalesce(m.valid_at, m.created_at)), m.importance, m.strength, "
    "m.access_count, julianday(coalesce(m.last_accessed_at, m.created_at)), m.pinned"
)


class Candidate(NamedTuple):
    """A memory row found by one retrieval source: its raw score (higher is better) and what
    rescoring needs. Full records are built only for the rows that make the top k (building
    them for every candidate doubled the cost of the candidate queries)."""

    row_id: int
    score: float
    age_days: float  # from valid_at (else created_at) to the reference time
    importance: float
    strength: float
    recalls: int  # access_count
    recalled_jd: float  # the last recall (or, never recalled, when it was stored), a julian day
    pinned: int


def not_found(memory_id: str, scope: Scope | None) -> MemoryNotFoundError:
    where = "" if scope is None else f" in scope {scope.model_dump(exclude_none=True)}"
    if scope is not None and scope.user_id is None and not scope.any_user:
        where += " among memories stored without a user_id (pass user_id= to reach a user's)"
    return MemoryNotFoundError(f"no memory with id {memory_id!r}{where}")


def from_row(model: type[M], row: Any, **values: Any) -> M:
    """A pydantic model from a row, by column name: columns the model has, JSON columns
    ("metadata") decoded; `values` add or override fields."""
    fields = model.model_fields
    read = {name: row[name] for name in row.keys() if name in fields and name not in values}
    if isinstance(read.get("metadata"), str):
        read["metadata"] = json.loads(read["metadata"])
    return model(**read, **values)


def status_of(row: Any, view: TimeView) -> MemoryStatus:
    """A row's status at `view`; `row` reads valid_at, invalid_at, expired_at and archived_at
    by name. Archived: current, but forgotten by maintenance (searched only on request)."""
    if row["expired_at"] is not None and row["expired_at"] <= view.known_at:
        return "expired"
    if row["invalid_at"] is not None and row["invalid_at"] <= view.as_of:
        return "superseded"
    if row["valid_at"] is not None and row["valid_at"] > view.as_of:
        return "future"
    if row["archived_at"] is not None and row["archived_at"] <= view.known_at:
        return "archived"
    return "current"


def record_from_row(row: Any, view: TimeView) -> MemoryRecord:
    """Build a MemoryRecord from a row selected with MEMORY_COLUMNS. Timestamps stay strings:
    pydantic parses them twice as fast as Python does."""
    return MemoryRecord(
        **{name: row[name] for name in _RECORD_COLUMNS},
        subject=row["subject"],
        object=row["object"],
        metadata=json.loads(row["metadata"]),
        pinned=bool(row["pinned"]),
        status=status_of(row, view),
    )
