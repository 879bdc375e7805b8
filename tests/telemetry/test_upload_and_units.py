"""The text-export path (no reachable Prometheus), hostlists, host patterns and tokens."""

from __future__ import annotations

import pytest

from tests.support import dcgm
from tests.support.dcgm import JOB_DAYS, assert_gpu_days, assert_job_days


@pytest.mark.django_db
def test_uploaded_openmetrics_export_gives_the_same_rollups(gpu_cluster, dcgm_history):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from telemetry import services
    from telemetry.models import FetchKind, TelemetryFetch

    upload = SimpleUploadedFile("dcgm.om", (dcgm_history / "dcgm.om").read_bytes())
    fetch = services.queue_fetch(
        gpu_cluster, dcgm.DAY1, dcgm.DAY2, kind=FetchKind.UPLOAD, upload=upload
    )
    services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch = TelemetryFetch.objects.get(pk=fetch.pk)
    assert fetch.status == "succeeded", fetch.error
    assert fetch.job_days == len(JOB_DAYS)
    # Raw samples: the counter's increase is exact (no extrapolation at the window start).
    assert_gpu_days(gpu_cluster, energy_rel=1e-9)
    assert_job_days(gpu_cluster)


@pytest.mark.django_db
def test_a_broken_export_fails_whole_and_keeps_earlier_rows(gpu_cluster):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from telemetry import services
    from telemetry.models import FetchKind, GpuDay, TelemetryFetch

    GpuDay.objects.create(day=dcgm.DAY1, cluster=gpu_cluster, hostname="old", gpu="0", covered_h=1)
    text = (
        "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="gpu-h01"} 0.5 1772409660\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="gpu-h01"} nonsense 1772409720\n'
        "# EOF\n"
    )
    upload = SimpleUploadedFile("bad.om", text.encode())
    fetch = services.queue_fetch(
        gpu_cluster, dcgm.DAY1, dcgm.DAY1, kind=FetchKind.UPLOAD, upload=upload
    )
    services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch = TelemetryFetch.objects.get(pk=fetch.pk)
    assert fetch.status == "failed"
    assert "line 3: not a number" in fetch.error
    assert list(GpuDay.objects.values_list("hostname", flat=True)) == ["old"]


def test_samples_without_timestamps_are_refused():
    from telemetry.export_text import ExportError, parse_export

    with pytest.raises(ExportError, match="without a timestamp"):
        parse_export('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="h"} 300\n')


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
        ("gpu[01-02,07],login1", ["gpu01", "gpu02", "gpu07", "login1"]),
        ("r[1-2]-n[8-9]", ["r1-n8", "r1-n9", "r2-n8", "r2-n9"]),
        ("None assigned", []),
        ("", []),
    ],
)
def test_slurm_hostlists_expand(text, hosts):
    from telemetry.hostlist import expand_hostlist

    assert expand_hostlist(text) == hosts


def test_hostlists_are_bounded():
    from telemetry.hostlist import HostlistError, expand_hostlist

    with pytest.raises(HostlistError):
        expand_hostlist("n[0-99999999]")
    with pytest.raises(HostlistError):
        expand_hostlist("n[a-b]")


@pytest.mark.django_db
def test_model_name_other_than_the_node_groups_card_is_a_warning(gpu_cluster):
    import pandas as pd

    from telemetry.services import map_gpu_days

    frame = pd.DataFrame(
        {
            "Hostname": ["gpu-h01", "gpu-a01", "cpu-x"],
            "gpu": ["0", "0", "0"],
            "modelName": ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA L4"],
        }
    )
    mapped, warnings = map_gpu_days(gpu_cluster, frame)
    assert any("gpu-h01" in w and "H100 SXM5 80GB" in w for w in warnings)
    assert not any(w.startswith("gpu-a01") for w in warnings)
    assert any("cpu-x" in w and "no host pattern" in w for w in warnings)
    assert mapped.set_index("Hostname").loc["gpu-a01", "max_sm_clock_mhz"] == 1410


@pytest.mark.django_db
def test_bearer_token_is_stored_encrypted(gpu_cluster):
    from telemetry.models import PrometheusSource

    source = PrometheusSource(cluster=gpu_cluster, url="http://prom:9090")
    source.set_token("s3cret-token")
    source.save()
    stored = PrometheusSource.objects.values_list("token_encrypted", flat=True).get()
    assert "s3cret" not in stored
    assert PrometheusSource.objects.get().token() == "s3cret-token"
