"""RetentionSettings: how long a scope's memories are kept before maintenance erases them
(`MemoryConfig.retention`, `Memory.retention(...)`; docs/governance.md#retention). Apart from
config.py only to keep that file readable in one sitting."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import ConfigDict, field_validator

from dspy_memory.config_errors import CheckedSettings
from dspy_memory.types import MemoryKind

# The longest interval a policy takes (the service's limit too: server/time_fields.py).
MAX_INTERVAL_SECONDS = 10**10


class RetentionSettings(CheckedSettings):
    """A retention policy. Durations are "30m", "24h", "90d", "2w", seconds or a timedelta.

    - `erase_after`: a memory is erased this long after its current version was written; the
      raw input (episodes) this long after it came in. In a run (a session: `run_id`), counted
      from the run's last message, so a run goes as a whole.
    - `erase_runs_after`: the same for what belongs to a run only, instead of `erase_after`
      (e.g. "24h": sessions go a day after they end; a user's facts, stored without a run, stay).
    - `kinds`: the memory kinds the policy erases (None: all). "turn" (raw turns) covers the
      raw input too, so `kinds=["turn"]` erases what was said and keeps the facts made from it.
    - `pinned`, `blocks`: pinned memories, and core blocks (the profile among them), are kept
      unless these say otherwise.

    None of it touches a memory's own `expires_at`, which always applies."""

    model_config = ConfigDict(extra="forbid")

    erase_after: timedelta | None = None
    erase_runs_after: timedelta | None = None
    kinds: tuple[MemoryKind, ...] | None = None
    pinned: bool = False
    blocks: bool = False

    @field_validator("erase_after", "erase_runs_after", mode="before")
    @classmethod
    def _interval(cls, value: Any, info: Any) -> Any:
        """ "90d", "24h", seconds -> a timedelta; timedeltas and ISO 8601 (as JSON holds them)
        are pydantic's to read."""
        from dspy_memory.util.timeutil import interval_seconds

        if (
            value is None
            or isinstance(value, timedelta)
            or (isinstance(value, str) and value.startswith("P"))
        ):
            return value
        try:
            return timedelta(seconds=interval_seconds(value, info.field_name))
        except Exception as exc:  # a ValueError is what pydantic reports as a validation error
            raise ValueError(str(exc)) from None

    @field_validator("erase_after", "erase_runs_after")
    @classmethod
    def _bounded(cls, value: timedelta | None, info: Any) -> timedelta | None:
        if value is not None and value.total_seconds() <= 0:
            raise ValueError(f"{info.field_name} must be a positive interval")
        if value is not None and value.total_seconds() > MAX_INTERVAL_SECONDS:
            # Maintenance subtracts it from now: a time before the year 1 cannot be stored.
            raise ValueError(
                f"{info.field_name} must be at most {MAX_INTERVAL_SECONDS:.0e} seconds (about 317 years)"
            )
        return value

    def limit_for(self, in_run: bool) -> timedelta | None:
        """How long what belongs to a run (`in_run`) or not is kept (None: until deleted)."""
        return (self.erase_runs_after or self.erase_after) if in_run else self.erase_after
