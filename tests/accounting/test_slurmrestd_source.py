"""A live Slurm source (accounting/slurmrestd/): pulled on a schedule from a real slurmrestd.

The worker test runs the beat entry's task, a real Celery worker and a slurmrestd of its own
(tests/support/slurmrestd.py) that it stops and starts, in front of the real test cluster;
the figures it checks are the jobs it submitted (cards × how long they ran by this clock).
The cursor and back-off rules are checked pure, without Slurm.
"""

from __future__ import annotations

import datetime as dt

import pytest

from accounting.live_source_runs import MAX_BACKOFF_S, backoff_s, queue_due
from accounting.slurmrestd.client import end_times
from accounting.slurmrestd.cursor import Window, next_cursor, pull_window
from tests.support.polling import FINISHED, wait_until
from tests.support.slurmrestd import (
    OwnSlurmrestd,
    TimedJob,
    free_port,
    require_slurm,
    sbatch,
    slurm,
    token,
)

UTC = dt.UTC
NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
INTERVAL_S = 60


def at(minutes: float) -> dt.datetime:
    return NOW + dt.timedelta(minutes=minutes)


# -- the cursor and back-off, pure -------------------------------------------------------------


def test_a_first_pull_reads_the_last_day_and_later_ones_from_the_cursor_less_the_overlap():
    assert pull_window(None, NOW, 3600) == Window(NOW - dt.timedelta(days=1), NOW)
    assert pull_window(at(-30), NOW, 600) == Window(at(-40), NOW)
    # A cursor ahead of this clock (another host's) never makes the window end before it starts.
    assert pull_window(at(5), NOW, 60) == Window(at(-1), NOW)
    assert Window(at(-40), NOW).start_age_s() == 2400
    assert Window(NOW - dt.timedelta(seconds=10.2), NOW).start_age_s() == 11  # rounded up


def test_the_cursor_moves_to_the_last_end_and_is_held_back_by_a_running_job():
    window = Window(at(-60), NOW)
    assert next_cursor(window, at(-50), [at(-45), at(-10), at(-20)], []) == at(-10)
    # A job running since before the last end keeps its start as the cursor: re-read next time.
    assert next_cursor(window, at(-50), [at(-10)], [at(-30), at(-25)]) == at(-30)
    # Ends re-read from the overlap never move it back; nothing ended: it stays.
    assert next_cursor(window, at(-5), [at(-10)], []) == at(-5)
    assert next_cursor(window, at(-5), [], []) == at(-5)
    # A first pull with nothing ended keeps its window's start; an end past "now" is ignored.
    assert next_cursor(window, None, [at(5)], []) == at(-60)


def test_back_off_doubles_the_interval_per_failure_up_to_a_cap():
    assert [backoff_s(n, 900) for n in (0, 1, 2, 3)] == [900, 900, 1800, 3600]
    assert backoff_s(50, 900) == MAX_BACKOFF_S
    assert backoff_s(3, 2 * MAX_BACKOFF_S) == 2 * MAX_BACKOFF_S  # an interval above the cap


def test_end_times_read_both_document_shapes_and_skip_jobs_without_an_end():
    jobs = [
        {"time": {"end": 1_772_452_800}},  # dbv0.0.38: a number
        {"time": {"end": {"set": True, "infinite": False, "number": 1_772_452_860}}},  # v0.0.40+
        {"time": {"end": 0}},  # running
        {"time": {"end": {"set": False, "infinite": False, "number": 0}}},
        {"time": "garbage"},
        "garbage",
    ]
    assert end_times(jobs) == [
        dt.datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
        dt.datetime(2026, 3, 2, 12, 1, tzinfo=UTC),
    ]


# -- settings, API and page ----------------------------------------------------------------------


def _source(cluster, **fields):
    from accounting.models import SlurmrestdSource

    values = {"url": "http://127.0.0.1:6899", "user_name": "root", "interval_s": INTERVAL_S}
    return SlurmrestdSource.objects.create(cluster=cluster, **{**values, **fields})


