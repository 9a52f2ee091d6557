"""The bad-input catalogue: every entry point crossed with the value families of
`bad_values`, and a runner that records each outcome (accepted, refused with which error, or
crashed) and checks the file after each one. `python -m tests.bad_input_catalogue [-v]` prints
counts by outcome; the outcome each case must have is in tests/data/bad_input_expected.json
(`python -m tests.bad_input_expected --write` regenerates it: tests/bad_input_expected.py)."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dspy_memory import Memory
from dspy_memory.errors import DSPyMemoryError
from dspy_memory.types import Scope

from .bad_values import (
    BAD_TEXT,
    COUNT_BAD,
    FILTERS_BAD,
    FILTERS_GOOD,
    GOOD_TEXT,
    HUGE,
    ID_BAD,
    ID_GOOD,
    KINDS_BAD,
    KINDS_GOOD,
    LABEL_BAD,
    METADATA_BAD,
    METADATA_GOOD,
    NAN,
    RECIPES_BAD,
    TIME_BAD,
    TIME_GOOD,
    TOOL_CALLS,
)

TABLES = (
    "episodes",
    "memories",
    "memory_sources",
    "memory_events",
    "entities",
    "blocks",
    "block_versions",
)
# A tool's failure that escaped as an unexpected exception (tools.py turns those into
# "error: TypeName: ..." so a model never sees a traceback): a crash all the same.
UNEXPECTED_TOOL_ERROR = re.compile(r"^error: [A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b:")


class Env:
    """What cases act on: the memory, its tools bound to "ada", ids of seeded memories."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # forget too (opted in): its bad inputs are cases as well.
        self.tools = {tool.name: tool for tool in memory.tools(user_id="ada", allow_forget=True)}
        memory.add(
            [
                "Ada lives in Denver and likes hiking.",
                "Ada's favourite tea is Earl Grey.",
                "The river NEAR the mill floods in spring.",
            ],
            user_id="ada",
            metadata={"topic": "seed", "n": 1},
        )
        memory.add(["Bob lives in Boston.", "Bob's tea is green."], user_id="bob")
        self.ids = [record.id for record in memory.get_all(user_id="ada")]
        memory.blocks.set("human", "Name: Ada", user_id="ada", char_limit=500)

    @property
    def mid(self) -> str:
        return self.ids[0]

    @property
    def short(self) -> str:
        return self.ids[1][:8]


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[Env], Any]
    tool: bool = False


