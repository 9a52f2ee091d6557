"""How a call's user_id, agent_id and run_id become the scope it writes, reads or must own
(docs/scopes.md): the one place the scope rules are applied."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from typing_extensions import TypedDict

from dspy_memory.errors import InvalidInputError, ScopeError
from dspy_memory.types import Scope
from dspy_memory.util.text import check_flag, check_id

# Ids are UUIDs (36 characters); the agent tools and the CLI show the first 8.
FULL_ID_LENGTH = 36
MIN_ID_PREFIX = 8
_NEEDS_SCOPE = (
    "{method}() needs the scope that owns the memory: pass user_id= (and agent_id=/run_id= if it "
    "was stored with them), or all_scopes=True to reach any scope"
)


class ScopeArgs(TypedDict, total=False):
    """The scope of a call, as keyword arguments: `memory.search(q, user_id="ada")`."""

    user_id: str | None
    agent_id: str | None
    run_id: str | None


class OwnerArgs(ScopeArgs, total=False):
    """The scope that owns a memory addressed by id, or `all_scopes=True` for any scope."""

    all_scopes: bool


_SCOPE_KEYS = frozenset(ScopeArgs.__annotations__)
_OWNER_KEYS = frozenset(OwnerArgs.__annotations__)


class IdIndex(Protocol):
    def ids_with_prefix(self, prefix: str, scope: Scope | None, limit: int = 2) -> list[str]: ...


def _checked(method: str, args: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise TypeError(
            f"{method}() got an unexpected keyword argument {unknown[0]!r}; "
            f"the scope is given as {', '.join(sorted(allowed))}"
        )


def exact_scope(method: str, args: Mapping[str, Any]) -> Scope:
    """The scope a write (or a binding, as tools make) names, exactly as given, in every mode."""
    _checked(method, args, _SCOPE_KEYS)
    return Scope.of(**args)


class ScopeRules:
    """Strict mode (default): an omitted user_id means "stored without a user". Wildcard mode
    (single tenant, as in 0.1): an omitted user_id matches any user."""

    def __init__(self, mode: str) -> None:
        self.any_user = mode == "wildcard"

    def exact(self, method: str, args: Mapping[str, Any]) -> Scope:
        return exact_scope(method, args)

    def read(self, method: str, args: Mapping[str, Any]) -> Scope:
        """The scope a read names; agent_id and run_id left out match any value."""
        _checked(method, args, _SCOPE_KEYS)
        return Scope.of(**args, any_user=self.any_user)

    def read_or_all(self, method: str, args: Mapping[str, Any], all_scopes: Any) -> Scope | None:
        """The scope a read names, or None for every scope (all_scopes=True, and no ids)."""
        check_flag(all_scopes, "all_scopes")
        _checked(method, args, _SCOPE_KEYS)
        named = any(value is not None for value in args.values())
        if not all_scopes and not named:
            raise ScopeError(
                f"{method}() needs a scope: pass user_id= (agent_id=, run_id=) or all_scopes=True"
            )
        if not all_scopes:
            return self.read(method, args)
        if named:
            raise InvalidInputError(f"{method}(): pass the scope or all_scopes=True, not both")
        return None

    def owner(self, method: str, args: Mapping[str, Any]) -> Scope | None:
        """The scope a by-id call must match; None reaches any scope (all_scopes=True, or no
        scope at all in wildcard mode). Strict mode refuses a call without a scope."""
        _checked(method, args, _OWNER_KEYS)
        ids = {key: value for key, value in args.items() if key != "all_scopes"}
        all_scopes = args.get("all_scopes", False)
        named = any(value is not None for value in ids.values())
        check_flag(all_scopes, "all_scopes", error=ScopeError)
        if all_scopes:
            if named:
                raise ScopeError(f"{method}(): pass the scope or all_scopes=True, not both")
            return None
        if not named and self.any_user:
            return None
        if not named:
            raise ScopeError(_NEEDS_SCOPE.format(method=method))
        return self.read(method, ids)

    def owned(
        self, method: str, memory_id: Any, args: Mapping[str, Any], index: IdIndex
    ) -> tuple[str, Scope | None]:
        """(the full id, the scope a by-id call must match). A unique prefix of at least 8
        characters stands for the id, as the agent tools and the CLI show ids shortened."""
        check_id(memory_id)
        scope = self.owner(method, args)
        if MIN_ID_PREFIX <= len(memory_id) < FULL_ID_LENGTH:
            found = index.ids_with_prefix(memory_id, scope, limit=6)
            if len(found) > 1:
                raise InvalidInputError(
                    f"{method}(): id prefix {memory_id!r} matches several memories "
                    f"({', '.join(found[:5])}{', ...' if len(found) > 5 else ''}); give more characters"
                )
            if found:
                return found[0], scope
        return memory_id, scope
