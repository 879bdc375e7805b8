"""core.jobs.recovery without a worker: which jobs count as stalled, what is re-sent, and once."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from core.jobs import recovery
from core.jobs.dispatch import WORKERS_UNAVAILABLE
from planner.models import Analysis, AnalysisPart

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_heartbeats(settings, tmp_path):
    """SQLite heartbeats are files named by job id, and ids are reused after each test's
    rollback: a beat left by an earlier test must not make this test's job look alive."""
    settings.FLEETWISE_HEARTBEAT_DIR = str(tmp_path / "heartbeats")


@pytest.fixture
def sent(monkeypatch):
    calls: list[tuple] = []
    monkeypatch.setattr(recovery, "_send", lambda name, *args: calls.append((name, *args)))
    return calls


@pytest.fixture
def running_analysis(demo_fleet, settings):
    from inventory.models import Cluster

    settings.FLEETWISE_STALLED_AFTER_S = 300
    clusters = sorted(Cluster.objects.values_list("pk", flat=True))
    analysis = Analysis.objects.create(
        scope="fleet",
        period_start=dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
        period_end=dt.datetime(2024, 4, 1, tzinfo=dt.UTC),
        status="running",
        parts_total=len(clusters),
        started_at=timezone.now() - dt.timedelta(minutes=20),
        heartbeat_at=timezone.now() - dt.timedelta(minutes=6),
    )
    AnalysisPart.objects.create(
        analysis=analysis, run_id=analysis.run_id, cluster_id=clusters[0], pool_rows=[], inputs={}
    )
    return analysis, clusters


def test_a_silent_analysis_gets_its_missing_parts_once(running_analysis, sent):
    analysis, clusters = running_analysis
    assert recovery.recover_stalled() == {"planner.Analysis": 1}
    run_id = str(analysis.run_id)
    assert sent == [("planner.analysis_part", analysis.pk, run_id, c) for c in clusters[1:]]
    # The claim gave the run a fresh heartbeat: the next minute's pass leaves it alone.
    assert recovery.recover_stalled() == {}
    assert len(sent) == len(clusters) - 1


def test_all_parts_done_means_finalize_is_resent(running_analysis, sent):
    analysis, clusters = running_analysis
    for cluster_id in clusters[1:]:
        AnalysisPart.objects.create(
            analysis=analysis,
            run_id=analysis.run_id,
            cluster_id=cluster_id,
            pool_rows=[],
            inputs={},
        )
    recovery.recover_stalled()
    assert sent == [("planner.finalize_analysis", analysis.pk, str(analysis.run_id))]


def test_a_beating_or_finished_analysis_is_left_alone(running_analysis, sent):
    analysis, _ = running_analysis
    Analysis.objects.filter(pk=analysis.pk).update(
        heartbeat_at=timezone.now() - dt.timedelta(minutes=4)
    )
    assert recovery.recover_stalled() == {}
    Analysis.objects.filter(pk=analysis.pk).update(
        status="succeeded", heartbeat_at=timezone.now() - dt.timedelta(hours=2)
    )
    assert recovery.recover_stalled() == {}
    assert sent == []


def test_the_latest_sign_of_life_counts(running_analysis, sent):
    """A recompute started a minute ago is not stalled because of an old run's heartbeat."""
    analysis, _ = running_analysis
    Analysis.objects.filter(pk=analysis.pk).update(
        heartbeat_at=timezone.now() - dt.timedelta(hours=3),
        started_at=timezone.now() - dt.timedelta(minutes=1),
    )
    assert recovery.recover_stalled() == {}


def test_broker_down_defers_the_stalled_run_to_dispatch_pending(running_analysis, monkeypatch):
    analysis, _ = running_analysis

    def unreachable(*args):
        raise OperationalError("connection refused")

    monkeypatch.setattr(recovery, "_send", unreachable)
    assert recovery.recover_stalled() == {}
    assert Analysis.objects.get(pk=analysis.pk).error == WORKERS_UNAVAILABLE


def test_stalled_import_and_report_generation_are_resent(demo_fleet, settings, sent):
    from accounting.models import ImportJob
    from inventory.models import Cluster
    from reports import periods
    from reports.models import Report, ReportSchedule
    from reports.services import get_or_create_report, save_schedule

    settings.FLEETWISE_STALLED_AFTER_S = 300
    old = timezone.now() - dt.timedelta(minutes=10)
    job = ImportJob.objects.create(
        kind="csv", cluster=Cluster.objects.first(), status="running", heartbeat_at=old
    )
    ImportJob.objects.filter(pk=job.pk).update(created=old)
    schedule = save_schedule(
        ReportSchedule(name="Monthly", frequency="monthly", template="cost_chargeback")
    )
    period = periods.Period(
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC), dt.datetime(2024, 4, 1, tzinfo=dt.UTC)
    )
    report, _ = get_or_create_report(schedule, period)
    Report.objects.filter(pk=report.pk).update(status="generating", claimed_at=old, queued_at=old)
    sending, _ = get_or_create_report(
        schedule, periods.Period(period.end, period.end + (period.end - period.start))
    )
    Report.objects.filter(pk=sending.pk).update(status="sending", claimed_at=old, queued_at=old)

    assert recovery.recover_stalled() == {"accounting.ImportJob": 1, "reports.Report": 1}
    assert ("accounting.run_import", job.pk, str(job.run_id)) in sent
    assert ("reports.generate_report", report.pk) in sent
    # Generation starts again from "queued" (its claim admits one worker); a report stuck
    # in "sending" is never re-sent (at most one e-mail).
    assert Report.objects.get(pk=report.pk).status == "queued"
    assert Report.objects.get(pk=sending.pk).status == "sending"
