"""Core memory (Letta-style blocks): a few labelled texts, such as "persona" or "human", that
are always placed first in context. The developer defines them; agents edit them with
`append` and `replace`, within each block's character limit and never when it is read-only."""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from typing import Any, overload

from typing_extensions import Unpack

from dspy_memory.errors import BlockError, InvalidInputError
from dspy_memory.governance.redact import NO_REDACTION, Redactor
from dspy_memory.scopes import ScopeArgs, ScopeRules
from dspy_memory.store import Store
from dspy_memory.tool_settings import BLOCK_LABEL_PATTERN, MAX_BLOCK_CHARS
from dspy_memory.types import Block, BlockVersion, Scope
from dspy_memory.util.text import shown, valid_text

_LABEL = re.compile(BLOCK_LABEL_PATTERN)
MAX_CHAR_LIMIT = MAX_BLOCK_CHARS


def _label(label: str) -> str:
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise BlockError(f"a block label is 1-64 letters, digits, '_', '.' or '-', not {shown(label)}")
    return label


def _char_limit(char_limit: Any) -> int:
    if (
        isinstance(char_limit, bool)
        or not isinstance(char_limit, int)
        or not 1 <= char_limit <= MAX_CHAR_LIMIT
    ):
        raise InvalidInputError(
            f"char_limit must be an integer from 1 to {MAX_CHAR_LIMIT}, got {shown(char_limit)}"
        )
    return char_limit


def _optional_text(**values: Any) -> None:
    """Refuse a given (not None) argument that is not storable text."""
    for name, value in values.items():
        if value is not None:
            valid_text(value, name)


class CoreMemory:
    """`memory.blocks`: create, read and edit core-memory blocks of a scope."""

    def __init__(self, store: Store, *, scope_mode: str = "strict", redact: Redactor = NO_REDACTION) -> None:
        self._store = store
        self._redact = redact  # secrets never reach a block (docs/governance.md#secret-redaction)
        self._scopes = ScopeRules(scope_mode)  # `list` without user_id: every user in wildcard mode

    def set(
        self,
        label: str,
        value: str | None = None,
        *,
        char_limit: int | None = None,
        read_only: bool | None = None,
        description: str | None = None,
        reason: str | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> Block:
        """Create a block or change it (the developer may change read-only blocks). A new value
        is a new version; a value over the limit (default 2,000 characters) is refused."""
        _optional_text(value=value, description=description, reason=reason)
        if char_limit is not None:
            _char_limit(char_limit)
        if read_only is not None and not isinstance(read_only, bool):
            raise InvalidInputError(f"read_only must be True, False or None, got {shown(read_only)}")
        redact = self._redact.optional
        return self._store.blocks.write(
            _label(label),
            self._scopes.exact("blocks.set", scope),
            value=redact(value),
            char_limit=char_limit,
            read_only=read_only,
            description=redact(description),
            actor="developer",
            reason=redact(reason),
            enforce_read_only=False,
        )

    def get(
        self,
        label: str,
        **scope: Unpack[ScopeArgs],
    ) -> Block | None:
        return self._store.blocks.get(_label(label), self._scopes.exact("blocks.get", scope))

    def list(self, **scope: Unpack[ScopeArgs]) -> list[Block]:
        """The blocks of a scope, oldest first. Omitted agent_id and run_id match any; an
        omitted user_id matches blocks without a user (strict scope mode; docs/scopes.md)."""
        return self._store.blocks.list(self._scopes.read("blocks.list", scope))

    def append(
        self,
        label: str,
        text: str,
        *,
        actor: str = "agent",
        reason: str | None = None,
        creatable: Mapping[str, int] | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> Block:
        """Add a line to a block (an agent's edit: refused on read-only blocks and over the limit).
        A missing block is refused unless its label is in `creatable` ({label: char_limit}): then
        it is started with this line (the agent tools start ToolSettings.default_blocks)."""
        where = self._scopes.exact("blocks.append", scope)
        valid_text(actor, "actor")
        _optional_text(text=text, reason=reason)
        creatable = creatable or {}
        block = self._existing(label, where, creatable)
        if not isinstance(text, str) or not text.strip():
            raise BlockError("nothing to append: text is empty")
        current = block.value if block else ""
        value = f"{current}\n{text.strip()}" if current else text.strip()
        value, reason = self._redact.text(value), self._redact.optional(reason)
        limit = None if block else _char_limit(creatable[label])
        return self._store.blocks.write(
            label, where, value=value, char_limit=limit, actor=actor, reason=reason
        )

    def replace(
        self,
        label: str,
        old: str,
        new: str,
        *,
        actor: str = "agent",
        reason: str | None = None,
        **scope: Unpack[ScopeArgs],
    ) -> Block:
        """Replace text in a block (an agent's edit); `new` may be empty to delete `old`."""
        where = self._scopes.exact("blocks.replace", scope)
        valid_text(actor, "actor")
        _optional_text(new=new, reason=reason)
        block = self._existing(label, where)
        if not isinstance(old, str) or not old or old not in block.value:
            raise BlockError(f"the text to replace is not in block {label!r}; copy it exactly from the block")
        if not isinstance(new, str):
            raise BlockError("the replacement must be a string (empty to delete the text)")
        value = self._redact.text(block.value.replace(old, new, 1))
        return self._store.blocks.write(
            label, where, value=value, actor=actor, reason=self._redact.optional(reason)
        )

    def history(
        self,
        label: str,
        **scope: Unpack[ScopeArgs],
    ) -> builtins.list[BlockVersion]:
        return self._store.blocks.history(_label(label), self._scopes.exact("blocks.history", scope))

    def delete(
        self,
        label: str,
        **scope: Unpack[ScopeArgs],
    ) -> bool:
        return self._store.blocks.delete(_label(label), self._scopes.exact("blocks.delete", scope))

    @overload
    def _existing(self, label: str, scope: Scope) -> Block: ...
    @overload
    def _existing(self, label: str, scope: Scope, creatable: Mapping[str, int]) -> Block | None: ...

    def _existing(self, label: str, scope: Scope, creatable: Mapping[str, int] | None = None) -> Block | None:
        """The block, or None when it is missing and `creatable` names it; else a BlockError that
        lists the blocks there are and the ones that could be started."""
        block = self._store.blocks.get(_label(label), scope)
        if block is None and label not in (creatable or {}):
            labels = [b.label for b in self._store.blocks.list(scope)]
            can_start = f"; an agent may start: {', '.join(creatable)}" if creatable else ""
            raise BlockError(
                f"no block {label!r} in this scope; blocks: {', '.join(labels) or 'none'}{can_start}"
            )
        return block