@pytest.fixture
def loopback(settings):
    """The test's slurmrestd listens on 127.0.0.1, which the outbound policy refuses unless
    told (core.outbound): told here, explicitly."""
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True


def test_sources_are_for_admins_and_the_token_is_encrypted_and_never_shown(
    alpha, loopback, client_for, viewer, planner, fleet_admin
):
    from accounting.models import SlurmrestdSource

    url = "/api/v1/slurmrestd-sources/"
    assert client_for(viewer).get(url).status_code == 403
    assert client_for(planner).get(url).status_code == 403
    admin = client_for(fleet_admin)
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2lnbmF0dXJl"
    body = {"cluster": alpha.pk, "url": "http://127.0.0.1:6820", "user_name": "root", "token": jwt}
    created = admin.post(url, body, format="json")
    assert created.status_code == 201, created.content
    shown = created.json()
    assert (
        shown["has_token"] is True and "token" not in shown and jwt not in created.content.decode()
    )
    assert (shown["api_version"], shown["interval_s"], shown["status"]) == (
        "v0.0.38",
        900,
        "queued",
    )
    stored = SlurmrestdSource.objects.get(pk=shown["id"])
    assert jwt not in stored.token_encrypted and stored.token() == jwt
    assert jwt not in admin.get(f"{url}{stored.pk}/").content.decode()


def test_hostile_source_settings_are_a_400_naming_the_field(
    alpha, settings, client_for, fleet_admin
):
    admin = client_for(fleet_admin)
    url = "/api/v1/slurmrestd-sources/"
    base = {"cluster": alpha.pk, "url": "http://127.0.0.1:6820", "user_name": "root"}
    cases = {
        "url": {"url": "http://127.0.0.1:6820"},  # loopback: not allowed by default
        "token": {"token": "abc\r\nX-Other: 1"},  # header injection
        "api_version": {"api_version": "../../slurm/v0.0.38"},
        "user_name": {"user_name": "root\nx"},
        "interval_s": {"interval_s": 1},
        "timezone": {"timezone": "Mars/Olympus"},
        "cursor": {"cursor": "2999-01-01T00:00:00Z"},
    }
    for field, change in cases.items():
        answer = admin.post(url, {**base, **change}, format="json")
        assert answer.status_code == 400 and field in answer.json(), (field, answer.content)
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True
    credentials = admin.post(url, {**base, "url": "http://root:pw@127.0.0.1:6820"}, format="json")
    assert credentials.status_code == 400 and "url" in credentials.json()


def test_the_page_shows_when_each_source_last_succeeded_and_why_it_last_failed(
    alpha, client_for, viewer, planner, fleet_admin
):
    from accounting.models import SlurmrestdSource

    source = _source(alpha)
    SlurmrestdSource.objects.filter(pk=source.pk).update(
        status="failed", last_success_at=at(-10), last_failure_at=at(-2), consecutive_failures=3,
        last_error="slurmrestd at http://127.0.0.1:6899 is unreachable (could not connect).",
        next_attempt_at=at(30), records_read=12, records_created=4, records_updated=1,
    )  # fmt: skip
    page = "/usage/live-sources/"
    assert client_for(viewer).get(page).status_code == 403
    text = client_for(planner).get(page).content.decode()
    assert "2026-03-02 11:50:00" in text and "3 in a row" in text and "could not connect" in text
    assert "5 of 12" in text  # records written (created + updated) of read
    assert "127.0.0.1:6899 (" not in text  # the source's URL is the administrators'
    assert "127.0.0.1:6899 (v0.0.38)" in client_for(fleet_admin).get(page).content.decode()