def _write_cases(case: Callable[..., None]) -> None:
    # -- add: content, message fields, metadata, times, scopes -----------------------------------
    for label, text in {**GOOD_TEXT, **BAD_TEXT}.items():
        case(f"add text {label}", lambda e, t=text: e.memory.add(t, user_id="ada"))
        case(
            f"add message content {label}",
            lambda e, t=text: e.memory.add({"role": "user", "content": t}, user_id="ada"),
        )
        case(f"add list [ok, {label}]", lambda e, t=text: e.memory.add(["fine text", t], user_id="ada"))
    for label, text in {**BAD_TEXT, "plain": "Ada"}.items():
        case(
            f"add message name {label}",
            lambda e, t=text: e.memory.add({"content": "hi", "name": t}, user_id="ada"),
        )
        case(
            f"add message role {label}",
            lambda e, t=text: e.memory.add({"content": "hi", "role": t}, user_id="ada"),
        )
    for label, source in {"bogus": "bogus", "int": 3, "surrogate": "\ud800", "list": ["text"]}.items():
        case(
            f"add message source {label}",
            lambda e, s=source: e.memory.add({"content": "hi", "source": s}, user_id="ada"),
        )
    case("add json dict", lambda e: e.memory.add({"event": "login", "n": 2}, user_id="ada"))
    case("add json dict nan", lambda e: e.memory.add({"event": NAN}, user_id="ada"))
    case("add json dict surrogate", lambda e: e.memory.add({"event": "\ud800"}, user_id="ada"))
    case("add json dict object", lambda e: e.memory.add({"event": object()}, user_id="ada"))
    case("add json dict int key", lambda e: e.memory.add({1: "a"}, user_id="ada"))
    case("add empty list", lambda e: e.memory.add([], user_id="ada"))
    case("add tuple", lambda e: e.memory.add(("one", "two"), user_id="ada"))
    case("add generator", lambda e: e.memory.add((t for t in ["x"]), user_id="ada"))
    case("add message extra nan", lambda e: e.memory.add({"content": "hi", "weird": NAN}, user_id="ada"))
    case(
        "add message extra surrogate key",
        lambda e: e.memory.add({"content": "hi", "\ud800": 1}, user_id="ada"),
    )
    case(
        "add message metadata not dict",
        lambda e: e.memory.add({"content": "hi", "metadata": [1]}, user_id="ada"),
    )
    case(
        "add message metadata nan",
        lambda e: e.memory.add({"content": "hi", "metadata": {"x": NAN}}, user_id="ada"),
    )
    case("add list with bad item", lambda e: e.memory.add(["ok", 5], user_id="ada"))
    case("add list with dict w/o content", lambda e: e.memory.add(["ok", {"role": "user"}], user_id="ada"))
    for label, meta in {**METADATA_GOOD, **METADATA_BAD}.items():
        case(
            f"add metadata {label}",
            lambda e, m=meta: e.memory.add("metadata case", user_id="ada", metadata=m),
        )
    for label, at in {**TIME_GOOD, **TIME_BAD}.items():
        case(f"add at {label}", lambda e, a=at: e.memory.add("timed case", user_id="ada", at=a))
    for label in ("year-999", "max-minus-1h", "1e20", "nan", "surrogate", "object", "broken-zone"):
        at = {**TIME_GOOD, **TIME_BAD}[label]
        case(
            f"add message at {label}",
            lambda e, a=at: e.memory.add(["first is fine", {"content": "second", "at": a}], user_id="ada"),
        )
    for label, uid in {**ID_GOOD, **ID_BAD}.items():
        case(f"add user_id {label}", lambda e, u=uid: e.memory.add("scoped case", user_id=u))
    case("add no scope", lambda e: e.memory.add("no scope"))
    case("add agent_id surrogate", lambda e: e.memory.add("x", user_id="ada", agent_id="\udc00"))
    case("add run_id object", lambda e: e.memory.add("x", user_id="ada", run_id=object()))
    case("add infer=True without LM", lambda e: e.memory.add("x", user_id="ada", infer=True))

    # -- log (episodes only) -------------------------------------------------------------------
    case("log surrogate", lambda e: e.memory.log("\ud800", user_id="ada"))
    case("log metadata nan", lambda e: e.memory.log("x", user_id="ada", metadata={"x": NAN}))
    case("log at 1e20", lambda e: e.memory.log("x", user_id="ada", at=1e20))

    # -- update / get / history / delete by id --------------------------------------------------
    for label, text in {
        **BAD_TEXT,
        "controls": GOOD_TEXT["controls"],
        "unicode": GOOD_TEXT["unicode"],
    }.items():
        case(f"update content {label}", lambda e, t=text: e.memory.update(e.mid, t, user_id="ada"))
    for label, reason in {"surrogate": "\ud800", "int": 5, "object": object(), "huge": HUGE}.items():
        case(
            f"update reason {label}",
            lambda e, r=reason: e.memory.update(e.mid, "Reason case.", reason=r, user_id="ada"),
        )
    bad_ids = {
        "none": None,
        "int": 5,
        "object": object(),
        "empty": "",
        "missing": "no-such-id",
        "surrogate": "\ud800",
        "list": ["x"],
        "2**70": 2**70,
        "nan": NAN,
        "bytes": b"id",
        "huge": "x" * 1_000_000,
    }
    for label, memory_id in bad_ids.items():
        case(f"update id {label}", lambda e, i=memory_id: e.memory.update(i, "x", user_id="ada"))
        case(f"get id {label}", lambda e, i=memory_id: e.memory.get(i, user_id="ada"))
        case(f"history id {label}", lambda e, i=memory_id: e.memory.history(i, user_id="ada"))
        case(f"delete id {label}", lambda e, i=memory_id: e.memory.delete(i, user_id="ada"))
    case("get other user's id", lambda e: e.memory.get(e.mid, user_id="bob"))
    case("update surrogate user_id", lambda e: e.memory.update(e.mid, "x", user_id="\ud800"))


