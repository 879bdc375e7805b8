"""The fetch against a real Prometheus: rollups, job join, measured energy, failure.

Expected figures are worked out by hand from the scenario in tests/telemetry/dcgm.py
(power = 100 W + 500 W × engine activity; two GPUs per host; 60 s samples).
Energy comes from Prometheus' increase(), which extrapolates the first sample interval
of the window linearly, so it is asserted to 0.1 %.
"""

from __future__ import annotations

import pytest

from tests.telemetry import dcgm
from tests.telemetry.conftest import needs_prometheus

pytestmark = [needs_prometheus, pytest.mark.django_db]

# (host, day) -> engine, tensor, power W, energy kWh, idle h, GPU_UTIL share  (per GPU)
GPU_DAYS = {
    ("gpu-h01", dcgm.DAY1): (0.4, 0.25, 300.0, 7.2, 12.0, 0.5),
    ("gpu-h01", dcgm.DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-h02", dcgm.DAY1): (0.4, 0.25, 300.0, 7.2, 12.0, 0.5),
    ("gpu-h02", dcgm.DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    # GPU 0's counter resets at 20:00: the day's energy is still 12 h × 400 W + 12 h × 100 W.
    ("gpu-a01", dcgm.DAY1): (0.3, 0.15, 250.0, 6.0, 12.0, 0.5),
    ("gpu-a01", dcgm.DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-l01", dcgm.DAY1): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-l01", dcgm.DAY2): (0.4, 0.1, 300.0, 7.2, 0.0, 1.0),
}
# (job, day) -> allocated, active (engine), tensor, idle card-hours, energy kWh
JOB_DAYS = {
    ("101", dcgm.DAY1): (48.0, 38.4, 24.0, 0.0, 24.0),  # 4 cards × 12 h at 500 W
    ("102", dcgm.DAY1): (24.0, 0.0, 0.0, 24.0, 2.4),  # 2 cards × 12 h, idle, 100 W
    ("102", dcgm.DAY2): (24.0, 0.0, 0.0, 24.0, 2.4),
    ("103", dcgm.DAY1): (24.0, 14.4, 7.2, 0.0, 9.6),  # 2 cards × 12 h at 400 W
    ("104", dcgm.DAY2): (48.0, 19.2, 4.8, 0.0, 14.4),  # 2 cards × 24 h at 300 W
}


def fetch_from(cluster, url):
    from telemetry import services
    from telemetry.models import PrometheusSource, TelemetryFetch

    PrometheusSource.objects.update_or_create(cluster=cluster, defaults={"url": url})
    fetch = TelemetryFetch.objects.create(
        cluster=cluster, kind="prometheus", period_start=dcgm.DAY1, period_end=dcgm.DAY2
    )
    result = services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch.refresh_from_db()
    return fetch, result


def assert_gpu_days(cluster, energy_rel=1e-3):
    from telemetry.models import GpuDay

    rows = list(GpuDay.objects.filter(cluster=cluster).select_related("pool", "accelerator"))
    assert len(rows) == 16  # 8 GPUs × 2 days
    for row in rows:
        engine, tensor, power, energy, idle, util = GPU_DAYS[(row.hostname, row.day)]
        assert row.covered_h == pytest.approx(24.0)
        assert row.gr_engine_active == pytest.approx(engine, abs=1e-9)
        assert row.tensor_active == pytest.approx(tensor, abs=1e-9)
        assert row.power_w == pytest.approx(power)
        assert row.energy_kwh == pytest.approx(energy, rel=energy_rel)
        assert row.idle_h == pytest.approx(idle)
        assert row.sm_active is None  # not exported: no data, not zero
        assert row.gpu_util == pytest.approx(util, abs=1e-9)  # DCGM percent -> fraction
    by_host = {r.hostname: (r.pool.name, r.accelerator.name) for r in rows}
    assert by_host == {
        "gpu-h01": ("train", "H100 SXM5 80GB"),
        "gpu-h02": ("train", "H100 SXM5 80GB"),
        "gpu-a01": ("train", "A100 SXM4 40GB"),
        "gpu-l01": ("serve", "L40S"),
    }


def assert_job_days(cluster):
    from telemetry.models import JobDay

    rows = {(r.job_id, r.day): r for r in JobDay.objects.filter(cluster=cluster)}
    assert set(rows) == set(JOB_DAYS)
    for key, (allocated, active, tensor, idle, energy) in JOB_DAYS.items():
        row = rows[key]
        assert row.allocated_card_hours == pytest.approx(allocated)
        assert row.active_card_hours == pytest.approx(active)
        assert row.tensor_card_hours == pytest.approx(tensor)
        assert row.idle_card_hours == pytest.approx(idle)
        assert row.energy_kwh == pytest.approx(energy)
    assert rows[("102", dcgm.DAY1)].account == "nlp"
    assert rows[("101", dcgm.DAY1)].pool.name == "train"


def test_fetch_from_real_prometheus_rolls_up_days_and_jobs(gpu_cluster, prometheus):
    fetch, result = fetch_from(gpu_cluster, prometheus.url)
    assert fetch.status == "succeeded", fetch.error
    assert (fetch.gpus, fetch.gpu_days, fetch.job_days) == (8, 16, 5)
    assert fetch.warnings == []
    assert result["gpu_days"] == 16
    assert_gpu_days(gpu_cluster)
    assert_job_days(gpu_cluster)


def test_prometheus_stopped_mid_fetch_keeps_previous_rollups(
    gpu_cluster, own_prometheus, monkeypatch
):
    from telemetry import jobs
    from telemetry.models import GpuDay, JobDay

    first, _ = fetch_from(gpu_cluster, own_prometheus.url)
    assert first.status == "succeeded", first.error
    before = sorted(GpuDay.objects.values_list("pk", "energy_kwh"))
    jobs_before = sorted(JobDay.objects.values_list("pk", "idle_card_hours"))
    real_progress = jobs.progress

    def stop_after_first_day(pk, run_id, fraction):
        real_progress(pk, run_id, fraction)
        own_prometheus.stop()  # day 1 answered; day 2's queries find nobody

    monkeypatch.setattr(jobs, "progress", stop_after_first_day)
    second, result = fetch_from(gpu_cluster, own_prometheus.url)
    assert second.status == "failed"
    assert "unreachable" in second.error and own_prometheus.url in second.error
    assert "failed" in result
    assert sorted(GpuDay.objects.values_list("pk", "energy_kwh")) == before
    assert sorted(JobDay.objects.values_list("pk", "idle_card_hours")) == jobs_before
