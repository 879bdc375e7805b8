"""Telemetry API shapes: sources (token write-only), host patterns, fetches, query, rows."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework import serializers

from core.bounds import WithinDates, bounded_float, bounded_int
from core.logredact import redact
from core.outbound import without_credentials
from inventory.models import Cluster
from telemetry.export_text import MAX_UPLOAD_BYTES
from telemetry.models import HostPattern, PrometheusSource, TelemetryFetch
from telemetry.selectors import GPU_GROUPS
from telemetry.services import FetchPeriodError, check_fetch_period
from telemetry.upload_kind import upload_kind_problem

DEFAULT_DAYS = 30


class PrometheusSourceSerializer(serializers.ModelSerializer):
    token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=4096,
        help_text="Bearer token; stored encrypted, never shown. Empty: remove it.",
    )  # fmt: skip
    has_token = serializers.BooleanField(read_only=True)
    scrape_interval_s = bounded_int("telemetry_scrape_s", required=False)
    step_s = bounded_int("telemetry_step_s", required=False)
    timeout_s = bounded_int("telemetry_timeout_s", required=False)
    node_overhead = bounded_float("node_overhead", required=False)

    class Meta:
        model = PrometheusSource
        fields = [
            "id", "cluster", "url", "token", "has_token", "label_selector", "enabled",
            "scrape_interval_s", "step_s", "timeout_s", "node_overhead", "created", "updated",
        ]  # fmt: skip
        read_only_fields = ["created", "updated"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["url"] = without_credentials(data["url"])  # never shown, however it was stored
        return data

    def save(self, **kwargs):
        token = self.validated_data.pop("token", None)
        source = super().save(**kwargs)
        if token is not None:
            source.set_token(token)
            source.save(update_fields=["token_encrypted"])
        return source


class HostPatternSerializer(serializers.ModelSerializer):
    class Meta:
        model = HostPattern
        fields = ["id", "cluster", "pattern", "node_group", "priority"]

    def validate(self, attrs):
        cluster = attrs.get("cluster", getattr(self.instance, "cluster", None))
        group = attrs.get("node_group", getattr(self.instance, "node_group", None))
        if cluster and group and group.pool.cluster_id != cluster.pk:
            raise serializers.ValidationError({"node_group": "Not a node group of this cluster."})
        return attrs


class TelemetryFetchSerializer(serializers.ModelSerializer):
    class Meta:
        model = TelemetryFetch
        fields = [
            "id", "cluster", "kind", "period_start", "period_end", "source_name", "status",
            "progress", "error", "warnings", "gpus", "gpu_days", "job_days", "created",
            "started_at", "finished_at", "duration_s",
        ]  # fmt: skip
        read_only_fields = [f for f in fields if f not in ("cluster", "period_start", "period_end")]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["error"] = redact(data["error"] or "")  # no URL credentials, whatever was stored
        return data


class FetchRequestSerializer(serializers.Serializer):
    """A fetch of local days ``start``..``end`` (inclusive); with ``file``, an upload."""

    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    start = serializers.DateField(validators=[WithinDates()])
    end = serializers.DateField(validators=[WithinDates()])
    file = serializers.FileField(
        required=False,
        help_text="OpenMetrics / Prometheus text export, or Prometheus query_range JSON answers.",
    )

    def validate(self, attrs):
        try:
            check_fetch_period(attrs["start"], attrs["end"])
        except FetchPeriodError as exc:
            raise serializers.ValidationError({"end": str(exc)}) from exc
        upload = attrs.get("file")
        if upload is not None and upload.size > MAX_UPLOAD_BYTES:
            raise serializers.ValidationError(
                {"file": f"Larger than {MAX_UPLOAD_BYTES // 2**20} MiB."}
            )
        if upload is not None and (problem := upload_kind_problem(upload)):
            raise serializers.ValidationError({"file": problem})
        if upload is None and not PrometheusSource.objects.filter(cluster=attrs["cluster"]):
            raise serializers.ValidationError(
                {"cluster": "No Prometheus source for this cluster: add one or upload a file."}
            )
        return attrs


class TelemetryQuerySerializer(serializers.Serializer):
    """Days ``start``..``end`` (inclusive; default: the last 30 days), optional cluster."""

    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all(), required=False)
    start = serializers.DateField(required=False, validators=[WithinDates()])
    end = serializers.DateField(required=False, validators=[WithinDates()])
    group_by = serializers.CharField(
        required=False, help_text="Comma-separated: " + ", ".join(GPU_GROUPS)
    )

    def validate_group_by(self, value: str) -> tuple[str, ...]:
        names = tuple(p.strip() for p in value.split(",") if p.strip())
        if not names or any(name not in GPU_GROUPS for name in names):
            raise serializers.ValidationError(f"Choose from {', '.join(GPU_GROUPS)}.")
        return names

    def validate(self, attrs):
        end = attrs.get("end") or timezone.localdate() - dt.timedelta(days=1)
        start = attrs.get("start") or end - dt.timedelta(days=DEFAULT_DAYS - 1)
        if end < start:
            raise serializers.ValidationError({"end": "Must not be before start."})
        if (end - start).days > 3660:
            raise serializers.ValidationError({"start": "At most ten years."})
        cluster = attrs.get("cluster")
        return {
            "start": start,
            "end": end,
            "cluster_ids": None if cluster is None else (cluster.pk,),
            "group_by": attrs.get("group_by") or ("pool",),
        }


def _nullable(**kwargs):
    return serializers.FloatField(allow_null=True, **kwargs)


class GpuRollupRowSerializer(serializers.Serializer):
    pool = serializers.CharField(required=False)
    accelerator = serializers.CharField(required=False)
    node_group = serializers.CharField(required=False)
    day = serializers.DateField(required=False)
    hostname = serializers.CharField(required=False)
    gpus = serializers.IntegerField()
    covered_gpu_hours = serializers.FloatField()
    tensor_active = _nullable(help_text="Mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0-1.")
    gr_engine_active = _nullable(help_text="Mean DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0-1.")
    sm_active = _nullable()
    dram_active = _nullable()
    gpu_util = _nullable(help_text="Mean DCGM_FI_DEV_GPU_UTIL as a fraction.")
    power_w = _nullable()
    mfu_proxy = _nullable(help_text="Tensor activity × SM clock ÷ max clock.")
    energy_kwh = _nullable(help_text="Increase of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION.")
    idle_gpu_hours = _nullable()
    provenance = serializers.CharField()
    reasons = serializers.DictField(child=serializers.CharField())


class ActivityRowSerializer(serializers.Serializer):
    day = serializers.DateField(required=False)
    cluster_id = serializers.IntegerField(required=False)
    job_id = serializers.CharField(required=False)
    account = serializers.CharField(allow_blank=True, required=False)
    pool__name = serializers.CharField(allow_null=True, required=False, label="pool")
    allocated_card_hours = serializers.FloatField()
    active_card_hours = serializers.FloatField(help_text="Σ engine activity × card-hours.")
    tensor_card_hours = serializers.FloatField()
    idle_card_hours = serializers.FloatField(help_text="Allocated card-hours below idle activity.")
    energy_kwh = serializers.FloatField()
    activity = _nullable()
    tensor_activity = _nullable()
    idle_share = _nullable()
    provenance = serializers.CharField()