def test_a_pull_without_a_token_fails_says_why_and_backs_off_until_one_is_entered(
    alpha, client_for, fleet_admin
):
    from django.utils import timezone

    from accounting.models import SlurmrestdSource
    from accounting.slurmrestd import services

    source = _source(alpha)
    assert queue_due(SlurmrestdSource, NOW) == 1  # never pulled: due at once
    source.refresh_from_db()
    assert services.run_pull(source.pk, str(source.run_id))["failed"]
    source.refresh_from_db()
    assert (source.status, source.consecutive_failures) == ("failed", 1)
    assert "enter the slurmrestd JWT" in source.error and source.last_error == source.error
    wait = (source.next_attempt_at - source.last_failure_at).total_seconds()
    assert wait == INTERVAL_S
    assert queue_due(SlurmrestdSource, source.last_failure_at) == 0  # backing off
    entered = client_for(fleet_admin).patch(
        f"/api/v1/slurmrestd-sources/{source.pk}/", {"token": "a.b.c"}, format="json"
    )
    assert entered.status_code == 200 and entered.json()["next_attempt_at"] is None
    assert queue_due(SlurmrestdSource, timezone.now()) == 1  # tried at the next minute


def test_the_beat_entry_runs_the_due_pulls_every_minute(settings):
    from config.celery_app import app

    entry = settings.CELERY_BEAT_SCHEDULE["slurmrestd-pulls"]
    assert (entry["task"], entry["schedule"]) == ("accounting.pull_due_slurmrestd", 60.0)
    assert settings.TASK_KINDS["accounting.pull_due_slurmrestd"] == "periodic"
    app.loader.import_default_modules()
    assert {"accounting.pull_due_slurmrestd", "accounting.pull_slurmrestd"} <= set(app.tasks)


# -- against the real slurmrestd -----------------------------------------------------------------


@pytest.fixture
def restd():
    """A slurmrestd of this test's own, on a free port: the test stops and starts it."""
    require_slurm()
    server = OwnSlurmrestd(free_port())
    server.start()
    yield server
    server.stop()


