"""The Memory facade's governance methods (docs/governance.md). Mixed into Memory; like the
rest of the facade, they validate and delegate to dspy_memory/governance/ and the store."""

from __future__ import annotations

from typing import Any


class GovernanceMethods:
    # Provided by Memory.
    store: Any
    config: Any
    embedder: Any

    def _first_use(self) -> None: ...
    def _scope(self, method: str, args: dict[str, Any], *, exact: bool = False) -> Any: ...