def _read_cases(case: Callable[..., None]) -> None:
    # -- search -----------------------------------------------------------------------------------
    queries = {
        **{label: text for label, text in GOOD_TEXT.items()},
        **{label: text for label, text in BAD_TEXT.items()},
        "fts-syntax": 'NEAR("a" b) AND content:x OR *',
    }
    for label, query in queries.items():
        for recipe in ("hybrid", "keyword"):
            case(
                f"search {recipe} query {label}",
                lambda e, q=query, r=recipe: e.memory.search(q, user_id="ada", recipe=r),
            )
    for label, k in COUNT_BAD.items():
        case(f"search k {label}", lambda e, k=k: e.memory.search("tea", user_id="ada", k=k))
    case("search k 1000", lambda e: e.memory.search("tea", user_id="ada", k=1000))
    for label, recipe in RECIPES_BAD.items():
        case(f"search recipe {label}", lambda e, r=recipe: e.memory.search("tea", user_id="ada", recipe=r))
    for label, at in {**TIME_GOOD, **TIME_BAD}.items():
        case(f"search as_of {label}", lambda e, a=at: e.memory.search("tea", user_id="ada", as_of=a))
    for label in ("year-999", "max-plus-1h", "1e20", "max-minus-1h", "surrogate", "30h-zone"):
        at = {**TIME_GOOD, **TIME_BAD}[label]
        case(f"search known_at {label}", lambda e, a=at: e.memory.search("tea", user_id="ada", known_at=a))
    for label, kinds in {**KINDS_GOOD, **KINDS_BAD}.items():
        case(f"search kinds {label}", lambda e, k=kinds: e.memory.search("tea", user_id="ada", kinds=k))
    for label, filters in {**FILTERS_GOOD, **FILTERS_BAD}.items():
        case(f"search filters {label}", lambda e, f=filters: e.memory.search("tea", user_id="ada", filters=f))
    for label, uid in ID_BAD.items():
        case(f"search user_id {label}", lambda e, u=uid: e.memory.search("tea", user_id=u))

    # -- get_all ----------------------------------------------------------------------------------
    for name in ("limit", "offset"):
        for label, value in {**COUNT_BAD, "2**63": 2**63}.items():
            if name == "offset" and label == "zero":
                continue
            case(
                f"get_all {name} {label}",
                lambda e, n=name, v=value: e.memory.get_all(user_id="ada", **{n: v}),
            )
    case("get_all limit 2**63-1", lambda e: e.memory.get_all(user_id="ada", limit=2**63 - 1))
    for label in ("2**70", "surrogate-value", "in-nan", "str", "int-key"):
        case(
            f"get_all filters {label}",
            lambda e, f=FILTERS_BAD[label]: e.memory.get_all(user_id="ada", filters=f),
        )
    for label in ("int", "surrogate", "dict"):
        case(f"get_all kinds {label}", lambda e, k=KINDS_BAD[label]: e.memory.get_all(user_id="ada", kinds=k))
    for label in ("1e20", "max-minus-1h", "year-999", "year-0"):
        at = {**TIME_GOOD, **TIME_BAD}[label]
        case(f"get_all as_of {label}", lambda e, a=at: e.memory.get_all(user_id="ada", as_of=a))

    # -- context ----------------------------------------------------------------------------------
    for label, query in queries.items():
        case(
            f"context query {label}", lambda e, q=query: e.memory.context(q, user_id="ada", budget_tokens=300)
        )
    for label, budget in {**COUNT_BAD, "huge-ok": 2**70}.items():
        case(
            f"context budget {label}",
            lambda e, b=budget: e.memory.context("tea", user_id="ada", budget_tokens=b),
        )
    for label in ("year-999", "max-plus-1h", "1e20", "max-minus-1h", "nan", "object", "surrogate"):
        at = {**TIME_GOOD, **TIME_BAD}[label]
        case(f"context as_of {label}", lambda e, a=at: e.memory.context("tea", user_id="ada", as_of=a))
    case("context surrogate user_id", lambda e: e.memory.context("tea", user_id="\ud800"))

    # -- timeline / graph ---------------------------------------------------------------------
    for label, value in {"surrogate": "\ud800", "int": 5, "object": object(), "none-both": None}.items():
        case(f"timeline subject {label}", lambda e, v=value: e.memory.timeline(subject=v, user_id="ada"))
        case(f"graph entity {label}", lambda e, v=value: e.memory.graph(v, user_id="ada"))


