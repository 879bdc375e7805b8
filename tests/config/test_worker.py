"""A task triggered from the app round-trips through a real Celery worker."""

import time

import pytest

from inventory.models import Pool

pytestmark = pytest.mark.worker


def test_recompute_totals_round_trips_through_the_worker(celery_worker, client_for, planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    pool = Pool.objects.get(name="mixed-a100-h100")
    client = client_for(planner)
    accepted = client.post(f"/api/v1/pools/{pool.pk}/recompute-totals/")
    assert accepted.status_code == 202
    status_url = f"/api/v1/tasks/{accepted.data['task_id']}/"
    deadline = time.monotonic() + 60
    body = client.get(status_url).data
    while body["status"] != "SUCCESS" and time.monotonic() < deadline:
        assert body["status"] in {"PENDING", "STARTED", "RECEIVED"}, body
        time.sleep(0.2)
        body = client.get(status_url).data
    assert body["status"] == "SUCCESS", body
    assert body["result"]["cards"] == 2000
    assert body["result"]["mix"] == {"A100 SXM4 80GB": 1000, "H100 SXM5 80GB": 1000}
    assert body["result"]["peak_pflops"] == pytest.approx((1000 * 312 + 1000 * 989) / 1000)


def test_viewer_cannot_queue_tasks(client_for, viewer, demo_fleet):
    pool = Pool.objects.first()
    assert client_for(viewer).post(f"/api/v1/pools/{pool.pk}/recompute-totals/").status_code == 403
