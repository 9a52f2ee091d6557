"""A Memory seen through one scope (`memory.scoped(user_id="ada")`), so a service names the
scope once instead of on every call (docs/governance.md#least-privilege-for-agents).

Every method is Memory's own, called with the handle's ids added: the handle holds no logic of
its own beyond refusing a call that would reach past its scope. A call may narrow the scope
(an agent_id or run_id the handle leaves open), never change an id the handle binds, never
name another user, never pass all_scopes. The handle guards application code against a
forgotten or wrong id; it is not a sandbox against code that holds the Memory itself.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, TypeVar, cast

from typing_extensions import ParamSpec, Unpack

from dspy_memory.agent.blocks import CoreMemory
from dspy_memory.errors import ScopeError
from dspy_memory.memory import Memory
from dspy_memory.scopes import ScopeArgs, exact_scope
from dspy_memory.types import Scope

P = ParamSpec("P")
R = TypeVar("R")
_OPEN_KEYS = ("agent_id", "run_id")  # left out of a handle: a call may narrow to one


class _Bound:
    """What the handle and its blocks share: the ids it binds and the check of a call's own."""

    _target: Any

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def _ids(self, method: str, given: dict[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments with the handle's ids in them."""
        if "all_scopes" in given:
            raise ScopeError(f"{method}(): a scoped handle reaches only its own scope; all_scopes is refused")
        ids = self.scope.model_dump()
        for key in ("user_id", *_OPEN_KEYS):
            if key not in given:
                continue
            value = given.pop(key)
            if value == ids[key]:
                continue
            if key in _OPEN_KEYS and ids[key] is None and value is not None:
                ids[key] = value  # narrower: still inside the handle's scope
                continue
            raise ScopeError(
                f"{method}(): this handle is bound to {self.scope.model_dump(exclude_none=True)}; "
                f"it cannot reach {key}={value!r}. Use memory.scoped({key}=...) for another scope"
            )
        # An id the handle leaves empty is left out, so the call reads exactly as Memory's would.
        return {**given, **{key: value for key, value in ids.items() if value is not None}}


def _through(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """`method` of the handle's target, called with the handle's ids (same signature, same
    docstring: IDEs and help() show Memory's)."""
    name = method.__name__
    if inspect.iscoroutinefunction(method):
        # An awaitable form stays a coroutine function (frameworks ask inspect which it is).

        @functools.wraps(method)
        async def awaited(self: _Bound, /, *args: P.args, **kwargs: P.kwargs) -> Any:
            return await getattr(self._target, name)(*args, **self._ids(name, dict(kwargs)))

        return cast(Callable[Concatenate[Any, P], R], awaited)

    @functools.wraps(method)
    def call(self: _Bound, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return getattr(self._target, name)(*args, **self._ids(name, dict(kwargs)))

    return call


class ScopedBlocks(_Bound):
    """`handle.blocks`: the core-memory blocks of the handle's scope."""

    def __init__(self, blocks: CoreMemory, scope: Scope) -> None:
        super().__init__(scope)
        self._target = blocks

    set = _through(CoreMemory.set)
    get = _through(CoreMemory.get)
    list = _through(CoreMemory.list)
    append = _through(CoreMemory.append)
    replace = _through(CoreMemory.replace)
    history = _through(CoreMemory.history)
    delete = _through(CoreMemory.delete)


# Memory's public methods a scoped handle does not have, and why (an awaitable form `a<name>`
# goes with its method). tests/test_async.py fails when a public method is in neither place: a
# handle that silently lacks a method is a hole in the scope wall.
NOT_SCOPED = {
    "resume": "file-wide: processes what every scope left unfinished",
    "reprocess": "file-wide: processes every scope's failed and pending episodes",
    "flush": "file-wide: waits for every scope's background adds",
    "check": "file-wide: checks the whole file against the invariants",
    "stats": "file-wide: counts over every scope",
    "close": "closes the Memory every handle shares",
    "maintenance_reports": "file-wide: the scheduled maintenance runs over every scope",
    "retention_policies": "file-wide: the policies stored for every scope",
    "backup": "the whole file",
    "restore_backup": "replaces the whole file",
    "verify_audit": "the audit chain of the whole file",
    "import_": "writes into the scopes recorded in the file, whichever they are",
    "acting_as": "names who acts, not a scope: use memory.acting_as",
    "scoped": "the handle's own `scoped` narrows it (defined here, not forwarded)",
}


class ScopedMemory(_Bound):
    """A Memory bound to one scope; made by `memory.scoped(user_id=..., agent_id=..., run_id=...)`.

    >>> ada = memory.scoped(user_id="ada")
    >>> ada.add("I moved to Denver.")
    >>> ada.search("where does ada live?")      # == memory.search(..., user_id="ada")
    >>> ada.search("x", user_id="bob")          # ScopeError: the handle cannot reach bob
    """

    def __init__(self, memory: Memory, **scope: Unpack[ScopeArgs]) -> None:
        bound = exact_scope("scoped", dict(scope))  # refuses an empty scope
        super().__init__(bound)
        self._target = memory
        self.blocks = ScopedBlocks(memory.blocks, bound)

    # writing
    add = _through(Memory.add)
    log = _through(Memory.log)
    ingest = _through(Memory.ingest)
    update = _through(Memory.update)
    delete = _through(Memory.delete)
    delete_scope = _through(Memory.delete_scope)
    update_profile = _through(Memory.update_profile)
    # reading
    search = _through(Memory.search)
    get = _through(Memory.get)
    get_all = _through(Memory.get_all)
    find_ids = _through(Memory.find_ids)
    history = _through(Memory.history)
    timeline = _through(Memory.timeline)
    graph = _through(Memory.graph)
    context = _through(Memory.context)
    answer = _through(Memory.answer)
    profile = _through(Memory.profile)
    # feedback (docs/feedback.md)
    feedback = _through(Memory.feedback)
    feedback_records = _through(Memory.feedback_records)
    get_feedback = _through(Memory.get_feedback)
    learn_from_feedback = _through(Memory.learn_from_feedback)
    # agents and lifecycle
    tools = _through(Memory.tools)
    maintain = _through(Memory.maintain)
    pin = _through(Memory.pin)
    restore = _through(Memory.restore)
    lifecycle_settings = _through(Memory.lifecycle_settings)
    retention = _through(Memory.retention)
    # governance: the scope's records (a GDPR access request) and its audit entries
    export = _through(Memory.export)
    audit = _through(Memory.audit)
    # the awaitable forms (docs/async.md)
    aadd = _through(Memory.aadd)
    alog = _through(Memory.alog)
    aingest = _through(Memory.aingest)
    aupdate = _through(Memory.aupdate)
    adelete = _through(Memory.adelete)
    adelete_scope = _through(Memory.adelete_scope)
    aupdate_profile = _through(Memory.aupdate_profile)
    asearch = _through(Memory.asearch)
    aget = _through(Memory.aget)
    aget_all = _through(Memory.aget_all)
    afind_ids = _through(Memory.afind_ids)
    ahistory = _through(Memory.ahistory)
    atimeline = _through(Memory.atimeline)
    agraph = _through(Memory.agraph)
    acontext = _through(Memory.acontext)
    aanswer = _through(Memory.aanswer)
    aprofile = _through(Memory.aprofile)
    afeedback = _through(Memory.afeedback)
    afeedback_records = _through(Memory.afeedback_records)
    aget_feedback = _through(Memory.aget_feedback)
    alearn_from_feedback = _through(Memory.alearn_from_feedback)
    amaintain = _through(Memory.amaintain)
    apin = _through(Memory.apin)
    arestore = _through(Memory.arestore)
    alifecycle_settings = _through(Memory.alifecycle_settings)
    aretention = _through(Memory.aretention)
    aexport = _through(Memory.aexport)
    aaudit = _through(Memory.aaudit)

    def scoped(self, **scope: Unpack[ScopeArgs]) -> ScopedMemory:
        """A narrower handle (e.g. one agent_id of this user); refused if it would reach further."""
        return ScopedMemory(self._target, **self._ids("scoped", dict(scope)))

    def __repr__(self) -> str:
        return f"ScopedMemory({self._target!r}, {self.scope.model_dump(exclude_none=True)})"