def _block_and_tool_cases(case: Callable[..., None]) -> None:
    # -- blocks -----------------------------------------------------------------------------------
    blocks = lambda e: e.memory.blocks  # noqa: E731
    for label, name in LABEL_BAD.items():
        case(f"blocks.set label {label}", lambda e, n=name: blocks(e).set(n, "v", user_id="ada"))
        case(f"blocks.get label {label}", lambda e, n=name: blocks(e).get(n, user_id="ada"))
    for index, (label, value) in enumerate({**GOOD_TEXT, **BAD_TEXT, "over-limit": "x" * 2001}.items()):
        limit = 2000 if label == "over-limit" else 2_000_000
        case(
            f"blocks.set value {label}",
            lambda e, v=value, n=f"value_{index}", c=limit: blocks(e).set(n, v, user_id="ada", char_limit=c),
        )
    for label, limit in {**COUNT_BAD, "2**63": 2**63}.items():
        case(
            f"blocks.set char_limit {label}",
            lambda e, c=limit: blocks(e).set("limits", "v", user_id="ada", char_limit=c),
        )
    for label, flag in {"str": "yes", "int-2": 2, "none-ok": None, "object": object()}.items():
        case(
            f"blocks.set read_only {label}",
            lambda e, f=flag: blocks(e).set("flags", "v", user_id="ada", read_only=f),
        )
    for label, desc in {"int": 5, "surrogate": "\ud800", "list": ["x"], "ok": "about the user"}.items():
        case(
            f"blocks.set description {label}",
            lambda e, d=desc: blocks(e).set("described", "v", user_id="ada", description=d),
        )
    for label, reason in {"int": 5, "surrogate": "\ud800"}.items():
        case(
            f"blocks.set reason {label}",
            lambda e, r=reason: blocks(e).set("reasons", "v", user_id="ada", reason=r),
        )
    for label, text in BAD_TEXT.items():
        case(f"blocks.append text {label}", lambda e, t=text: blocks(e).append("human", t, user_id="ada"))
    case("blocks.append over limit", lambda e: blocks(e).append("human", "x" * 600, user_id="ada"))
    case("blocks.append missing block", lambda e: blocks(e).append("nope", "x", user_id="ada"))
    case("blocks.append actor int", lambda e: blocks(e).append("human", "line", user_id="ada", actor=5))
    for label, text in {"surrogate": "\ud800", "int": 5, "none": None}.items():
        case(
            f"blocks.replace old {label}", lambda e, t=text: blocks(e).replace("human", t, "x", user_id="ada")
        )
        case(
            f"blocks.replace new {label}",
            lambda e, t=text: blocks(e).replace("human", "Ada", t, user_id="ada"),
        )
    case("blocks.set surrogate user_id", lambda e: blocks(e).set("human", "v", user_id="\ud800"))

    # -- tools, called as an LM calls them ---------------------------------------------------------
    def tool(name: str, **kwargs: Any) -> Callable[[Env], Any]:
        return lambda e: e.tools[name](**kwargs)

    for label, (name, kwargs) in TOOL_CALLS.items():
        case(f"tool {label}", tool(name, **kwargs), tool=True)
    case(
        "tool revise surrogate content",
        lambda e: e.tools["revise"](memory_id=e.short, content="\ud800", reason="r"),
        tool=True,
    )
    case(
        "tool revise reason object",
        lambda e: e.tools["revise"](memory_id=e.short, content="Ada's tea is green.", reason=["why"]),
        tool=True,
    )
    case("tool history real id", lambda e: e.tools["memory_history"](memory_id=e.short), tool=True)


