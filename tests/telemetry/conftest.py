"""A real Prometheus (tests/support/prometheus.py) on a TSDB built by promtool from the
generated dcgm-exporter history (tests/support/dcgm.py), and the cluster those GPUs belong to.

Skipped only when Debian's prometheus package (promtool + server) is missing; CI installs it.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import dcgm
from tests.support.prometheus import PROMETHEUS, PROMTOOL, PrometheusServer


@pytest.fixture(autouse=True)
def loopback_prometheus(settings):
    """These tests' Prometheus and stub servers listen on 127.0.0.1, which the outbound policy
    refuses unless told (core.outbound): told here, explicitly."""
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True


@pytest.fixture(scope="session")
def dcgm_history(tmp_path_factory) -> Path:
    """The generated OpenMetrics file and the TSDB promtool built from it."""
    folder = tmp_path_factory.mktemp("dcgm")
    text = folder / "dcgm.om"
    text.write_text(dcgm.openmetrics())
    if PROMTOOL is not None:
        subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics",
             "--max-block-duration=72h", str(text), str(folder / "tsdb")],
            check=True, capture_output=True,
        )  # fmt: skip
    return folder


@pytest.fixture(scope="session")
def prometheus(dcgm_history, tmp_path_factory):
    """A Prometheus serving the history (read-only use: tests never stop this one)."""
    if PROMTOOL is None or PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed")
    server = PrometheusServer(dcgm_history / "tsdb", tmp_path_factory.mktemp("prom"))
    yield server
    server.stop()


@pytest.fixture
def own_prometheus(dcgm_history, tmp_path):
    """A Prometheus of the test's own (a copy of the TSDB): the test may stop it."""
    if PROMTOOL is None or PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed")
    shutil.copytree(dcgm_history / "tsdb", tmp_path / "tsdb")
    server = PrometheusServer(tmp_path / "tsdb", tmp_path)
    yield server
    server.stop()


@pytest.fixture
def gpu_cluster(db):
    """Cluster c1: pool train (H100 nodes gpu-h*, A100 node gpu-a01), pool serve (L40S gpu-l*),
    host patterns for each node group, and the four Slurm jobs imported from sacct text."""
    from accounting import services as accounting
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
    from telemetry.models import HostPattern

    load_catalog(AcceleratorModel)
    site = Site.objects.create(
        name="T DC", cooling_type="air", pue=1.25, tariff_per_kwh=0.20,
        grid_carbon_g_per_kwh=400.0, currency="USD",
    )  # fmt: skip
    cluster = Cluster.objects.create(
        site=site, name="c1", commissioned_on=dt.date(2026, 1, 1),
        capital_cost_per_card=30_000.0, amortization_years=5.0,
    )  # fmt: skip
    train = Pool.objects.create(cluster=cluster, name="train", planned_utilization=0.7)
    serve = Pool.objects.create(cluster=cluster, name="serve", planned_utilization=0.5)
    card = AcceleratorModel.objects.get
    groups = {
        "gpu-h*": NodeGroup.objects.create(
            pool=train, name="h100", accelerator=card(name="H100 SXM5 80GB"),
            node_count=2, cards_per_node=2,
        ),
        "gpu-a*": NodeGroup.objects.create(
            pool=train, name="a100", accelerator=card(name="A100 SXM4 40GB"),
            node_count=1, cards_per_node=2,
        ),
        "gpu-l*": NodeGroup.objects.create(
            pool=serve, name="l40s", accelerator=card(name="L40S"), node_count=1, cards_per_node=2
        ),
    }  # fmt: skip
    for pattern, group in groups.items():
        HostPattern.objects.create(cluster=cluster, pattern=pattern, node_group=group)
    job = accounting.create_import_job(
        kind="sacct", cluster=cluster, source_name="jobs.sacct", queue=False
    )
    accounting.import_file(job, io.BytesIO(dcgm.sacct_text().encode()))
    return cluster
