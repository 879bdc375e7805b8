"""Telemetry API: sources, host patterns, fetches (on demand, upload) and rollup rows.

Reads need the viewer role, writes planner; sources (URLs and tokens) need admin. Team and
job rows are scoped by the user's teams. Rows views answer JSON, CSV and XLSX alike.
"""

from __future__ import annotations

from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from access.roles import ADMIN
from accounting.api.serializers import ChargebackQuerySerializer
from accounting.api.views import ChargebackRowsView
from accounting.selectors import chargeback_report
from core.tabular.exporting import RowsView
from telemetry import selectors, services
from telemetry.api.serializers import (
    ActivityRowSerializer,
    FetchRequestSerializer,
    GpuRollupRowSerializer,
    HostPatternSerializer,
    PrometheusSourceSerializer,
    TelemetryFetchSerializer,
    TelemetryQuerySerializer,
)
from telemetry.export_text import MAX_UPLOAD_BYTES
from telemetry.models import FetchKind, HostPattern, PrometheusSource, TelemetryFetch


class PrometheusSourceViewSet(viewsets.ModelViewSet):
    queryset = PrometheusSource.objects.select_related("cluster").order_by("pk")
    serializer_class = PrometheusSourceSerializer
    read_role = ADMIN
    write_role = ADMIN


class HostPatternViewSet(viewsets.ModelViewSet):
    queryset = HostPattern.objects.select_related("node_group__pool").order_by("pk")
    serializer_class = HostPatternSerializer


class TelemetryFetchViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Fetches: POST cluster, start, end (and optionally file) queues one; GET its progress."""

    queryset = TelemetryFetch.objects.order_by("-created")
    serializer_class = TelemetryFetchSerializer
    max_upload_bytes = MAX_UPLOAD_BYTES  # a larger body is a 413, unread (core.upload_limits)

    def get_serializer_class(self):
        return FetchRequestSerializer if self.action == "create" else TelemetryFetchSerializer

    def create(self, request, *args, **kwargs):
        query = FetchRequestSerializer(data=request.data)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        upload = data.get("file")
        kind = FetchKind.UPLOAD if upload is not None else FetchKind.PROMETHEUS
        fetch = services.queue_fetch(
            data["cluster"], data["start"], data["end"], kind=kind, upload=upload,
            user=request.user,
        )  # fmt: skip
        return Response(TelemetryFetchSerializer(fetch).data, status=status.HTTP_201_CREATED)


class _QueryRowsView(RowsView):
    def query(self, request) -> dict:
        query = TelemetryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return query.validated_data


class GpuRollupRowsView(_QueryRowsView):
    """Per pool (or card model, node group, day, host): measured DCGM means, MFU proxy,
    energy and idle GPU-hours (provenance telemetry)."""

    serializer_class = GpuRollupRowSerializer
    export_filename = "gpu-telemetry"

    def get_rows(self, request, *args, **kwargs):
        q = self.query(request)
        return selectors.gpu_rollup(q["cluster_ids"], q["start"], q["end"], q["group_by"])


class TeamActivityRowsView(_QueryRowsView):
    """Per team: allocated vs. active card-hours and idle-but-allocated card-hours."""

    serializer_class = ActivityRowSerializer
    export_filename = "team-activity"

    def get_rows(self, request, *args, **kwargs):
        q = self.query(request)
        return selectors.team_activity(request.user, q["cluster_ids"], q["start"], q["end"])


class WastedAllocationRowsView(_QueryRowsView):
    """The jobs holding the most idle GPUs (idle-but-allocated card-hours), most first."""

    serializer_class = ActivityRowSerializer
    export_filename = "wasted-allocation"

    def get_rows(self, request, *args, **kwargs):
        q = self.query(request)
        return selectors.wasted_allocation(request.user, q["cluster_ids"], q["start"], q["end"])


class ActivityChargebackRowsView(ChargebackRowsView):
    """Chargeback by measured activity: each team's allocated card-hours × its measured
    engine activity at cost, the idle remainder shared by ``idle_rule``."""

    query_serializer = ChargebackQuerySerializer
    export_filename = "chargeback-by-activity"

    @staticmethod
    def compute(scope):
        return chargeback_report(scope, activity=selectors.activity_factors(scope))
