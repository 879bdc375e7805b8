"""Telemetry sources, host patterns, fetch jobs and the daily rollups they write.

A :class:`PrometheusSource` belongs to one cluster; :class:`HostPattern` rows map the
``Hostname`` label of dcgm-exporter to the cluster's node groups (so pools and card models).
A :class:`TelemetryFetch` is one job (a Prometheus query over a period, or one uploaded text
export); on success it replaces the :class:`GpuDay` and :class:`JobDay` rows of its cluster and
days in one transaction, so a failed fetch leaves the previous rollups intact.
"""

from __future__ import annotations

import fnmatch

from django.conf import settings
from django.db import models

from core.jobs.models import DurableJob
from core.live_sources import EncryptedToken
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool
from telemetry.kubernetes.models import (  # noqa: F401 - models of this app
    KubernetesNodeRule,
    KubernetesSource,
    KubernetesTeamRule,
)
from telemetry.promql import validate_label_selector, validate_prometheus_url
from telemetry.secrets import LABEL as TELEMETRY_TOKEN_LABEL


class FetchKind(models.TextChoices):
    PROMETHEUS = "prometheus", "Prometheus HTTP API"
    UPLOAD = "upload", "Uploaded OpenMetrics / Prometheus text export"


class PrometheusSource(EncryptedToken):
    """Where one cluster's dcgm-exporter metrics can be queried."""

    TOKEN_LABEL = TELEMETRY_TOKEN_LABEL

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="prometheus_source"
    )
    url = models.CharField(
        max_length=500,
        validators=[validate_prometheus_url],
        help_text="Prometheus base URL, e.g. http://prometheus:9090",
    )
    label_selector = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_label_selector],
        help_text='Extra label matchers when one Prometheus serves several clusters: cluster="a"',
    )
    enabled = models.BooleanField(default=True, help_text="Fetched by the daily schedule.")
    scrape_interval_s = models.PositiveIntegerField(
        default=60, help_text="Prometheus scrape interval of dcgm-exporter, seconds."
    )
    step_s = models.PositiveIntegerField(
        default=300, help_text="Resolution of the per-host series joined with Slurm jobs."
    )
    timeout_s = models.PositiveIntegerField(default=30)
    node_overhead = models.FloatField(
        default=0.8,
        help_text="Non-GPU node power ÷ GPU power (CPUs, memory, NICs, fans); docs/telemetry.md.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster"]

    def __str__(self) -> str:
        return f"Prometheus of {self.cluster}"


class HostPattern(models.Model):
    """Hosts whose name matches ``pattern`` (shell wildcards: ``gpu-a*``) are in ``node_group``.

    Patterns are tried in ``priority`` order (lowest first); the first match wins.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="host_patterns")
    pattern = models.CharField(max_length=200)
    node_group = models.ForeignKey(NodeGroup, on_delete=models.CASCADE, related_name="+")
    priority = models.PositiveSmallIntegerField(default=100)

    class Meta:
        ordering = ["cluster", "priority", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "pattern"], name="host_pattern_unique_per_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.pattern} → {self.node_group}"

    def matches(self, hostname: str) -> bool:
        return fnmatch.fnmatchcase(hostname, self.pattern)


class TelemetryFetch(DurableJob):
    """One fetch of telemetry for a cluster and period (a Celery job with progress)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12, choices=FetchKind.choices)
    period_start = models.DateField(help_text="First local day fetched.")
    period_end = models.DateField(help_text="Last local day fetched (inclusive).")
    file = models.FileField(upload_to="telemetry-uploads/%Y/%m/", blank=True)
    source_name = models.CharField(max_length=255, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    gpu_days = models.PositiveIntegerField(default=0)
    job_days = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["cluster", "status"])]

    def __str__(self) -> str:
        return f"telemetry fetch #{self.pk} {self.cluster_id} {self.period_start}…{self.period_end}"


class GpuDay(models.Model):
    """One GPU's day: means of the DCGM fields, measured energy, idle hours.

    Means are over the samples of the day (``covered_h`` hours of them); sums over pools
    and card models weight them by ``covered_h``. Null: the field was not exported.
    """

    day = models.DateField()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    node_group = models.ForeignKey(
        NodeGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accelerator = models.ForeignKey(
        AcceleratorModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hostname = models.CharField(max_length=200)
    gpu = models.CharField(max_length=16)
    uuid = models.CharField(max_length=64, blank=True)
    model_name = models.CharField(max_length=100, blank=True)
    covered_h = models.FloatField(help_text="Hours with samples.")
    tensor_active = models.FloatField(null=True)
    gr_engine_active = models.FloatField(null=True)
    sm_active = models.FloatField(null=True)
    dram_active = models.FloatField(null=True)
    gpu_util = models.FloatField(null=True, help_text="Fraction 0-1 (DCGM reports percent).")
    power_w = models.FloatField(null=True)
    sm_clock_mhz = models.FloatField(null=True)
    max_sm_clock_mhz = models.FloatField(null=True)
    energy_kwh = models.FloatField(null=True, help_text="Increase of the energy counter.")
    idle_h = models.FloatField(null=True, help_text="Hours with engine activity below idle.")
    fetch = models.ForeignKey(
        TelemetryFetch, null=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["cluster", "day", "hostname", "gpu"]
        indexes = [models.Index(fields=["cluster", "day"])]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "day", "hostname", "gpu"], name="gpu_day_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.hostname}/{self.gpu} {self.day}"


class JobDay(models.Model):
    """One Slurm job's day on telemetered hosts: allocated vs. measured activity."""

    day = models.DateField()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    account = models.CharField("account / team", max_length=100, blank=True)
    job_id = models.CharField(max_length=100)
    allocated_card_hours = models.FloatField(help_text="Card-hours on hosts with samples.")
    active_card_hours = models.FloatField(help_text="Σ engine activity × card-hours.")
    tensor_card_hours = models.FloatField(help_text="Σ tensor activity × card-hours.")
    idle_card_hours = models.FloatField(help_text="Card-hours below the idle threshold.")
    energy_kwh = models.FloatField(help_text="Σ power × time of the job's cards.")
    fetch = models.ForeignKey(
        TelemetryFetch, null=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["cluster", "day", "job_id"]
        indexes = [models.Index(fields=["cluster", "day"]), models.Index(fields=["account"])]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.day}"