def _slurm_cluster_name() -> str:
    for line in slurm("scontrol", "show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName":
            return value.strip()
    raise RuntimeError("scontrol show config names no ClusterName")


@pytest.fixture
def live_source(alpha, restd, loopback):
    from accounting.models import SlurmrestdSource

    source = SlurmrestdSource(
        cluster=alpha, url=restd.url, user_name="root", slurm_cluster=_slurm_cluster_name(),
        interval_s=INTERVAL_S, overlap_s=60,
    )  # fmt: skip
    source.set_token(token(lifespan_s=3600))
    source.full_clean()
    source.save()
    return source


def _beat_pull(source):
    """Run the beat entry's task (as beat would), then wait for the worker's pull."""
    from django.conf import settings

    from accounting.models import SlurmrestdSource
    from config.celery_app import app

    app.loader.import_default_modules()
    assert app.tasks[settings.CELERY_BEAT_SCHEDULE["slurmrestd-pulls"]["task"]]() == {"queued": 1}
    run_id = SlurmrestdSource.objects.get(pk=source.pk).run_id
    return wait_until(
        lambda: SlurmrestdSource.objects.get(pk=source.pk),
        lambda row: row.run_id == run_id and row.status in FINISHED,
        timeout_s=120, what="the slurmrestd pull",
    )  # fmt: skip


def _make_due(source) -> None:
    """As if the interval (or the back-off) had passed."""
    from django.utils import timezone

    from accounting.models import SlurmrestdSource

    SlurmrestdSource.objects.filter(pk=source.pk).update(next_attempt_at=timezone.now())


def _record(cluster, job: TimedJob, submitted_after: float):
    from accounting.models import UsageRecord

    records = UsageRecord.objects.filter(
        cluster=cluster, job_id=job.job_id,
        submit__gte=dt.datetime.fromtimestamp(submitted_after - 2, UTC),
    )  # fmt: skip
    found = list(records)
    assert len(found) == 1, [(r.record_key, r.state) for r in found]  # never a duplicate
    return found[0]


def _ran_as_submitted(record, job: TimedJob) -> None:
    low_s, high_s = job.ran_s()
    assert record.cards == job.cards
    assert low_s <= record.duration_h * 3600 <= high_s
    assert job.cards * low_s <= record.card_hours * 3600 <= job.cards * high_s


@pytest.mark.worker
def test_pulls_on_schedule_survive_a_stopped_slurmrestd_and_replace_a_job_that_was_running(
    celery_worker, live_source, restd, alpha
):
    import time

    submitted = time.time()
    short = TimedJob(sbatch("-J", "fw-live-short", "-A", "research", "--gres=gpu:h100:2",
                            "--wrap", "sleep 3"), cards=2)  # fmt: skip
    long = TimedJob(sbatch("-J", "fw-live-long", "-A", "research", "--gres=gpu:h100:1",
                           "--wrap", "sleep 30"), cards=1)  # fmt: skip
    short.wait_running()
    long.wait_running()
    short.wait_gone()
    # slurmctld tells slurmdbd a moment later: the pull reads what slurmdbd holds.
    short.wait_accounted("COMPLETED")
    long.wait_accounted("RUNNING")

    first = _beat_pull(live_source)
    assert first.status == "succeeded", first.error
    done = _record(alpha, short, submitted)
    _ran_as_submitted(done, short)
    assert (done.state, done.account, done.pool.name) == ("completed", "research", "h100")
    held = _record(alpha, long, submitted)
    assert (held.state, held.end) == ("running", None)
    # The cursor waits at (or before) the running job's start: its record is read again.
    assert first.cursor <= dt.datetime.fromtimestamp(long.seen_running, UTC)
    assert (first.consecutive_failures, first.records_read >= 2) == (0, True)

    restd.stop()
    _make_due(live_source)
    failed = _beat_pull(live_source)
    assert failed.status == "failed" and "unreachable" in failed.error
    assert failed.last_error == failed.error and failed.consecutive_failures == 1
    assert (failed.next_attempt_at - failed.last_failure_at).total_seconds() == INTERVAL_S
    assert (failed.cursor, failed.last_success_at) == (first.cursor, first.last_success_at)
    assert _record(alpha, short, submitted).pk == done.pk  # the earlier records are kept
    assert _record(alpha, long, submitted).state == "running"
    from accounting.slurmrestd.tasks import pull_due_slurmrestd

    assert pull_due_slurmrestd() == {"queued": 0}  # backing off: not due yet
    _make_due(live_source)
    again = _beat_pull(live_source)
    assert again.consecutive_failures == 2  # the wait doubles
    assert (again.next_attempt_at - again.last_failure_at).total_seconds() == 2 * INTERVAL_S

    long.wait_gone()  # it ends while slurmrestd is down
    long.wait_accounted("COMPLETED")
    restd.start()
    _make_due(live_source)
    back = _beat_pull(live_source)
    assert back.status == "succeeded", back.error
    assert back.consecutive_failures == 0 and back.last_success_at > first.last_success_at
    ended = _record(alpha, long, submitted)
    assert ended.pk == held.pk and ended.state == "completed" and ended.end is not None
    _ran_as_submitted(ended, long)
    assert _record(alpha, short, submitted).pk == done.pk
    assert back.records_updated >= 1 and back.cursor >= first.cursor


def test_a_token_slurm_refuses_fails_the_pull_with_its_error_number_and_stores_nothing(
    alpha, restd, loopback
):
    from accounting.models import SlurmrestdSource, UsageRecord
    from accounting.slurmrestd import services

    source = SlurmrestdSource(cluster=alpha, url=restd.url, user_name="root", interval_s=120)
    source.set_token("eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.bm90LXNpZ25lZA")  # not signed
    source.save()
    assert queue_due(SlurmrestdSource) == 1
    source.refresh_from_db()
    services.run_pull(source.pk, str(source.run_id))
    source.refresh_from_db()
    assert (source.status, source.consecutive_failures) == ("failed", 1)
    assert "Slurm error 1007" in source.error and "token" in source.error
    assert source.cursor is None and source.last_success_at is None
    assert not UsageRecord.objects.filter(cluster=alpha).exists()
