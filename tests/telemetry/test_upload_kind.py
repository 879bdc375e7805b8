"""Telemetry files people have at hand that are not a time series are refused at upload (a
400 naming the export to make instead), not accepted and failed later by the worker."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from telemetry.models import TelemetryFetch
from tests.support.alpha_usage import sacct_text
from tests.support.slurm_tables import DCGM_SCRAPE, NVIDIA_SMI_CSV, SEFF

pytestmark = pytest.mark.django_db
DAYS = {"start": "2026-03-02", "end": "2026-03-03"}


def post(client, cluster, name: str, text: str):
    upload = SimpleUploadedFile(name, text.encode(), content_type="text/plain")
    return client.post(
        "/api/v1/telemetry/fetches/",
        {"cluster": cluster.pk, **DAYS, "file": upload},
        format="multipart",
    )


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("metrics.txt", DCGM_SCRAPE, "a single dcgm-exporter /metrics scrape: one instant"),
        ("gpus.csv", NVIDIA_SMI_CSV, "nvidia-smi --query-gpu CSV"),
        ("sacct.txt", sacct_text(), "Slurm job accounting, not GPU telemetry"),
        ("seff.txt", SEFF, "Slurm job accounting, not GPU telemetry"),
    ],
)
def test_files_that_are_not_a_time_series_are_refused_at_upload(
    client_for, planner, gpu_cluster, name, text, says
):
    answer = post(client_for(planner), gpu_cluster, name, text)
    assert answer.status_code == 400, answer.content
    message = answer.json()["file"][0]
    assert says in message
    if "telemetry" not in says:
        assert "promtool tsdb dump-openmetrics" in message and "query_range" in message
    assert not TelemetryFetch.objects.exists()


def test_a_series_with_timestamps_is_accepted(client_for, planner, gpu_cluster):
    text = (
        "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="gpu-h01"} 0.5 1772409660\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="gpu-h01"} 0.6 1772409720\n'
        "# EOF\n"
    )
    answer = post(client_for(planner), gpu_cluster, "dcgm.om", text)
    assert answer.status_code == 201, answer.content
    assert TelemetryFetch.objects.count() == 1
