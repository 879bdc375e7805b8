"""The covered window ends at the export's as-of instant, not at the midnight after it: an
export seen at 09:00 covers 9 h of that day. Without an as-of time, or for records the latest
export does not vouch for, the window still ends at the midnight after the last record."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from engine.coverage import coverage_of, covered_windows, window_end

UTC = dt.UTC
START = dt.datetime(2026, 11, 1, tzinfo=UTC)
END = dt.datetime(2026, 11, 8, tzinfo=UTC)
CARDS = 8.0


def at(day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def windows(last: dt.datetime, as_of: dt.datetime | None) -> pd.DataFrame:
    spans = pd.DataFrame(
        {
            "cluster": [1],
            "first": [at(2, 6)],
            "last": [last],
            "as_of": pd.Series([as_of], dtype="datetime64[us, UTC]"),
        }
    )
    return covered_windows(spans, START, END)


def inventory() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": [1],
            "cards": [CARDS],
            "in_service_from": pd.to_datetime(["2026-01-01"], utc=True),
            "in_service_until": pd.Series([pd.NaT], dtype="datetime64[us, UTC]"),
        }
    )


def test_an_export_seen_at_nine_covers_nine_hours_of_that_day():
    covered = windows(last=at(4, 7), as_of=at(4, 9))
    assert covered.loc[0, "covered_from"] == pd.Timestamp(at(2))
    assert covered.loc[0, "covered_until"] == pd.Timestamp(at(4, 9))
    day = coverage_of(inventory(), covered, at(4), at(5))
    assert day.covered_card_hours == pytest.approx(CARDS * 9)
    assert day.period_card_hours == pytest.approx(CARDS * 24)
    # The two days before, whole, and 9 h: 57 h of the week's 168.
    week = coverage_of(inventory(), covered, START, END)
    assert week.covered_card_hours == pytest.approx(CARDS * 57)
    assert week.covered_days == pytest.approx(57 / 24)


def test_the_as_of_to_the_second_and_days_after_the_last_record():
    # Records end on the 3rd; the export was seen on the 5th at 17:42:30: idle in between.
    covered = windows(last=at(3, 12), as_of=at(5, 17, 42) + dt.timedelta(seconds=30))
    assert covered.loc[0, "covered_until"] == pd.Timestamp("2026-11-05 17:42:30", tz="UTC")


def test_without_an_as_of_or_past_it_the_last_records_day_is_whole():
    assert windows(last=at(4, 7), as_of=None).loc[0, "covered_until"] == pd.Timestamp(at(5))
    # A record later than the latest as-of (not from that export): its day counts whole.
    past = windows(last=at(4, 7), as_of=at(3, 20))
    assert past.loc[0, "covered_until"] == pd.Timestamp(at(5))
    # An as-of exactly at a midnight ends the window there, not a day later.
    assert windows(last=at(3, 7), as_of=at(4)).loc[0, "covered_until"] == pd.Timestamp(at(4))


def test_the_as_of_end_clips_to_the_period_and_spans_without_as_of_still_work():
    assert windows(last=at(9, 1), as_of=at(9, 5)).loc[0, "covered_until"] == pd.Timestamp(END)
    spans = pd.DataFrame({"cluster": [1], "first": [at(2, 6)], "last": [at(4, 7)]})
    assert covered_windows(spans, START, END).loc[0, "covered_until"] == pd.Timestamp(at(5))


def test_window_end_element_wise():
    last = pd.Series(pd.to_datetime(["2026-11-04 07:00", "2026-11-04 07:00"], utc=True))
    as_of = pd.Series(pd.to_datetime(["2026-11-04 09:00", None], utc=True))
    assert window_end(last, as_of).tolist() == [pd.Timestamp(at(4, 9)), pd.Timestamp(at(5))]
