"""The fetch through the API, the broker and a real Celery worker, against a real Prometheus."""

from __future__ import annotations

import pytest

from tests.support.dcgm import JOB_DAYS
from tests.support.polling import wait_for_status
from tests.support.prometheus import needs_prometheus

pytestmark = [needs_prometheus, pytest.mark.worker]


def test_fetch_requested_through_the_api_runs_on_the_worker(
    celery_worker, gpu_cluster, prometheus, client_for, planner
):
    from telemetry.models import JobDay, PrometheusSource

    PrometheusSource.objects.create(cluster=gpu_cluster, url=prometheus.url)
    client = client_for(planner)
    created = client.post(
        "/api/v1/telemetry/fetches/",
        {"cluster": gpu_cluster.pk, "start": "2026-03-02", "end": "2026-03-03"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["status"] == "queued"
    url = f"/api/v1/telemetry/fetches/{created.json()['id']}/"
    done = wait_for_status(lambda: client.get(url).json(), "telemetry fetch")
    assert done["status"] == "succeeded", done["error"]
    assert (done["progress"], done["gpu_days"], done["job_days"]) == (100, 16, len(JOB_DAYS))
    assert JobDay.objects.filter(cluster=gpu_cluster).count() == len(JOB_DAYS)
