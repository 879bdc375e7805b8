"""core.jobs without a worker: the run-id guards of the lifecycle service, a failed run that
keeps the earlier result, and the registry the apps fill in their AppConfig.ready."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from core.jobs import lifecycle, recovery
from core.jobs.registry import kind_of, kind_of_task, kinds
from core.jobs.status import JobStatus

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_heartbeats(settings, tmp_path):
    """SQLite heartbeats are files named by job id, and ids are reused after each test's
    rollback: a beat left by an earlier test must not make this test's job look alive."""
    settings.FLEETWISE_HEARTBEAT_DIR = str(tmp_path / "heartbeats")


ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def analysis():
    from planner.models import Analysis

    return Analysis.objects.create(
        scope="fleet",
        period_start=dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
        period_end=dt.datetime(2024, 4, 1, tzinfo=dt.UTC),
    )


def fresh(job):
    job.refresh_from_db()
    return job


def test_queue_starts_a_new_run_and_the_old_run_can_no_longer_write(analysis):
    model, old_run = type(analysis), analysis.run_id
    assert lifecycle.mark_running(model, analysis.pk, old_run)
    lifecycle.queue(analysis)  # a recompute: the old run is superseded
    assert analysis.run_id != old_run
    assert (fresh(analysis).status, analysis.progress, analysis.error) == ("queued", 0, "")

    assert not lifecycle.mark_running(model, analysis.pk, old_run)
    assert not lifecycle.progress(model, analysis.pk, old_run, 50)
    assert not lifecycle.heartbeat(model, analysis.pk, old_run)
    assert not lifecycle.finish(model, analysis.pk, old_run, results={"late": True})
    assert not lifecycle.fail(model, analysis.pk, old_run, "late failure")
    fresh(analysis)
    assert (analysis.status, analysis.results, analysis.error) == ("queued", None, "")


def test_a_failed_run_keeps_the_earlier_result_and_says_why(analysis):
    model = type(analysis)
    first = analysis.run_id
    assert lifecycle.mark_running(model, analysis.pk, first)
    assert lifecycle.finish(model, analysis.pk, first, results={"effective": 0.31})
    fresh(analysis)
    assert (analysis.status, analysis.progress) == ("succeeded", 100)
    assert analysis.succeeded_at is not None and analysis.duration_s >= 0

    lifecycle.queue(analysis)
    second = analysis.run_id
    assert lifecycle.mark_running(model, analysis.pk, second)
    assert lifecycle.fail(model, analysis.pk, second, "ValueError: no usage in the period")
    fresh(analysis)
    assert analysis.status == JobStatus.FAILED
    assert analysis.error == "ValueError: no usage in the period"
    assert analysis.results == {"effective": 0.31}  # the last successful run's numbers


def test_a_run_finishes_once_and_a_finished_run_cannot_fail(analysis):
    model, run = type(analysis), analysis.run_id
    assert lifecycle.mark_running(model, analysis.pk, run)
    assert lifecycle.finish(model, analysis.pk, run, results={"n": 1})
    # A redelivered copy of the same run: nothing changes.
    assert not lifecycle.finish(model, analysis.pk, run, results={"n": 2})
    assert not lifecycle.fail(model, analysis.pk, run, "late")
    assert not lifecycle.mark_running(model, analysis.pk, run)
    fresh(analysis)
    assert (analysis.status, analysis.results, analysis.error) == ("succeeded", {"n": 1}, "")


def test_progress_moves_only_while_running_and_stays_below_done(analysis):
    model, run = type(analysis), analysis.run_id
    assert not lifecycle.progress(model, analysis.pk, run, 40)  # still queued
    lifecycle.mark_running(model, analysis.pk, run)
    assert lifecycle.progress(model, analysis.pk, run, 140, parts_done=3)
    assert (fresh(analysis).progress, analysis.parts_done) == (99, 3)


def test_the_error_is_bounded(analysis):
    model, run = type(analysis), analysis.run_id
    lifecycle.fail(model, analysis.pk, run, "x" * 10_000)
    assert len(fresh(analysis).error) == lifecycle.MAX_ERROR_CHARS


def test_every_job_model_is_registered_by_its_app():
    from accounting.models import ImportJob, RollupRefresh
    from exports.models import ExportJob
    from planner.models import Analysis, Plan
    from reports.models import Report

    expected = {
        Analysis: "planner.run_analysis",
        Plan: "planner.compute_plan",
        ImportJob: "accounting.run_import",
        RollupRefresh: "accounting.run_rollup_refresh",
        ExportJob: "exports.build_export",
        Report: "reports.generate_report",
    }
    assert {model: kind_of(model).task for model in expected} == expected
    assert kind_of_task("planner.analysis_part").model is Analysis
    assert kind_of_task("reports.tick") is None


def test_core_and_config_name_no_app_model():
    """The framework learns job kinds from the registry, never from app labels."""
    labels = {kind.label for kind in kinds()}
    apps = {label.split(".")[0] for label in labels}
    for folder in ("core/jobs", "config"):
        for path in (ROOT / folder).rglob("*.py"):
            nodes = list(ast.walk(ast.parse(path.read_text())))
            strings = {n.value for n in nodes if isinstance(n, ast.Constant)}
            assert not labels & strings, f"{path} names a job model"
            if folder == "core/jobs":
                imported = {(n.module or "") for n in nodes if isinstance(n, ast.ImportFrom)}
                assert not {m.split(".")[0] for m in imported} & apps, f"{path} imports an app"


def test_a_kind_without_its_own_resend_gets_its_task_again(monkeypatch, settings):
    """Recovery re-sends a stalled job of any registered kind (here a rollup refresh)."""
    from accounting.models import RollupRefresh

    settings.FLEETWISE_STALLED_AFTER_S = 300
    sent: list[tuple] = []
    monkeypatch.setattr(recovery, "_send", lambda name, *args: sent.append((name, *args)))
    old = timezone.now() - dt.timedelta(minutes=10)
    job = RollupRefresh.objects.create(status="running", started_at=old, heartbeat_at=old)
    assert recovery.recover_stalled() == {"accounting.RollupRefresh": 1}
    assert sent == [("accounting.run_rollup_refresh", job.pk, str(job.run_id))]
    assert recovery.recover_stalled() == {}  # the claim refreshed its heartbeat
