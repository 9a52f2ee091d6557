"""Time parsing and the one on-disk timestamp format.

Timestamps are stored as fixed-width ISO-8601 UTC strings ("2024-03-01T09:30:00.000000Z") so
that SQL compares them correctly as text: the year always has four digits ("0999-06-01..."),
so only times from 0001-01-01 to 9999-12-31 UTC can be stored, and anything else is refused
with an `InvalidInputError` that says what is accepted. Naive datetimes are taken to be UTC.
"""

from __future__ import annotations

import logging
import numbers
import re
from collections.abc import Callable
from datetime import date, datetime, time, timezone
from typing import overload

from dspy_memory.errors import InvalidInputError
from dspy_memory.util.text import shown, surrogate_at

TimeLike = datetime | date | str | int | float

ACCEPTED = (
    "a datetime, a date, an ISO-8601 string (e.g. '2024-03-01' or '2024-03-01T09:30:00+02:00') "
    "or epoch seconds, between 0001-01-01 and 9999-12-31 UTC"
)


# Numbers read as epoch seconds before this are more often a mistake than a time: warn.
_PLAUSIBLE_EPOCH = datetime(1980, 1, 1, tzinfo=timezone.utc)


_clock: Callable[[], datetime] | None = None


def utcnow() -> datetime:
    """The time now, in UTC; every timestamp dspy-memory writes comes from here."""
    return _clock() if _clock is not None else datetime.now(timezone.utc)


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """Replace the clock (an aware datetime each call) for simulations such as
    `python -m evals.lifecycle`, which lives a year in seconds; None: the real clock again."""
    global _clock
    _clock = clock


def _refuse(name: str, value: object, why: str) -> InvalidInputError:
    return InvalidInputError(f"{name}={shown(value)} {why}; use {ACCEPTED}")


def _parse(value: object, name: str) -> datetime:
    if isinstance(value, bool):
        raise _refuse(name, value, "is a bool, not a time")
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, time.min)
    if isinstance(value, numbers.Real):  # int, float and numpy's numbers; not Decimal
        try:
            moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):  # nan, inf, or outside years 1-9999
            raise _refuse(name, value, "is not a number of epoch seconds in range") from None
        if moment < _PLAUSIBLE_EPOCH:
            # Deliberate (time.time() works), but at=12345 lands in 1970: say so.
            logging.getLogger("dspy_memory").warning(
                "%s=%s was read as epoch seconds: %s; pass a datetime or an ISO-8601 string "
                "if you meant something else",
                name,
                value,
                moment.isoformat(),
            )
        return moment
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            if surrogate_at(text) is not None:
                raise ValueError
            return datetime.fromisoformat(text)
        except ValueError:
            raise _refuse(name, value, "is not an ISO-8601 time") from None
    raise _refuse(name, value, "is not a time")


def to_datetime(value: TimeLike, *, name: str = "time") -> datetime:
    """Parse a datetime, date, ISO-8601 string or epoch seconds into an aware UTC datetime that
    can be stored (InvalidInputError otherwise)."""
    parsed = _parse(value, name)
    try:
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            return parsed.replace(tzinfo=timezone.utc)
        return parsed.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-01:00 is in the year 10000 in UTC
        raise _refuse(name, value, "is outside the years 1-9999 in UTC") from None
    except Exception as exc:  # a tzinfo whose utcoffset fails or is out of range
        raise _refuse(name, value, f"has a time zone that cannot be converted to UTC ({exc})") from None


def format_db(moment: datetime) -> str:
    """A datetime (naive: UTC) in the stored format. isoformat always writes a 4-digit year;
    strftime("%Y") does not pad years below 1000 on Linux, which broke the text order."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds") + "Z"


@overload
def to_db(value: TimeLike, *, name: str = ...) -> str: ...
@overload
def to_db(value: None, *, name: str = ...) -> None: ...
@overload
def to_db(value: TimeLike | None, *, name: str = ...) -> str | None: ...


def to_db(value: TimeLike | None, *, name: str = "time") -> str | None:
    """Format a time for storage (None stays None)."""
    if value is None:
        return None
    return format_db(to_datetime(value, name=name))


@overload
def from_db(value: str) -> datetime: ...
@overload
def from_db(value: None) -> None: ...
@overload
def from_db(value: str | None) -> datetime | None: ...


def from_db(value: str | None) -> datetime | None:
    if value is None:
        return None
    # fromisoformat is ~40x faster than strptime; the stored format always ends in "Z".
    return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)


def now_db() -> str:
    return format_db(utcnow())


# A date an LM writes must name its year: "May 5" or "5" alone is no date.
_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")
# Missing parts of a date ("March 2024", "2024") are the first of the month, of the year.
_FIRST = datetime(2000, 1, 1)


def lm_date(value: str | None) -> str | None:
    """An LM's date ("2024-03-05", "2024-03", "2024", "March 2024", "5 May 2023", an ISO time)
    in db format; None when it is missing, has no year, or is not a date."""
    if not value or not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return to_db(text)
    except (TypeError, ValueError):
        pass
    if not _YEAR.search(text):
        return None
    import dateutil.parser  # only for dates an LM wrote in words: the CLI starts without it

    try:
        parsed = dateutil.parser.parse(text, default=_FIRST)
    except (ValueError, OverflowError):
        return None
    return to_db(parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc))


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def interval_seconds(value: object, name: str = "interval") -> float:
    """ "90s", "15m", "12h", "1d", "2w" or a number of seconds -> seconds (> 0)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _INTERVAL.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        raise InvalidInputError(
            f"{name}={shown(value)} is not an interval; use e.g. '30m', '12h', '1d', '1w' or seconds"
        )
    if not 0 < seconds < float("inf"):
        raise InvalidInputError(f"{name}={shown(value)} must be a positive interval")
    return seconds
