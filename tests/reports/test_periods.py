"""Schedule and period maths (pure): local fire times across DST, periods at year boundaries."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from reports.periods import (
    Period,
    Schedule,
    ScheduleError,
    fires_between,
    next_fire,
    parse_cron,
    period_containing,
    period_for_fire,
    previous_fire,
    previous_period,
)

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
UTC = dt.UTC


def utc(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_weekly_fires_at_local_time_across_spring_forward():
    # US DST starts Sunday 2024-03-10: 08:00 New York is 13:00Z before, 12:00Z after.
    weekly = Schedule("weekly", "America/New_York", dt.time(8, 0))
    first = next_fire(weekly, utc(2024, 3, 1))
    assert first == utc(2024, 3, 4, 13, 0)
    second = next_fire(weekly, first)
    assert second == utc(2024, 3, 11, 12, 0)
    assert second.astimezone(NY).hour == 8
    assert second.astimezone(UTC) - first.astimezone(UTC) == dt.timedelta(days=7, hours=-1)


def test_daily_fires_at_local_time_across_autumn_fold_in_berlin():
    # EU DST ends Sunday 2024-10-27: 07:00 Berlin is 05:00Z before, 06:00Z after.
    daily = Schedule("daily", "Europe/Berlin", dt.time(7, 0))
    fires = fires_between(daily, utc(2024, 10, 25), utc(2024, 10, 29))
    assert fires == [
        utc(2024, 10, 25, 5),
        utc(2024, 10, 26, 5),
        utc(2024, 10, 27, 6),
        utc(2024, 10, 28, 6),
    ]
    assert all(moment.astimezone(BERLIN).hour == 7 for moment in fires)


def test_a_time_in_the_spring_gap_fires_once_shifted_and_a_folded_time_fires_once():
    gap = Schedule("daily", "America/New_York", dt.time(2, 30))
    fires = fires_between(gap, utc(2024, 3, 9), utc(2024, 3, 12))
    local = [moment.astimezone(NY).strftime("%m-%d %H:%M") for moment in fires]
    assert local == ["03-09 02:30", "03-10 03:30", "03-11 02:30"]
    fold = Schedule("daily", "America/New_York", dt.time(1, 30))
    fires = fires_between(fold, utc(2024, 11, 2, 12), utc(2024, 11, 4, 12))
    # 01:30 happens twice on 3 November (EDT then EST): one firing, the first.
    assert fires == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]


def test_cron_fires_at_local_times_across_dst_and_once_in_the_fold():
    hourly_at_1 = Schedule("cron", "America/New_York", cron="30 1 * * *")
    fires = fires_between(hourly_at_1, utc(2024, 11, 2, 12), utc(2024, 11, 4, 12))
    assert fires == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]
    weekdays = Schedule("cron", "America/New_York", cron="0 8 * * mon-fri")
    fires = fires_between(weekdays, utc(2024, 3, 8), utc(2024, 3, 12))
    assert fires == [utc(2024, 3, 8, 13), utc(2024, 3, 11, 12)]


def test_previous_fire_is_the_inverse_of_next_fire():
    for schedule in [
        Schedule("daily", "Europe/Berlin", dt.time(7)),
        Schedule("weekly", "America/New_York", dt.time(8)),
        Schedule("monthly", "Asia/Shanghai", dt.time(9, 15)),
        Schedule("quarterly", "UTC", dt.time(0)),
        Schedule("cron", "Europe/Berlin", cron="*/20 6-8 * * 1"),
    ]:
        moment = utc(2024, 1, 1)
        for _ in range(20):
            fire = next_fire(schedule, moment)
            assert previous_fire(schedule, fire) == fire, schedule
            assert previous_fire(schedule, fire - dt.timedelta(seconds=1)) <= moment
            moment = fire


@pytest.mark.parametrize(
    ("fire", "start", "end"),
    [
        # A January firing reports on December of the year before.
        (dt.datetime(2025, 1, 1, 7, tzinfo=NY), dt.date(2024, 12, 1), dt.date(2025, 1, 1)),
        (dt.datetime(2024, 3, 1, 7, tzinfo=NY), dt.date(2024, 2, 1), dt.date(2024, 3, 1)),
        (dt.datetime(2024, 12, 1, 7, tzinfo=NY), dt.date(2024, 11, 1), dt.date(2024, 12, 1)),
    ],
)
def test_monthly_period_is_the_previous_calendar_month(fire, start, end):
    monthly = Schedule("monthly", "America/New_York", dt.time(7))
    period = period_for_fire(monthly, fire)
    assert period == Period(
        dt.datetime.combine(start, dt.time(), tzinfo=NY),
        dt.datetime.combine(end, dt.time(), tzinfo=NY),
    )
    assert next_fire(monthly, fire - dt.timedelta(days=1)) == fire


@pytest.mark.parametrize(
    ("fire_day", "start", "end"),
    [
        (dt.date(2025, 1, 1), dt.date(2024, 10, 1), dt.date(2025, 1, 1)),
        (dt.date(2025, 4, 1), dt.date(2025, 1, 1), dt.date(2025, 4, 1)),
        (dt.date(2024, 7, 1), dt.date(2024, 4, 1), dt.date(2024, 7, 1)),
        (dt.date(2024, 10, 1), dt.date(2024, 7, 1), dt.date(2024, 10, 1)),
    ],
)
def test_quarterly_period_is_the_previous_calendar_quarter(fire_day, start, end):
    quarterly = Schedule("quarterly", "Europe/Berlin", dt.time(6))
    fire = next_fire(
        quarterly, dt.datetime.combine(fire_day, dt.time(), tzinfo=BERLIN) - dt.timedelta(days=40)
    )
    assert fire.date() == fire_day
    period = period_for_fire(quarterly, fire)
    assert (period.start.date(), period.end.date()) == (start, end)
    assert period.start.time() == period.end.time() == dt.time(0)


def test_quarterly_fires_only_on_quarter_starts_over_a_year_boundary():
    quarterly = Schedule("quarterly", "UTC", dt.time(6))
    fires = fires_between(quarterly, utc(2024, 2, 15), utc(2025, 6, 1))
    assert [f.date().isoformat() for f in fires] == [
        "2024-04-01",
        "2024-07-01",
        "2024-10-01",
        "2025-01-01",
        "2025-04-01",
    ]


def test_previous_period_crosses_the_year_boundary():
    monthly = Schedule("monthly", "UTC")
    january = period_containing(monthly, dt.date(2025, 1, 15))
    assert previous_period(monthly, january) == Period(utc(2024, 12, 1), utc(2025, 1, 1))
    quarterly = Schedule("quarterly", "UTC")
    q1 = period_containing(quarterly, dt.date(2025, 2, 28))
    assert previous_period(quarterly, q1) == Period(utc(2024, 10, 1), utc(2025, 1, 1))
    weekly = Schedule("weekly", "UTC")
    # ISO week 1 of 2025 starts on Monday 30 December 2024.
    week = period_containing(weekly, dt.date(2025, 1, 1))
    assert week == Period(utc(2024, 12, 30), utc(2025, 1, 6))
    assert previous_period(weekly, week) == Period(utc(2024, 12, 23), utc(2024, 12, 30))


def test_a_week_spanning_the_dst_change_is_an_hour_short():
    weekly = Schedule("weekly", "America/New_York", dt.time(8))
    period = period_for_fire(weekly, utc(2024, 3, 11, 12))
    assert period.start == dt.datetime(2024, 3, 4, tzinfo=NY)
    assert period.end == dt.datetime(2024, 3, 11, tzinfo=NY)
    assert period.hours == 7 * 24 - 1


def test_the_period_of_a_fire_is_deterministic_within_a_delayed_tick():
    daily = Schedule("daily", "Europe/Berlin", dt.time(7))
    fire = next_fire(daily, utc(2024, 5, 1))
    late = fire + dt.timedelta(minutes=50)
    assert period_for_fire(daily, fire) == period_for_fire(daily, previous_fire(daily, late))


def test_cron_period_runs_from_the_previous_firing():
    twice_a_day = Schedule("cron", "UTC", cron="0 6,18 * * *")
    period = period_for_fire(twice_a_day, utc(2024, 1, 1, 6))
    assert period == Period(utc(2023, 12, 31, 18), utc(2024, 1, 1, 6))
    assert period_containing(twice_a_day, utc(2024, 1, 1, 7)) == Period(
        utc(2024, 1, 1, 6), utc(2024, 1, 1, 18)
    )


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("0 7 * *", "5 fields"),
        ("61 7 * * *", "outside 0-59"),
        ("0 7 * * funday", "not a number"),
        ("0 7 */0 * *", "Bad step"),
        ("0 7 5-1 * *", "outside"),
    ],
)
def test_bad_cron_names_the_field(expression, fragment):
    with pytest.raises(ScheduleError) as caught:
        parse_cron(expression)
    assert caught.value.field == "cron"
    assert fragment in caught.value.message


def test_cron_that_never_fires_is_an_error():
    with pytest.raises(ScheduleError, match="Never fires"):
        next_fire(Schedule("cron", "UTC", cron="0 0 31 2 *"), utc(2024, 1, 1))


def test_unknown_frequency_and_timezone_name_the_field():
    with pytest.raises(ScheduleError) as caught:
        Schedule("hourly", "UTC")
    assert caught.value.field == "frequency"
    with pytest.raises(ScheduleError) as caught:
        Schedule("daily", "Mars/Olympus")
    assert caught.value.field == "timezone"


def test_cron_names_and_sunday_as_seven():
    cron = parse_cron("0 9 * jan,jul sun")
    assert cron.months == {1, 7}
    assert cron.weekdays == {0}
    assert parse_cron("0 9 * * 7").weekdays == {0}