def _cases() -> list[Case]:
    cases: list[Case] = []

    def case(name: str, call: Callable[[Env], Any], *, tool: bool = False) -> None:
        cases.append(Case(name, call, tool))

    for part in (_write_cases, _read_cases, _block_and_tool_cases):
        part(case)
    return cases


CASES = _cases()


def _counts(memory: Memory) -> dict[str, int]:
    """Rows per table, and in the backend's indexes (vectors, keyword entries, vec0 codes)."""
    with memory.store.snapshot() as conn:
        counts = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}
        return {**counts, **{f"index {name}": n for name, n in memory.store.backend.index_rows(conn).items()}}


def _consistent(counts: dict[str, int]) -> bool:
    """Every memory row has its vector, its keyword entry (and on SQLite its vec0 code)."""
    return all(n == counts["memories"] for name, n in counts.items() if name.startswith("index "))


def _outcome(env: Env, case: Case) -> str:
    """ "accepted", "refused:<ErrorType>" or "crash:<ErrorType>: message"."""
    try:
        result = case.call(env)
    except DSPyMemoryError as exc:
        return f"refused:{type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - what the catalogue is looking for
        return f"crash:{type(exc).__name__}: {str(exc)[:120]!r}"
    if case.tool:
        if not isinstance(result, str):
            return f"crash:tool returned {type(result).__name__}"
        if UNEXPECTED_TOOL_ERROR.match(result):
            return f"crash:tool {result[:140]!r}"
        if result.startswith("error:"):
            return "refused:tool-error"
    return "accepted"


def run_catalogue(memory: Memory) -> tuple[dict[str, str], list[str]]:
    """Run every case; returns ({case: outcome}, [invariant violations])."""
    env = Env(memory)
    outcomes: dict[str, str] = {}
    problems: list[str] = []
    for case in CASES:
        before = _counts(memory)
        outcome = _outcome(env, case)
        memory._retriever.flush()
        after = _counts(memory)
        outcomes[case.name] = outcome
        if outcome.startswith("refused") and after != before:
            changed = {t: (before[t], after[t]) for t in TABLES if before[t] != after[t]}
            problems.append(f"{case.name}: refused ({outcome}) but stored {changed}")
        if not _consistent(after):
            problems.append(f"{case.name}: indexes disagree {after}")
    with memory.store.snapshot() as conn:
        integrity = memory.store.backend.integrity(conn)
    if integrity != ["ok"]:
        problems.append(f"integrity_check: {integrity}")
    problems += _read_everything(memory)
    return outcomes, problems


def _read_everything(memory: Memory) -> list[str]:
    """What was accepted must read back: every memory, its history, every block and its
    versions, every episode, a context (an accepted value that cannot be read breaks the
    file for its user)."""
    problems = []
    with memory.store.snapshot() as conn:
        scopes = conn.execute("SELECT DISTINCT user_id, agent_id, run_id FROM episodes").fetchall()
    for user_id, agent_id, run_id in scopes:
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        try:
            records = memory.get_all(**ids, limit=100_000)
            for record in records:
                memory.history(record.id, **ids)
            for block in memory.blocks.list(**ids):
                memory.blocks.history(block.label, **ids)
            memory.store.episodes.list(Scope.of(**ids), limit=100_000)
            memory.context("tea", **ids, budget_tokens=500)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"reading back {ids}: {type(exc).__name__}: {str(exc)[:200]}")
    return problems


def summarize(outcomes: dict[str, str]) -> collections.Counter[str]:
    return collections.Counter(":".join(outcome.split(":")[:2]) for outcome in outcomes.values())


if __name__ == "__main__":  # counts by outcome, for reports
    import sys
    import tempfile

    from dspy_memory.embed import HashEmbedder

    with tempfile.TemporaryDirectory() as folder, Memory(f"{folder}/m.db", embedder=HashEmbedder(64)) as mem:
        results, issues = run_catalogue(mem)
    print(f"{len(results)} inputs")
    for outcome, count in sorted(summarize(results).items()):
        print(f"  {outcome}: {count}")
    for name, outcome in results.items():
        if outcome.startswith("crash") or "-v" in sys.argv:
            print(f"{name}: {outcome}")
    for issue in issues:
        print("PROBLEM", issue)
