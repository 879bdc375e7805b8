"""A RUNNING job in an export counts up to the export's as-of time, never further, and the
available hours run through that instant (not to the midnight after it): days, weeks and teams
stay at or under 100 % and equal allocated ÷ available over the same hours, on the records,
the dashboards' daily rollups and the Costs figures alike."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting import selectors
from accounting.coverage import coverage_windows
from accounting.models import ImportJob, UsageDailyRollup, UsageRecord
from accounting.rollups import refresh_usage_rollups, rollup_usage_frame
from accounting.usage_preview import preview_usage
from engine.defaults import FACTOR_FLOOR
from tests.support.running_exports import (
    EPOCH,
    ORDINARY_AS_OF,
    ORDINARY_DAYS,
    later_export,
    ordinary_export,
    random_export,
)

pytestmark = pytest.mark.django_db
UTC = dt.UTC
WEEK_START = dt.datetime(2024, 3, 1, tzinfo=UTC)
WEEK_END = dt.datetime(2024, 3, 8, tzinfo=UTC)
DAY_CARD_HOURS = 16 * 24.0
# The as-of day (2024-03-02) is available up to the as-of time, 22:00: 22 h, not 24.
ORDINARY_AVAILABLE = {dt.date(2024, 3, 1): DAY_CARD_HOURS, dt.date(2024, 3, 2): 16 * 22.0}


def report(granularity: str, group_by: tuple[str, ...] = ("cluster",)) -> list[dict]:
    scope = selectors.AccountingScope(WEEK_START, WEEK_END, granularity, group_by=group_by)
    return selectors.utilization_report(scope)["rows"]


def test_a_running_job_counts_up_to_the_files_latest_time(alpha, import_text):
    job, counts = import_text(alpha, ordinary_export())
    job.refresh_from_db()
    assert (job.as_of, job.as_of_source) == (ORDINARY_AS_OF, "file")
    running = UsageRecord.objects.get(job_id="2002")
    # Started 03-01 12:00, Elapsed 3 days, but the file ends 03-02 22:00: 34 h, not 72.
    assert running.end is None and running.duration_h == pytest.approx(34.0)
    assert running.card_hours == pytest.approx(8 * 34.0)
    days = {row["bucket_start"][:10]: row for row in report("day")}
    assert sorted(days) == ["2024-03-01", "2024-03-02"]  # after the as-of day: no data
    for day, allocated in ORDINARY_DAYS.items():
        row = days[day.isoformat()]
        assert row["available_card_hours"] == pytest.approx(ORDINARY_AVAILABLE[day])
        assert row["allocated_card_hours"] == pytest.approx(allocated)
        assert row["utilization"] == pytest.approx(allocated / ORDINARY_AVAILABLE[day])
    (week,) = report("week")
    assert week["available_card_hours"] == pytest.approx(384 + 352)
    assert week["utilization"] == pytest.approx(416 / 736)  # 192 + 224 of 384 + 352
    teams = {row["team"]: row["utilization"] for row in report("week", ("team",))}
    assert teams["team-b"] == pytest.approx(8 * 34 / 736)


def test_the_rollups_and_the_covered_window_stop_at_the_as_of_time(alpha, import_text):
    import_text(alpha, ordinary_export())
    refresh_usage_rollups([alpha.pk])
    per_day = {
        row.day: row.allocated_card_hours
        for row in UsageDailyRollup.objects.filter(account="team-b").order_by("day")
    }
    # 12 h on 03-01 and 22 h on 03-02, nothing on the days the export never saw.
    assert per_day == {dt.date(2024, 3, 1): pytest.approx(96), dt.date(2024, 3, 2): 176}
    (window,) = coverage_windows([alpha.pk], WEEK_START, WEEK_END).to_dict("records")
    assert (window["covered_from"], window["covered_until"]) == (WEEK_START, ORDINARY_AS_OF)


def test_the_costs_divide_by_the_hours_up_to_the_as_of_time(alpha, import_text):
    import_text(alpha, ordinary_export())
    scope = selectors.AccountingScope(WEEK_START, WEEK_END, "day", group_by=("cluster",))
    days = {row["bucket_start"][:10]: row for row in selectors.cost_report(scope)["rows"]}
    as_of_day = days["2024-03-02"]
    # 22 h measured (224 of 352 card-hours), the 2 h after 22:00 priced apart, as no data.
    assert as_of_day["uncovered_card_hours"] == pytest.approx(16 * 2.0)
    assert as_of_day["card_hours"] == pytest.approx(DAY_CARD_HOURS)
    assert as_of_day["factors"]["utilization"] == pytest.approx(224 / 352)
    assert days["2024-03-03"]["factors"]["utilization"] is None


def test_the_next_import_replaces_the_running_record_once_the_job_ended(alpha, import_text):
    import_text(alpha, ordinary_export())
    job, counts = import_text(alpha, later_export())
    assert counts.records_created == 1  # job 2004 ran
    assert counts.records_updated == 1  # job 2002 ended: the same record, now finished
    ended = UsageRecord.objects.get(job_id="2002")
    assert ended.state == "completed" and ended.end == dt.datetime(2024, 3, 4, 12, tzinfo=UTC)
    assert ended.card_hours == pytest.approx(8 * 72.0)
    assert UsageRecord.objects.filter(job_id="2002").count() == 1
    job.refresh_from_db()
    assert job.as_of == dt.datetime(2024, 3, 4, 12, tzinfo=UTC)


def test_the_preview_states_the_as_of_time_and_runs_to_it(alpha):
    import io

    job = ImportJob(kind="sacct", cluster=alpha, timezone="UTC", parse_options={})
    preview = preview_usage(job, io.BytesIO(ordinary_export().encode()))
    assert preview["valid"] and preview["running"] == 1
    assert preview["as_of"] == ORDINARY_AS_OF.isoformat()
    assert preview["as_of_text"] == "as of 2024-03-02 22:00 UTC (the latest time in the file)"
    assert preview["last_end"] == ORDINARY_AS_OF.isoformat()  # the running job's, not 12:00
    assert preview["card_hours"] == pytest.approx(96 + 272 + 48)


def test_a_given_as_of_only_speaks_when_the_file_does_not(alpha, import_text):
    given = dt.datetime(2024, 3, 5, tzinfo=UTC)
    job, counts = import_text(alpha, ordinary_export(), exported_at=given)
    job.refresh_from_db()
    assert (job.as_of, job.as_of_source) == (ORDINARY_AS_OF, "file")
    assert any("was not used" in warning for warning in counts.warnings)


# -- the property ------------------------------------------------------------------------------

JOB = st.tuples(
    st.integers(0, 30),  # gap before the job, hours
    st.integers(1, 60),  # planned hours
    st.integers(1, 8),  # cards of the node's 8
    st.integers(0, 2),  # team
)
CARDS = 16
HOUR_S = 3600.0


def covered_h(begin: dt.datetime, until: dt.datetime, window: tuple[dt.datetime, ...]) -> float:
    """Hours of [begin, until) inside the covered window."""
    return max((min(until, window[1]) - max(begin, window[0])).total_seconds() / HOUR_S, 0.0)


def bounds(row: dict) -> tuple[dt.datetime, dt.datetime]:
    return tuple(  # type: ignore[return-value]
        pd.Timestamp(row[name]).tz_convert("UTC").to_pydatetime()
        for name in ("bucket_start", "bucket_end")
    )


def dashboard_rows(scope: selectors.AccountingScope, by: list[str]) -> list[dict]:
    """What the Usage page computes: the same report fed from the daily rollups."""
    usage = rollup_usage_frame(
        None,
        scope.period_start,
        scope.period_end,
        keys=["team"] if "account" in by else [],
        edges=scope.edges(),
        granularity=scope.granularity,
    )
    result = selectors.measured_utilization(scope, by, usage=usage)
    return selectors.add_labels(result, by).to_dict("records")


def check_utilization(exported, window, rows: list[dict]) -> None:
    """Each row: available = the cards × its covered hours, allocated = what the export holds
    there (counted by hand), utilization = their ratio and at most 100 %."""
    for row in rows:
        begin, until = bounds(row)
        hours = covered_h(begin, until, window)
        assert hours > 0  # no row outside the covered window: no data, not 0 %
        team = row.get("team")
        allocated = exported.allocated(begin, until, team)
        assert row["available_card_hours"] == pytest.approx(CARDS * hours)
        assert row["allocated_card_hours"] == pytest.approx(allocated, abs=1e-6)
        assert row["utilization"] == pytest.approx(allocated / (CARDS * hours), rel=1e-6, abs=1e-9)
        assert row["utilization"] <= 1.0 + 1e-9


def covered_days(window: tuple[dt.datetime, ...]) -> set[dt.date]:
    """The days the window reaches into, the as-of day included."""
    days, day = set(), window[0].date()
    while dt.datetime.combine(day, dt.time(), UTC) < window[1]:
        days.add(day)
        day += dt.timedelta(days=1)
    return days


def check_costs(exported, window, rows: list[dict]) -> None:
    """Costs price every card-hour of a day, and measure over the covered ones only."""
    for row in rows:
        begin, until = bounds(row)
        hours = covered_h(begin, until, window)
        day_h = (until - begin).total_seconds() / HOUR_S
        assert row["uncovered_card_hours"] == pytest.approx(CARDS * (day_h - hours))
        utilization = row["factors"]["utilization"]
        if hours == 0:
            assert utilization is None
            continue
        expected = exported.allocated(begin, until) / (CARDS * hours)
        assert utilization == pytest.approx(max(expected, FACTOR_FLOOR), abs=1e-6)
        assert utilization <= 1.0 + 1e-9


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    node_plans=st.lists(st.lists(JOB, min_size=1, max_size=4), min_size=2, max_size=2),
    running_extra_h=st.lists(st.integers(0, 200), min_size=2, max_size=2),
    as_of_after_s=st.none() | st.integers(0, 24 * 3600 - 1),
)
def test_any_export_with_running_jobs_stays_within_the_covered_hours(
    alpha, import_text, node_plans, running_extra_h, as_of_after_s
):
    exported = random_export(node_plans, running_extra_h, None)
    if as_of_after_s is not None:
        # A pending job submitted later: the as-of time falls anywhere in a day, to the second.
        exported.pending_submit = exported.as_of + dt.timedelta(seconds=as_of_after_s)
    first = min(job.start for job in exported.jobs)
    window = (first.replace(hour=0, minute=0, second=0), exported.as_of)
    # The period runs a whole day past the as-of day: that day has no data.
    end = window[1].replace(hour=0, minute=0, second=0) + dt.timedelta(days=2)
    with transaction.atomic():
        import_text(alpha, exported.text())
        refresh_usage_rollups([alpha.pk])
        covered = coverage_windows([alpha.pk], EPOCH, end)
        # Running jobs alone, started at a midnight and seen at that instant: no hour is covered.
        expected = [window] if window[1] > window[0] else []
        assert list(zip(covered["covered_from"], covered["covered_until"], strict=True)) == expected
        for granularity in ("day", "week"):
            for group_by in (("cluster",), ("cluster", "team")):
                scope = selectors.AccountingScope(EPOCH, end, granularity, group_by=group_by)
                rows = selectors.utilization_report(scope)["rows"]
                by = [selectors.GROUP_COLUMNS[name] for name in group_by]
                dashboard = dashboard_rows(scope, by)
                for figures in (rows, dashboard):
                    check_utilization(exported, window, figures)
                if (granularity, group_by) == ("day", ("cluster",)):
                    for figures in (rows, dashboard):
                        assert {bounds(row)[0].date() for row in figures} == covered_days(window)
        days = selectors.AccountingScope(EPOCH, end, "day", group_by=("cluster",))
        check_costs(exported, window, selectors.cost_report(days)["rows"])
        transaction.set_rollback(True)
