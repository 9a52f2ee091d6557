"""The times and intervals the service takes in requests (server/models.py): each a field type
whose JSON Schema says exactly what its validator accepts (docs/server.md#the-contract). Apart
from models.py so that models.py stays readable in one sitting."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any

from pydantic import AfterValidator, Field, PlainValidator, WithJsonSchema

from dspy_memory.errors import InvalidInputError
from dspy_memory.retention_settings import MAX_INTERVAL_SECONDS
from dspy_memory.util.text import shown
from dspy_memory.util.timeutil import to_datetime

# A time: an RFC 3339 date (midnight UTC) or date-time. The library stores 0001-01-01 to
# 9999-12-31 UTC; a date-time on the first or last day may fall outside once converted to UTC,
# so the service takes date-times from the day after the first to the day before the last.
_DATE = r"\d{4}-\d{2}-\d{2}"
_DATE_TIME = _DATE + r"[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"
_EDGE_DAYS = r"^(?!0001-01-01|9999-12-31)"
TIME_HELP = "an RFC 3339 date (YYYY-MM-DD, midnight UTC) or date-time with an offset (YYYY-MM-DDThh:mm:ssZ)"


def _time(value: str) -> str:
    try:
        if re.fullmatch(_DATE, value):
            date.fromisoformat(value)
            return value
        if re.fullmatch(_DATE_TIME, value) and re.match(_EDGE_DAYS, value):
            to_datetime(value)
            return value
    except (ValueError, InvalidInputError):
        pass
    raise ValueError(f"not {TIME_HELP}; date-times from 0001-01-02 to 9999-12-30")


When = Annotated[
    str,
    AfterValidator(_time),
    Field(
        json_schema_extra={
            "anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time", "pattern": _EDGE_DAYS},
            ]
        },
        description=TIME_HELP,
    ),
]

# An interval: seconds, or a number and a unit. The service takes 1 second to 10^10 seconds
# (about 317 years; a policy's limit in the library too): a time that far from now is still one
# the file can store (expires_in) and one a datetime can hold (a policy's cutoff, now minus
# erase_after), and no length rounds to nothing (a timedelta counts whole microseconds). [0-9],
# not \d: JSON Schema's \d is ASCII digits, Python's any Unicode digit.
INTERVAL_PATTERN = r"^[1-9][0-9]{0,3}(\.[0-9]{1,9})?[smhdw]$"  # the largest, 9999.9...w, is < 10^10 s
INTERVAL_HELP = (
    'an interval: a number and a unit, s m h d or w ("90m", "24h", "30d", "2w"; 1 to 9999.x), '
    "or a number of seconds (1 to 10^10)"
)


def _interval(value: Any) -> float | str:
    """One check with one message, not one per alternative (seconds, text) as a union gives."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if 1 <= value <= MAX_INTERVAL_SECONDS:
            return float(value)
    elif isinstance(value, str) and re.fullmatch(INTERVAL_PATTERN, value):
        return value
    raise ValueError(f"{shown(value)} is not {INTERVAL_HELP}")


Interval = Annotated[
    float | str,
    PlainValidator(_interval),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 1, "maximum": MAX_INTERVAL_SECONDS},
                {"type": "string", "pattern": INTERVAL_PATTERN},
            ],
            "description": INTERVAL_HELP,
            "examples": ["24h", 3600],
        }
    ),
]
