"""Stored analyses: run through a real Celery worker, stale marking, failures keep results."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from inventory.models import NodeGroup, Pool, Site
from planner import services
from planner.models import Analysis, AnalysisPart
from tests.support.polling import progress_recorder, wait_for_status

ROOT = Path(__file__).resolve().parents[2]
FACTORS = ["energy", "mfu", "scaling", "effective_time", "utilization"]


def wait_for(client, analysis_id: int, statuses=("succeeded", "failed"), timeout_s=90) -> dict:
    url = f"/api/v1/analyses/{analysis_id}/"
    fetch, seen = progress_recorder(lambda: client.get(url).json())
    body = wait_for_status(fetch, f"analysis {analysis_id}", statuses, timeout_s)
    body["seen_progress"] = seen
    return body


@pytest.mark.worker
def test_fleet_analysis_runs_through_the_worker(celery_worker, client_for, planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    client = client_for(planner)
    accepted = client.post("/api/v1/analyses/", {"scope": "fleet"}, format="json")
    assert accepted.status_code == 202, accepted.content
    assert accepted.json()["status"] == "queued"
    body = wait_for(client, accepted.json()["id"])
    assert body["status"] == "succeeded", body["error"]
    assert body["progress"] == 100 and body["stale"] is False
    assert all(
        b >= a for a, b in zip(body["seen_progress"], body["seen_progress"][1:], strict=False)
    )
    results = body["results"]
    summary = results["summary"]
    for name in FACTORS:
        assert 0 < summary[name] <= 1
        assert summary[f"{name}_provenance"] in {"measured", "entered", "modeled", "default"}
    assert summary["aggregate_of_products"] <= min(summary[name] for name in FACTORS) + 1e-9
    lost = sum(summary[f"lost_share_{name}"] for name in FACTORS)
    assert lost == pytest.approx(summary["lost_share"], rel=1e-6)
    assert summary["cards"] == 2000 + 512 + 128
    # Fan-out: one part per cluster, three clusters in the demo fleet.
    assert AnalysisPart.objects.filter(analysis_id=body["id"]).count() == 3
    assert {c["cluster"] for c in results["clusters"]} == {
        "train-hetero",
        "train-ascend",
        "inference-eu",
    }
    assert len(results["sites"]) == 2
    mixed = next(p for p in results["pools"] if p["pool"] == "mixed-a100-h100")
    assert mixed["card_mix"] == {"A100 SXM4 80GB": 1000, "H100 SXM5 80GB": 1000}
    assert mixed["h_synchronous_uniform"] < 1
    assert mixed["h_static_proportional"] >= mixed["h_synchronous_uniform"]
    assert mixed["recommended_strategy"] != "synchronous_uniform"
    assert mixed["strategy_why"]
    # Liquid-cooled site with an entered PUE of 1.1: energy is 1/1.1, entered (typed in).
    assert mixed["energy"] == pytest.approx(1 / 1.1)
    assert mixed["energy_provenance"] == "entered"
    assert mixed["lost_utilization_money"] > 0
    assert Analysis.objects.get(pk=body["id"]).input_snapshot["clusters"]


@pytest.mark.worker
def test_pool_analysis_covers_one_pool_and_recompute_clears_stale(
    celery_worker, client_for, planner
):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    client = client_for(planner)
    pool = Pool.objects.get(name="ascend-910b")
    other = Pool.objects.get(name="serving-l40s")
    first = client.post("/api/v1/analyses/", {"scope": "pool", "object_id": pool.pk}, format="json")
    sibling = client.post(
        "/api/v1/analyses/", {"scope": "pool", "object_id": other.pk}, format="json"
    )
    fleet = client.post("/api/v1/analyses/", {"scope": "fleet"}, format="json")
    done = wait_for(client, first.json()["id"])
    wait_for(client, sibling.json()["id"])
    wait_for(client, fleet.json()["id"])
    assert [p["pool"] for p in done["results"]["pools"]] == ["ascend-910b"]
    old_product = done["results"]["summary"]["aggregate_of_products"]

    # An edit of this pool's node group marks its analysis and the fleet's stale, not the sibling.
    group = NodeGroup.objects.get(pool=pool)
    group.mfu = 0.25
    group.save()
    stale = {a.pk: a.stale for a in Analysis.objects.all()}
    assert stale[first.json()["id"]] is True
    assert stale[fleet.json()["id"]] is True
    assert stale[sibling.json()["id"]] is False

    again = client.post(f"/api/v1/analyses/{first.json()['id']}/recompute/")
    assert again.status_code == 202
    redone = wait_for(client, first.json()["id"])
    assert redone["status"] == "succeeded" and redone["stale"] is False
    assert redone["results"]["pools"][0]["mfu_provenance"] == "entered"  # typed, not measured
    assert redone["results"]["summary"]["aggregate_of_products"] < old_product


@pytest.mark.worker
def test_failed_run_keeps_the_previous_result_and_says_why(celery_worker, client_for, planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    client = client_for(planner)
    pool = Pool.objects.get(name="ascend-910b")
    created = client.post(
        "/api/v1/analyses/", {"scope": "pool", "object_id": pool.pk}, format="json"
    ).json()
    good = wait_for(client, created["id"])
    assert good["status"] == "succeeded"
    # Bypass model validation to plant a value the engine must refuse.
    Pool.objects.filter(pk=pool.pk).update(assumptions={"mtbf_card_hours": -5})
    client.post(f"/api/v1/analyses/{created['id']}/recompute/")
    failed = wait_for(client, created["id"])
    assert failed["status"] == "failed"
    assert "mtbf_card_hours" in failed["error"]
    assert failed["results"] == good["results"]


def test_superseded_run_cannot_overwrite(db, demo_fleet, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet")
        old_run = str(analysis.run_id)
        services.recompute(analysis)
    assert services.finish(analysis.pk, old_run, results={"x": 1}, input_snapshot={}) is False
    services.fail(analysis.pk, old_run, "late failure")
    analysis.refresh_from_db()
    assert analysis.results is None and analysis.status == "queued" and analysis.error == ""


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"scope": "galaxy"}, "scope"),
        ({"scope": "pool"}, "object_id"),
        ({"scope": "pool", "object_id": 999999}, "object_id"),
        ({"scope": "fleet", "object_id": 3}, "object_id"),
        (
            {
                "scope": "fleet",
                "period_start": "2026-02-01T00:00Z",
                "period_end": "2026-01-01T00:00Z",
            },
            "period_end",
        ),
    ],
)
def test_bad_analysis_requests_are_400_naming_the_field(
    client_for, planner, demo_fleet, payload, field
):
    response = client_for(planner).post("/api/v1/analyses/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Analysis.objects.exists()


def test_viewer_reads_analyses_but_cannot_start_them(client_for, viewer, demo_fleet):
    client = client_for(viewer)
    assert client.post("/api/v1/analyses/", {"scope": "fleet"}, format="json").status_code == 403
    assert client.get("/api/v1/analyses/").status_code == 200


def test_analysis_list_filters_and_bounded_queries(
    client_for,
    viewer,
    demo_fleet,
    django_capture_on_commit_callbacks,
    django_assert_max_num_queries,
):
    with django_capture_on_commit_callbacks(execute=False):
        for _ in range(5):
            services.start_analysis(scope="fleet")
        site = Site.objects.first()
        services.start_analysis(scope="site", object_id=site.pk)
    client = client_for(viewer)
    client.get("/api/v1/analyses/")
    with django_assert_max_num_queries(6):
        body = client.get("/api/v1/analyses/", {"scope": "site"}).json()
    assert body["count"] == 1 and body["results"][0]["scope_label"] == site.name


def _worker_env() -> dict[str, str]:
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        database_url = f"sqlite:///{settings_dict['NAME']}"
    else:
        database_url = (
            f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
            f"/{settings_dict['NAME']}"
        )
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url,
        "FLEETWISE_ANALYSIS_PART_DELAY_S": "30",
    }


@pytest.mark.worker
def test_worker_killed_mid_run_leaves_old_result_and_rerun_works(
    celery_worker, client_for, planner, tmp_path
):
    from inventory.services import load_demo_fleet
    from planner.tasks import analysis_part

    load_demo_fleet()
    client = client_for(planner)
    pool = Pool.objects.get(name="ascend-910b")
    created = client.post(
        "/api/v1/analyses/", {"scope": "pool", "object_id": pool.pk}, format="json"
    ).json()
    good = wait_for(client, created["id"])
    assert good["status"] == "succeeded"

    # A separate worker process on its own queue picks up the next part, then dies mid-task.
    doomed_queue = f"doomed-{os.getpid()}"  # apart from a suite running beside this one
    log_path = tmp_path / "killed-worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool",
                "solo",
                "--queues",
                doomed_queue,
                "--loglevel",
                "INFO",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=ROOT,
            env=_worker_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        analysis = Analysis.objects.get(pk=created["id"])
        services.current_run(analysis.pk, str(analysis.run_id)).update(status="running")
        analysis_part.apply_async(
            (analysis.pk, str(analysis.run_id), pool.cluster_id), queue=doomed_queue
        )
        deadline = time.monotonic() + 60
        while "analysis_part" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "analysis_part" in log_path.read_text(), log_path.read_text()[-2000:]
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL

    interrupted = client.get(f"/api/v1/analyses/{created['id']}/").json()
    assert interrupted["status"] == "running"
    assert interrupted["results"] == good["results"]  # the old result is intact

    again = client.post(f"/api/v1/analyses/{created['id']}/recompute/")
    assert again.status_code == 202
    redone = wait_for(client, created["id"])
    assert redone["status"] == "succeeded"
    assert redone["results"]["summary"]["cards"] == good["results"]["summary"]["cards"]
