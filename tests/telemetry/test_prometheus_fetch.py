"""The fetch against a real Prometheus: rollups, job join, measured energy, failure.

Expected figures are worked out by hand from the scenario in tests/support/dcgm.py
(power = 100 W + 500 W × engine activity; two GPUs per host; 60 s samples).
Energy comes from Prometheus' increase(), which extrapolates the first sample interval
of the window linearly, so it is asserted to 0.1 %.
"""

from __future__ import annotations

import pytest

from tests.support.dcgm import assert_gpu_days, assert_job_days, fetch_from
from tests.support.prometheus import needs_prometheus

pytestmark = [needs_prometheus, pytest.mark.django_db]


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


def test_a_selector_matching_no_series_is_no_data_not_a_failure(gpu_cluster, prometheus):
    """Prometheus answers every query with no series: the fetch succeeds with nothing."""
    from telemetry.models import GpuDay, PrometheusSource

    PrometheusSource.objects.create(
        cluster=gpu_cluster, url=prometheus.url, label_selector='cluster="none"'
    )
    fetch, _ = fetch_from(gpu_cluster, prometheus.url)
    assert fetch.status == "succeeded", fetch.error
    assert fetch.warnings == ["No DCGM samples in the period."]
    assert (fetch.gpus, fetch.gpu_days, fetch.job_days) == (0, 0, 0)
    assert not GpuDay.objects.filter(cluster=gpu_cluster).exists()
