"""The beat tick: schedules fire at the right local times across DST, once per period."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from freezegun import freeze_time

from reports import services
from reports.models import Report, ReportSchedule

pytestmark = pytest.mark.django_db

NY = ZoneInfo("America/New_York")


def weekly_ny() -> ReportSchedule:
    return services.save_schedule(
        ReportSchedule(
            name="Weekly utilization",
            frequency="weekly",
            timezone="America/New_York",
            send_time=dt.time(8, 0),
            recipient_addresses=["owner@example.com"],
        )
    )


def periods_of(schedule) -> list[tuple[dt.datetime, dt.datetime]]:
    return [
        (r.period_start.astimezone(NY), r.period_end.astimezone(NY))
        for r in Report.objects.filter(schedule=schedule).order_by("period_start")
    ]


def test_weekly_schedule_fires_at_8_local_before_and_after_spring_forward():
    with freeze_time("2024-03-01 12:00:00"):
        schedule = weekly_ny()
    assert schedule.next_run_at == dt.datetime(2024, 3, 4, 13, 0, tzinfo=dt.UTC)  # 08:00 EST
    with freeze_time("2024-03-04 12:59:59"):
        assert services.tick() == []
    with freeze_time("2024-03-04 13:00:00"):
        assert len(services.tick()) == 1
        assert services.tick() == []  # a duplicated tick in the same minute
    with freeze_time("2024-03-11 11:59:00"):  # 07:59 EDT: the first Monday after the change
        assert services.tick() == []
    with freeze_time("2024-03-11 12:00:30"):  # 08:00 EDT, a late tick
        assert len(services.tick()) == 1
    with freeze_time("2024-03-11 13:00:00"):  # would be 08:00 EST: nothing fires twice
        assert services.tick() == []
    assert periods_of(schedule) == [
        (dt.datetime(2024, 2, 26, tzinfo=NY), dt.datetime(2024, 3, 4, tzinfo=NY)),
        (dt.datetime(2024, 3, 4, tzinfo=NY), dt.datetime(2024, 3, 11, tzinfo=NY)),
    ]
    schedule.refresh_from_db()
    assert schedule.next_run_at == dt.datetime(2024, 3, 18, 12, 0, tzinfo=dt.UTC)


def test_daily_schedule_in_berlin_fires_at_7_local_across_autumn_fold():
    with freeze_time("2024-10-25 12:00:00"):
        schedule = services.save_schedule(
            ReportSchedule(name="Daily", frequency="daily", timezone="Europe/Berlin")
        )
    fired = []
    # Tick every 30 minutes for three days: firings only at 07:00 Berlin (05:00Z, then 06:00Z).
    # One frozen clock moved along (starting freezegun scans every loaded module: once).
    moment = dt.datetime(2024, 10, 25, 12, 0, tzinfo=dt.UTC)
    with freeze_time(moment) as clock:
        while moment < dt.datetime(2024, 10, 28, 12, 0, tzinfo=dt.UTC):
            clock.move_to(moment)
            if services.tick():
                fired.append(moment)
            moment += dt.timedelta(minutes=30)
    assert fired == [
        dt.datetime(2024, 10, 26, 5, 0, tzinfo=dt.UTC),
        dt.datetime(2024, 10, 27, 6, 0, tzinfo=dt.UTC),
        dt.datetime(2024, 10, 28, 6, 0, tzinfo=dt.UTC),
    ]
    berlin = ZoneInfo("Europe/Berlin")
    days = [r.period_start.astimezone(berlin).date().isoformat() for r in schedule.reports.all()]
    assert sorted(days) == ["2024-10-25", "2024-10-26", "2024-10-27"]
    # The report of Sunday 27 October covers the 25-hour day.
    sunday = schedule.reports.get(period_start=dt.datetime(2024, 10, 26, 22, tzinfo=dt.UTC))
    assert sunday.period.hours == 25


def test_monthly_and_quarterly_reports_at_the_year_boundary():
    with freeze_time("2024-12-15 00:00:00"):
        monthly = services.save_schedule(
            ReportSchedule(name="Monthly cost", frequency="monthly", template="cost_chargeback")
        )
        quarterly = services.save_schedule(
            ReportSchedule(
                name="Quarterly review", frequency="quarterly", template="efficiency_review"
            )
        )
    with freeze_time("2025-01-01 07:00:00"):
        assert len(services.tick()) == 2
    month = monthly.reports.get()
    quarter = quarterly.reports.get()
    assert (month.period_start, month.period_end) == (
        dt.datetime(2024, 12, 1, tzinfo=dt.UTC),
        dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    )
    assert (quarter.period_start, quarter.period_end) == (
        dt.datetime(2024, 10, 1, tzinfo=dt.UTC),
        dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    )


def test_a_duplicated_tick_that_slips_past_the_claim_still_makes_one_report():
    with freeze_time("2024-03-01 12:00:00"):
        schedule = weekly_ny()
    old_next = schedule.next_run_at
    with freeze_time("2024-03-04 13:00:00"):
        services.tick()
        # Replay: as if a second beat had read the schedule before the first advanced it.
        ReportSchedule.objects.filter(pk=schedule.pk).update(next_run_at=old_next)
        assert services.tick() == []
    assert Report.objects.filter(schedule=schedule).count() == 1


def test_paused_schedules_do_not_fire_and_resume_forward():
    with freeze_time("2024-03-01 12:00:00"):
        schedule = weekly_ny()
        services.set_enabled(schedule, False)
        assert schedule.next_run_at is None
    with freeze_time("2024-03-20 12:00:00"):
        assert services.tick() == []
        services.set_enabled(schedule, True)
    assert schedule.next_run_at == dt.datetime(2024, 3, 25, 12, 0, tzinfo=dt.UTC)
    assert not Report.objects.exists()


def test_a_beat_that_was_down_catches_up_on_missed_periods():
    with freeze_time("2024-01-01 00:00:00"):
        schedule = services.save_schedule(
            ReportSchedule(name="Daily UTC", frequency="daily", timezone="UTC")
        )
    with freeze_time("2024-01-03 09:00:00"):  # missed the 1st, 2nd and 3rd at 07:00
        assert len(services.tick()) == 3
    assert [r.period_start.day for r in schedule.reports.order_by("period_start")] == [31, 1, 2]


def test_the_beat_entry_exists_in_the_database():
    from django_celery_beat.models import PeriodicTask

    tick = PeriodicTask.objects.get(task="reports.tick")
    assert tick.enabled and tick.interval.every == 1 and tick.interval.period == "minutes"
