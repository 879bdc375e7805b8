"""Accounting API: usage records and their upload, import jobs, aliases, and the reports.

Views validate and delegate: imports to `accounting.services`, reports to
`accounting.selectors`. Reads need the viewer role, uploads and edits the planner role.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting import selectors, services
from accounting.api.serializers import (
    ChargebackQuerySerializer,
    ChargebackReportSerializer,
    CostQuerySerializer,
    CostReportSerializer,
    GresAliasSerializer,
    ImportJobSerializer,
    PartitionMappingSerializer,
    SreportUtilizationSerializer,
    UploadTooLargeSerializer,
    UsageImportSerializer,
    UsageRecordSerializer,
    UtilizationQuerySerializer,
    UtilizationReportSerializer,
)
from accounting.filtersets import (
    GresAliasFilterSet,
    ImportJobFilterSet,
    PartitionMappingFilterSet,
    SreportUtilizationFilterSet,
    UsageRecordFilterSet,
)
from accounting.models import GresAlias, ImportJob, PartitionMapping, SreportUtilization
from planner.engine.cost import CostInputError

# Multipart framing around the file: boundaries, part headers and the small form fields.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


def _too_large(limit: int) -> Response:
    return Response(
        {
            "detail": f"The file is larger than the upload limit of {limit:,} bytes; "
            "split it (sacct --starttime/--endtime) or use manage.py import_usage.",
            "max_bytes": limit,
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


class UsageRecordViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Imported usage records (one per job and card kind); filter by cluster, team, time, ..."""

    queryset = selectors.usage_records_queryset()
    serializer_class = UsageRecordSerializer
    filterset_class = UsageRecordFilterSet
    ordering_fields = ["start", "end", "card_hours", "cards", "duration_h", "job_id"]
    ordering = ["-start", "pk"]
    search_fields = ["job_id", "job_label", "account", "user"]

    @extend_schema(
        request={"multipart/form-data": UsageImportSerializer},
        responses={
            202: ImportJobSerializer,
            400: OpenApiResponse(description="A form field is missing or invalid."),
            413: OpenApiResponse(UploadTooLargeSerializer, description="The file is too large."),
        },
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        parser_classes=[MultiPartParser, FormParser],
    )
    def import_file(self, request):
        """Upload a usage file (sacct, sreport, CSV or XLSX); a worker imports it.

        The answer is the queued import job: poll ``/api/v1/import-jobs/<id>/`` for its
        progress, counts and, for a bad file, every bad line ("line N, column X: reason").
        A file is all-or-nothing and importing it again changes nothing.
        """
        limit = services.max_upload_bytes()
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
        if declared > limit + MULTIPART_OVERHEAD_BYTES:
            return _too_large(limit)
        form = UsageImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        upload = data["file"]
        if upload.size > limit:
            return _too_large(limit)
        try:
            job = services.create_import_job(
                kind=data["kind"],
                cluster=data["cluster"],
                upload=upload,
                source_name=upload.name,
                timezone_name=data["timezone"],
                exported_at=data.get("exported_at"),
                report_period_start=data.get("report_period_start"),
                report_period_end=data.get("report_period_end"),
                user=request.user,
            )
        except services.ImportInputError as exc:
            raise ValidationError(exc.errors) from exc
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ImportJobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Usage imports: status, progress (0-100), counts, and the bad lines of a failed file."""

    queryset = ImportJob.objects.select_related("cluster", "created_by")
    serializer_class = ImportJobSerializer
    filterset_class = ImportJobFilterSet
    ordering_fields = ["created", "finished_at", "status"]

    @extend_schema(request=None, responses={202: ImportJobSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Import the stored file again (after fixing aliases or mappings, say)."""
        try:
            job = services.retry_import(self.get_object())
        except services.ImportInputError as exc:
            raise ValidationError(exc.errors) from exc
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class GresAliasViewSet(viewsets.ModelViewSet):
    """Gres type → catalog card model; these rows win over the built-in alias table."""

    queryset = GresAlias.objects.select_related("accelerator")
    serializer_class = GresAliasSerializer
    filterset_class = GresAliasFilterSet
    search_fields = ["gres_type", "accelerator__name"]


class PartitionMappingViewSet(viewsets.ModelViewSet):
    """Slurm partition → pool (and card model for untyped gres/gpu=N), per cluster."""

    queryset = PartitionMapping.objects.select_related("cluster", "pool", "accelerator")
    serializer_class = PartitionMappingSerializer
    filterset_class = PartitionMappingFilterSet


class SreportUtilizationViewSet(viewsets.ReadOnlyModelViewSet):
    """Imported sreport cluster-utilization rows (Down and planned-down card-hours)."""

    queryset = SreportUtilization.objects.all()
    serializer_class = SreportUtilizationSerializer
    filterset_class = SreportUtilizationFilterSet
    ordering_fields = ["period_start", "cluster"]


class ReportView(APIView):
    """GET-only report: validate the query, compute with the selectors, serialize."""

    query_serializer: type[serializers.Serializer]
    report_serializer: type[serializers.Serializer]

    @staticmethod
    def compute(scope: selectors.AccountingScope) -> dict:
        raise NotImplementedError

    def get(self, request):
        query = self.query_serializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            report = self.compute(query.scope())
        except selectors.AccountingQueryError as exc:
            raise ValidationError(exc.errors) from exc
        except CostInputError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from exc
        return Response(self.report_serializer(report).data)


class UtilizationReportView(ReportView):
    query_serializer = UtilizationQuerySerializer
    report_serializer = UtilizationReportSerializer
    compute = staticmethod(selectors.utilization_report)

    @extend_schema(parameters=[UtilizationQuerySerializer], responses=UtilizationReportSerializer)
    def get(self, request):
        """Measured utilization (factor 5) and effective time (factor 4) per group and bucket.

        Allocated card-hours come from usage records, available ones from the inventory (node
        groups × hours in service since commissioning) minus sreport planned downtime.
        """
        return super().get(request)


class CostReportView(ReportView):
    query_serializer = CostQuerySerializer
    report_serializer = CostReportSerializer
    compute = staticmethod(selectors.cost_report)

    @extend_schema(parameters=[CostQuerySerializer], responses=CostReportSerializer)
    def get(self, request):
        """Cost per group and bucket: ownership or rental + energy (tariff, PUE), CO₂, cost per
        allocated card-hour and per effective PFLOP-day, and money lost per factor."""
        return super().get(request)


class ChargebackReportView(ReportView):
    query_serializer = ChargebackQuerySerializer
    report_serializer = ChargebackReportSerializer
    compute = staticmethod(selectors.chargeback_report)

    @extend_schema(parameters=[ChargebackQuerySerializer], responses=ChargebackReportSerializer)
    def get(self, request):
        """Chargeback per team: used card-hours at cost plus a share of the idle cost
        (idle_rule none, proportional or even); per bucket the charges sum to the total."""
        return super().get(request)
