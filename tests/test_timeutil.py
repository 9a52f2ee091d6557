from datetime import date, datetime, timedelta, timezone

import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError
from dspy_memory.util.timeutil import from_db, now_db, to_datetime, to_db


def test_formats_round_trip_and_sort_as_text():
    values = ["2024-03-01", "2024-03-01T09:30:00+02:00", "2024-03-01T07:30:00Z", 1709278200, date(2024, 1, 2)]
    stored = [to_db(value) for value in values]
    assert all(len(text) == len(stored[0]) and text.endswith("Z") for text in stored)
    assert sorted(stored) == sorted(stored, key=from_db)
    assert from_db(to_db("2024-03-01T09:30:00+02:00")) == datetime(2024, 3, 1, 7, 30, tzinfo=timezone.utc)
    assert len(now_db()) == len(stored[0])


def test_naive_datetimes_are_utc():
    naive = datetime(2024, 5, 1, 12, 0)
    assert to_datetime(naive) == naive.replace(tzinfo=timezone.utc)
    aware = datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert to_datetime(aware).hour == 17


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("0999-06-01", "0999-06-01T00:00:00.000000Z"),
        ("0001-01-01", "0001-01-01T00:00:00.000000Z"),
        (date(42, 7, 4), "0042-07-04T00:00:00.000000Z"),
        (-62135596800, "0001-01-01T00:00:00.000000Z"),
        ("9999-12-31T23:59:59+01:00", "9999-12-31T22:59:59.000000Z"),
        (datetime.max, "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_every_storable_year_is_written_with_four_digits(value, stored):
    """strftime("%Y") writes '999' on Linux: such a row sorted after '2024' as text and could
    not be read back."""
    assert to_db(value) == stored
    assert from_db(stored) == to_datetime(value)
    recent = to_db("2024-01-01")
    assert (stored < recent) == (from_db(stored) < from_db(recent))  # text order is time order


@pytest.mark.parametrize(
    "bad",
    [
        "yesterday",
        "2024-13-45",
        "",
        "2024-03-01\ud800",
        "2024-03-01\x00",
        "0000-01-01",
        "10000-01-01",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        datetime.min.replace(tzinfo=timezone(timedelta(hours=1))),
        1e20,
        -1e20,
        2**70,
        -1e11,
        float("nan"),
        float("inf"),
        True,
        object(),
        [2024],
    ],
)
def test_bad_times_raise_clear_errors(bad):
    with pytest.raises(InvalidInputError) as info:
        to_datetime(bad, name="at")
    message = str(info.value)
    assert message.startswith("at=") and "between 0001-01-01 and 9999-12-31 UTC" in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_a_year_before_1000_is_stored_readable_and_in_order(tmp_path):
    """The bug report: add(at="0999-06-01") stored '999-06-01...' and then raised; every later
    open of the file failed on that row. Now it is stored padded, read back, and sorts first."""
    path = str(tmp_path / "m.db")
    with Memory(path, embedder=HashEmbedder(64)) as memory:
        old = memory.add("An old chronicle.", user_id="ada", at="0999-06-01")
        memory.add("A recent note.", user_id="ada", at="2024-06-01")
        assert old.episodes[0].occurred_at == datetime(999, 6, 1, tzinfo=timezone.utc)
    with Memory(path, embedder=HashEmbedder(64)) as memory:
        assert [e.content for e in memory.store.episodes.list(memory_scope("ada"))] == [
            "An old chronicle.",
            "A recent note.",
        ]
        hits = memory.search("chronicle", user_id="ada", as_of="1000-01-01")
        assert [hit.content for hit in hits] == ["An old chronicle."]
        assert "0999-06-01" in memory.context("chronicle", user_id="ada", as_of="1000-01-01").text


def test_an_add_with_a_bad_time_stores_nothing(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(64)) as memory:
        for at in ("9999-12-31T23:59:59-01:00", 1e20):
            with pytest.raises(InvalidInputError, match="between 0001-01-01 and 9999-12-31 UTC"):
                memory.add(["fine", {"content": "late", "at": at}], user_id="ada")
        with memory.store.snapshot() as conn:
            assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == 0


def memory_scope(user_id):
    from dspy_memory.types import Scope

    return Scope.of(user_id)
