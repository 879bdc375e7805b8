"""A RUNNING job in an export counts up to the export's as-of time, never further: days, weeks
and teams stay at or under 100 % and equal allocated ÷ available over the same hours."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting import selectors
from accounting.coverage import record_spans
from accounting.models import ImportJob, UsageDailyRollup, UsageRecord
from accounting.rollups import refresh_usage_rollups
from accounting.usage_preview import preview_usage
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
        assert row["available_card_hours"] == pytest.approx(DAY_CARD_HOURS)
        assert row["allocated_card_hours"] == pytest.approx(allocated)
        assert row["utilization"] == pytest.approx(allocated / DAY_CARD_HOURS)
    (week,) = report("week")
    assert week["utilization"] == pytest.approx(416 / 768)  # 192 + 224 of 2 × 384
    teams = {row["team"]: row["utilization"] for row in report("week", ("team",))}
    assert teams["team-b"] == pytest.approx(8 * 34 / 768)


def test_the_rollups_and_the_alert_window_stop_at_the_as_of_time(alpha, import_text):
    import_text(alpha, ordinary_export())
    refresh_usage_rollups([alpha.pk])
    per_day = {
        row.day: row.allocated_card_hours
        for row in UsageDailyRollup.objects.filter(account="team-b").order_by("day")
    }
    # 12 h on 03-01 and 22 h on 03-02, nothing on the days the export never saw.
    assert per_day == {dt.date(2024, 3, 1): pytest.approx(96), dt.date(2024, 3, 2): 176}
    assert record_spans([alpha.pk], WEEK_START, WEEK_END) == {
        alpha.pk: (WEEK_START, ORDINARY_AS_OF)
    }


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


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    node_plans=st.lists(st.lists(JOB, min_size=1, max_size=4), min_size=2, max_size=2),
    running_extra_h=st.lists(st.integers(0, 200), min_size=2, max_size=2),
    pending_after_h=st.none() | st.integers(0, 400),
)
def test_any_export_with_running_jobs_stays_within_the_covered_hours(
    alpha, import_text, node_plans, running_extra_h, pending_after_h
):
    exported = random_export(node_plans, running_extra_h, pending_after_h)
    with transaction.atomic():
        import_text(alpha, exported.text())
        covered_from = min(job.start for job in exported.jobs).replace(hour=0)
        last = exported.as_of
        midnight = last.replace(hour=0, minute=0, second=0)
        covered_until = midnight if last == midnight else midnight + dt.timedelta(days=1)
        end = max(covered_until, covered_from + dt.timedelta(days=1))
        for granularity in ("day", "week"):
            scope = selectors.AccountingScope(EPOCH, end, granularity, group_by=("cluster", "team"))
            for row in selectors.utilization_report(scope)["rows"]:
                begin = dt.datetime.fromisoformat(row["bucket_start"]).astimezone(UTC)
                until = dt.datetime.fromisoformat(row["bucket_end"]).astimezone(UTC)
                hours = (min(until, covered_until) - max(begin, covered_from)).total_seconds()
                assert row["available_card_hours"] == pytest.approx(16 * hours / 3600)
                allocated = exported.allocated(begin, until, row["team"])
                assert row["allocated_card_hours"] == pytest.approx(allocated, abs=1e-6)
                assert row["utilization"] == pytest.approx(allocated / (16 * hours / 3600))
                assert row["utilization"] <= 1.0 + 1e-9
        transaction.set_rollback(True)
