"""What an agent tool is bound to: a Memory and a scope (agent/tools.py), and how that pickles.

A Memory holds open connections and threads, so it cannot be pickled itself; a binding pickles by
reference instead. Unpickled in the process that pickled it, a tool gets the very Memory it was
made with, while that one is open. Anywhere else (another process, a forked worker, a program
saved with `program.save(save_program=True)` and loaded later) it re-opens
`Memory(config)` from the configuration the Memory was opened with, once per process and
configuration, closed at exit. The encryption key is never put in the pickle: a re-opened
encrypted file reads $DSPY_MEMORY_ENCRYPTION_KEY. Objects given to `Memory(...)` beside the
configuration (an embedder object, an LM object, compiled programs) do not travel: the re-opened
memory uses the embedder its file was built with and the configured (or dspy's) LM.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from dspy_memory.errors import InvalidInputError
from dspy_memory.tool_settings import ToolSettings
from dspy_memory.types import Scope
from dspy_memory.util.text import is_postgres_url, shown

if TYPE_CHECKING:
    from dspy_memory.memory import Memory

_lock = threading.Lock()
_live: weakref.WeakValueDictionary[str, Memory] = weakref.WeakValueDictionary()
_tokens: weakref.WeakKeyDictionary[Memory, str] = weakref.WeakKeyDictionary()
_reopened: dict[str, Memory] = {}


class Binding:
    """A Memory and the scope tools made from it read and write (fixed; a model cannot change it)."""

    def __init__(self, memory: Memory, scope: Scope) -> None:
        self.memory = memory
        self.scope = scope

    @property
    def ids(self) -> dict[str, Any]:
        return self.scope.model_dump()

    @property
    def settings(self) -> ToolSettings:
        return self.memory.config.tools

    def resolve(self, memory_id: str) -> str:
        """The full id of a memory of this scope from the short id recall shows."""
        memory_id = str(memory_id).strip().strip("[]")
        if len(memory_id) < 4:
            raise ValueError("give the memory id as shown by recall (8 characters)")
        found = self.memory.find_ids(memory_id, exact=True, **self.ids)
        if not found:
            raise LookupError(f"no memory {shown(memory_id)} here; use recall to find ids")
        if len(found) > 1:
            raise LookupError(f"{shown(memory_id)} matches several memories; give more characters")
        return found[0]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebound, (_reference(self.memory), self.scope))

    def __copy__(self) -> Binding:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Binding:
        # DSPy optimizers deep-copy programs; their tools keep writing to the same Memory.
        return self


def _reference(memory: Memory) -> dict[str, Any]:
    with _lock:
        token = _tokens.get(memory)
        if token is None:
            token = _tokens[memory] = uuid.uuid4().hex
            _live[token] = memory
    config = memory.config.model_dump(mode="json", exclude={"encryption_key"})
    if config["path"] != ":memory:" and not is_postgres_url(config["path"]):
        config["path"] = os.path.abspath(config["path"])  # the same file, whatever the directory
    return {"process": os.getpid(), "token": token, "config": config}


def _rebound(reference: dict[str, Any], scope: Scope) -> Binding:
    memory = _live.get(reference["token"]) if reference["process"] == os.getpid() else None
    if memory is None or memory.closed:
        memory = _reopen(reference["config"])
    return Binding(memory, scope)


def _reopen(config: dict[str, Any]) -> Memory:
    from dspy_memory.config import MemoryConfig
    from dspy_memory.memory import Memory

    if config["path"] == ":memory:":
        raise InvalidInputError(
            "these memory tools were bound to an in-memory store (':memory:'), which exists only in "
            "the process that made them; bind them to a file or a PostgreSQL URL to load them elsewhere"
        )
    key = json.dumps(config, sort_keys=True)
    with _lock:
        memory = _reopened.get(key)
        if memory is None or memory.closed:
            memory = _reopened[key] = Memory(MemoryConfig.model_validate(config))
            atexit.register(memory.close)
        return memory
