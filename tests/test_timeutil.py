from datetime import date, datetime, timedelta, timezone

import pytest

from dspy_memory.timeutil import from_db, to_datetime, to_db


def test_formats_round_trip_and_sort_as_text():
    values = ["2024-03-01", "2024-03-01T09:30:00+02:00", "2024-03-01T07:30:00Z", 1709278200, date(2024, 1, 2)]
    stored = [to_db(value) for value in values]
    assert all(len(text) == len(stored[0]) and text.endswith("Z") for text in stored)
    assert sorted(stored) == sorted(stored, key=from_db)
    assert from_db(to_db("2024-03-01T09:30:00+02:00")) == datetime(2024, 3, 1, 7, 30, tzinfo=timezone.utc)


def test_naive_datetimes_are_utc():
    naive = datetime(2024, 5, 1, 12, 0)
    assert to_datetime(naive) == naive.replace(tzinfo=timezone.utc)
    aware = datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert to_datetime(aware).hour == 17


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-45", "", float("nan"), True, object()])
def test_bad_times_raise_clear_errors(bad):
    with pytest.raises((ValueError, TypeError)) as info:
        to_datetime(bad, name="at")
    assert "at" in str(info.value)
