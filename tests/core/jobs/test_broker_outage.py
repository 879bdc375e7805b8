"""Redis (the broker) unreachable: reads keep working, jobs are saved and answered at once as
"queued, workers unavailable", and go out to a real worker once the broker is back.

The outage is real, not mocked: the Celery app publishes to a port nothing listens on
(redis://127.0.0.1:1/0) while the requests run, then gets its own broker back.
"""

from __future__ import annotations

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from accounting.models import ImportJob
from core.jobs.dispatch import WORKERS_UNAVAILABLE, dispatch_pending, pending_count
from inventory.models import Cluster, Pool
from planner.models import Analysis, Plan
from tests.support.alpha_usage import sacct_text
from tests.support.builders import plan_payload
from tests.support.polling import wait_for_status
from tests.support.workers import UNREACHABLE_BROKER, broker_at

pytestmark = pytest.mark.worker

FINISHED = {"succeeded", "failed"}


def wait_until_finished(model, pk: int, timeout_s: float = 90):
    fetch = lambda: model.objects.get(pk=pk)  # noqa: E731
    return wait_for_status(fetch, f"{model.__name__} {pk}", FINISHED, timeout_s, interval_s=0.2)


def queue_all_three(client):
    """An analysis, a plan and a usage import, each through its API; the three answers."""
    pool = Pool.objects.get(name="mixed-a100-h100")
    analysis = client.post("/api/v1/analyses/", {"scope": "pool", "object_id": pool.pk})
    plan = client.post("/api/v1/plans/", plan_payload(), format="json")
    upload = SimpleUploadedFile("sacct.txt", sacct_text().encode(), content_type="text/plain")
    usage = client.post(
        "/api/v1/usage-records/import/",
        {"file": upload, "kind": "sacct", "cluster": Cluster.objects.get(name="train-hetero").pk},
        format="multipart",
    )
    return analysis, plan, usage


def test_jobs_wait_in_the_database_while_the_broker_is_down(
    celery_worker, client_for, planner, demo_fleet
):
    client = client_for(planner)
    with broker_at(UNREACHABLE_BROKER):
        started = time.monotonic()
        answers = queue_all_three(client)
        elapsed = time.monotonic() - started
        # Reads need no broker.
        assert client.get("/api/v1/pools/").status_code == 200
        assert client.get("/inventory/").status_code == 200
        assert client.get(f"/api/v1/analyses/{answers[0].json()['id']}/").status_code == 200

    assert elapsed < 20, f"three requests took {elapsed:.1f}s with the broker down"
    for answer in answers:
        assert answer.status_code == 202, answer.content
        body = answer.json()
        assert (body["status"], body["error"]) == ("queued", WORKERS_UNAVAILABLE)
    ids = [answer.json()["id"] for answer in answers]
    rows = [
        model.objects.get(pk=pk) for model, pk in zip((Analysis, Plan, ImportJob), ids, strict=True)
    ]
    assert [(row.status, row.error) for row in rows] == [("queued", WORKERS_UNAVAILABLE)] * 3
    assert pending_count() == 3

    # The broker is back: the command sends them, and the worker runs them.
    call_command("dispatch_pending")
    assert pending_count() == 0
    for model, pk in zip((Analysis, Plan, ImportJob), ids, strict=True):
        row = wait_until_finished(model, pk)
        assert row.status == "succeeded", row.error


def test_the_next_successful_send_also_sends_what_waited(
    celery_worker, client_for, planner, demo_fleet
):
    client = client_for(planner)
    with broker_at(UNREACHABLE_BROKER):
        waited = client.post("/api/v1/analyses/", {"scope": "fleet"}).json()
        # Still down: the periodic dispatcher leaves it waiting, and says so.
        assert dispatch_pending() == {"sent": 0, "waiting": 1}
    assert Analysis.objects.get(pk=waited["id"]).error == WORKERS_UNAVAILABLE

    fresh = client.post("/api/v1/analyses/", {"scope": "fleet"}).json()
    assert (fresh["status"], fresh["error"]) == ("queued", "")
    assert pending_count() == 0
    for pk in (waited["id"], fresh["id"]):
        analysis = wait_until_finished(Analysis, pk)
        assert analysis.status == "succeeded", analysis.error


def test_the_dispatch_command_fails_while_the_broker_is_still_down(
    transactional_db, client_for, planner, demo_fleet
):
    with broker_at(UNREACHABLE_BROKER):
        client_for(planner).post("/api/v1/analyses/", {"scope": "fleet"})
        with pytest.raises(Exception, match="still unreachable"):
            call_command("dispatch_pending")
    assert pending_count() == 1


def test_beat_runs_the_dispatcher_every_minute(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["dispatch-deferred-jobs"]
    assert (entry["task"], entry["schedule"]) == ("config.dispatch_pending", 60.0)
    from config.celery_app import app

    app.loader.import_default_modules()
    assert "config.dispatch_pending" in app.tasks
