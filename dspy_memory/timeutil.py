"""Time parsing and the one on-disk timestamp format.

Timestamps are stored as fixed-width ISO-8601 UTC strings ("2024-03-01T09:30:00.000000Z") so
that SQL compares them correctly as text. Naive datetimes are taken to be UTC.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timezone

TimeLike = datetime | date | str | int | float

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_datetime(value: TimeLike, *, name: str = "time") -> datetime:
    """Parse a datetime, date, ISO-8601 string or epoch seconds into an aware UTC datetime."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a datetime, date, ISO-8601 string or epoch seconds, not bool")
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time.min)
    elif isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of epoch seconds, got {value!r}")
        parsed = datetime.fromtimestamp(value, tz=timezone.utc)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith("Z") or text.endswith("z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{name}={value!r} is not an ISO-8601 time; use e.g. '2024-03-01' or "
                "'2024-03-01T09:30:00+02:00'"
            ) from None
    else:
        raise TypeError(
            f"{name} must be a datetime, date, ISO-8601 string or epoch seconds, not {type(value).__name__}"
        )
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def to_db(value: TimeLike | None, *, name: str = "time") -> str | None:
    """Format a time for storage (None stays None)."""
    if value is None:
        return None
    return to_datetime(value, name=name).strftime(_FORMAT)


def from_db(value: str | None) -> datetime | None:
    if value is None:
        return None
    # fromisoformat is ~40x faster than strptime; the stored format always ends in "Z".
    return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)


def now_db() -> str:
    return utcnow().strftime(_FORMAT)
