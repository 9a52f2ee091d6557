"""Time in a query: the window of world time it asks about ("in May 2023", "on 13 October 2023",
"last year", "3 weeks ago", "before June 2023"), and whether it asks when something happened.

No LM and no date-parsing library: a handful of patterns, microseconds a query. dateutil's
fuzzy parser reads "may" (the verb) as a month and "2 years ago" as today; the dedicated
libraries (dateparser) cost 10-50 ms a query, more than the whole search.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): index for index, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"

_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
# A month without a year only after a preposition ("in May"; "may" alone is a verb).
_MONTH_ONLY = re.compile(
    rf"\b(?:in|during|of|since|before|after|until|by)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}\b", re.IGNORECASE
)
_YEAR_ONLY = re.compile(
    r"\b(?:in|during|of|since|before|after|until|by|year)\s+(\d{4})\b|\b((?:19|20)\d{2})\b", re.IGNORECASE
)
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|(?:last|this|past)\s+(?:week(?:end)?|month|year))\b", re.IGNORECASE
)
_BEFORE_AFTER = re.compile(r"\b(before|after|since|until|by)\s*$", re.IGNORECASE)
_WHEN = re.compile(
    r"^\s*(when\b|what (?:date|day|year|month|time)\b|how long ago\b|which (?:date|day|year|month)\b)",
    re.IGNORECASE,
)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_NUMBERS.update({"seven": 7, "eight": 8, "nine": 9, "ten": 10})

EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 31, tzinfo=timezone.utc)


@dataclass(frozen=True)
class TimeWindow:
    """World time a query asks about: [start, end), and the words that said so."""

    start: datetime
    end: datetime
    expression: str
    # A month named without a year ("in June"): that month of any year in [start, end).
    month: int | None = None

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end and (self.month is None or moment.month == self.month)


def asks_when(query: str) -> bool:
    """Whether the query asks for a time ("When did ...", "What year ...", "How long ago ...")."""
    return _WHEN.search(query) is not None


# Words that date what a memory says: "yesterday", "last Tuesday", "in May", "2022", "3 weeks ago".
_DATED = re.compile(
    rf"\b(yesterday|today|tonight|tomorrow|ago|last|next|ago|weekend|monday|tuesday|wednesday|thursday|"
    rf"friday|saturday|sunday|{_MONTH[1:-4].replace('|may', '')}|(?:19|20)\d{{2}})\b",
    re.IGNORECASE,
)


def is_dated(text: str) -> bool:
    """Whether a memory's text says when something happened (for "when" questions)."""
    return _DATED.search(text) is not None


def time_window(query: str, reference: datetime) -> TimeWindow | None:
    """The window of the first time expression in `query`; relative ones ("last year") are
    counted back from `reference` (the search's as_of). None when the query names no time."""
    try:
        found = _absolute(query, reference) or _relative(query, reference)
    except OverflowError:  # "10000 years ago", "tomorrow" on 9999-12-31: no window
        return None
    if found is None:
        return None
    start, end, span, month = found
    expression = query[span[0] : span[1]]
    if month is not None:
        return TimeWindow(start, end, expression, month=month)
    before = _BEFORE_AFTER.search(query[: span[0]])
    if before is not None:
        word = before.group(1).lower()
        expression = f"{word} {expression}"
        if word in ("before", "until", "by"):
            return TimeWindow(EARLIEST, start if word == "before" else end, expression)
        return TimeWindow(end if word == "after" else start, LATEST, expression)
    return TimeWindow(start, end, expression)


Found = tuple[datetime, datetime, tuple[int, int], "int | None"]
# The full dates a query may name, each with how its match gives (year, month, day).
_DATES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[int, int, int]]], ...] = (
    (_ISO, lambda m: (int(m[1]), int(m[2]), int(m[3]))),
    (_MONTH_DAY_YEAR, lambda m: (int(m[3]), _MONTHS[m[1].lower()], int(m[2]))),
    (_DAY_MONTH_YEAR, lambda m: (int(m[3]), _MONTHS[m[2].lower()], int(m[1]))),
)


def _absolute(query: str, reference: datetime) -> Found | None:
    for pattern, parts in _DATES:
        match = pattern.search(query)
        if match is not None:
            try:
                day = datetime(*parts(match), tzinfo=timezone.utc)
            except ValueError:
                continue
            return day, day + timedelta(days=1), match.span(), None
    match = _MONTH_YEAR.search(query)
    if match is not None:
        start = _month_start(int(match[2]), _MONTHS[match[1].lower()])
        return start, _next_month(start), match.span(), None
    match = _MONTH_ONLY.search(query)
    if match is not None:
        # "in June": that month of any year up to the reference; which year the speaker meant
        # is the conversation's, and the query does not say.
        return EARLIEST, _end_of_day(reference), match.span(1), _MONTHS[match[1].lower()]
    match = _YEAR_ONLY.search(query)
    if match is not None:
        year = int(match[1] or match[2])
        if 1 <= year <= 9998:
            span = match.span(1) if match[1] else match.span(2)
            return _month_start(year, 1), _month_start(year + 1, 1), span, None
    return None


def _relative(query: str, reference: datetime) -> Found | None:
    today = reference.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    match = _AGO.search(query)
    if match is not None:
        count = _NUMBERS.get(match[1].lower()) or int(match[1])
        unit = match[2].lower()
        # "3 weeks ago" is around then: the unit on either side of the point.
        width = {"day": 1, "week": 7, "month": 30, "year": 365}[unit]
        point = today - timedelta(days=width * count)
        return _clamped(point - timedelta(days=width), point + timedelta(days=width + 1), match.span())
    match = _RELATIVE.search(query)
    if match is None:
        return None
    words = match[1].lower().split()
    if words[0] in ("today", "tonight"):
        return _clamped(today, today + timedelta(days=1), match.span())
    if words[0] == "yesterday":
        return _clamped(today - timedelta(days=1), today, match.span())
    unit, this = words[-1], words[0] == "this"
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        start = monday if this else monday - timedelta(days=7)
        if unit == "weekend":
            start += timedelta(days=5)
            return _clamped(start, start + timedelta(days=2), match.span())
        return _clamped(start, start + timedelta(days=7), match.span())
    if unit == "month":
        start = _month_start(today.year, today.month)
        if not this:
            start = _month_start(start.year - (start.month == 1), 12 if start.month == 1 else start.month - 1)
        return start, _next_month(start), match.span(), None
    year = today.year if this else today.year - 1
    return _month_start(year, 1), _month_start(year + 1, 1), match.span(), None


def _clamped(start: datetime, end: datetime, span: tuple[int, int]) -> Found:
    return max(start, EARLIEST), min(end, LATEST), span, None


def _end_of_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def _month_start(year: int, month: int) -> datetime:
    return datetime(max(1, min(year, 9999)), month, 1, tzinfo=timezone.utc)


def _next_month(start: datetime) -> datetime:
    if start.year == 9999 and start.month == 12:
        return LATEST
    return _month_start(start.year + (start.month == 12), 1 if start.month == 12 else start.month + 1)
