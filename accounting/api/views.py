"""Accounting API: usage records and their upload, import jobs, aliases, and the reports.

Views validate and delegate: imports to `accounting.services`, reports to
`accounting.selectors`. Reads need the viewer role, uploads and edits the planner role.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from access.scoping import scope_records, visible_teams
from accounting import selectors, services
from accounting.api.serializers import (
    LAYOUT_FIELDS,
    ChargebackQuerySerializer,
    ChargebackReportSerializer,
    ChargebackRowSerializer,
    CostQuerySerializer,
    CostReportSerializer,
    CostRowSerializer,
    GresAliasSerializer,
    ImportJobSerializer,
    PartitionMappingSerializer,
    SreportUtilizationSerializer,
    UploadTooLargeSerializer,
    UsageImportSerializer,
    UsageRecordSerializer,
    UtilizationQuerySerializer,
    UtilizationReportSerializer,
    UtilizationRowSerializer,
)
from accounting.filtersets import (
    GresAliasFilterSet,
    ImportJobFilterSet,
    PartitionMappingFilterSet,
    SreportUtilizationFilterSet,
    UsageRecordFilterSet,
)
from accounting.models import GresAlias, ImportJob, PartitionMapping, SreportUtilization
from accounting.scoping import scope_import_jobs, scope_report
from core.concurrency import ConditionalUpdateMixin
from core.jobs.limits import JobLimitReached, too_many_jobs
from core.tabular.exporting import RowsView, TabularListMixin
from engine.cost import CostInputError
from inventory.currency import in_reporting_currency

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


class UsageRecordViewSet(
    TabularListMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Imported usage records (one per job and card kind); filter by cluster, team, time, ..."""

    queryset = selectors.usage_records_queryset()
    serializer_class = UsageRecordSerializer
    filterset_class = UsageRecordFilterSet
    ordering_fields = ["start", "end", "card_hours", "cards", "duration_h", "job_id"]
    ordering = ["-start", "pk"]
    search_fields = ["job_id", "job_label", "account", "user"]
    # A re-import that changes records points them at its import job: part of the ETag.
    export_version_fields = ("import_job",)

    def get_queryset(self):
        # Team-scoped users list and open only their teams' records (others: 404).
        queryset = super().get_queryset()
        if getattr(self, "swagger_fake_view", False):
            return queryset
        return scope_records(queryset, self.request.user)

    @extend_schema(
        request={"multipart/form-data": UsageImportSerializer},
        responses={
            202: ImportJobSerializer,
            400: OpenApiResponse(description="A form field is missing or invalid."),
            413: OpenApiResponse(UploadTooLargeSerializer, description="The file is too large."),
            429: OpenApiResponse(
                description="You have too many imports queued or running; Retry-After says "
                "when to try again."
            ),
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
        data = _upload_fields(request)
        if isinstance(data, Response):
            return data
        upload = data["file"]
        try:
            job = services.create_import_job(
                kind=data["kind"],
                cluster=data["cluster"],
                upload=upload,
                source_name=upload.name,
                timezone_name=data["timezone"],
                exported_at=data.get("as_of") or data.get("exported_at"),
                report_period_start=data.get("report_period_start"),
                report_period_end=data.get("report_period_end"),
                parse_options={name: data.get(name) for name in LAYOUT_FIELDS},
                user=request.user,
            )
        except services.ImportInputError as exc:
            raise ValidationError(exc.errors) from exc
        except JobLimitReached as exc:
            return too_many_jobs(exc)
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request={"multipart/form-data": UsageImportSerializer},
        responses={
            200: OpenApiResponse(description="What the file holds and where it would go."),
            400: OpenApiResponse(description="A form field is missing or invalid."),
            413: OpenApiResponse(UploadTooLargeSerializer, description="The file is too large."),
        },
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import/preview",
        parser_classes=[MultiPartParser, FormParser],
    )
    def preview_file(self, request):
        """Preview a sacct, CSV or XLSX file before importing it; nothing is stored.

        Card models found and this cluster's card for each (or why a gres alias is needed),
        partitions and their pools, teams, time span, counts and skipped lines per reason; for
        a file that would be refused, its bad lines (``valid: false``).
        """
        data = _upload_fields(request)
        if isinstance(data, Response):
            return data
        return _preview(data)


def _upload_fields(request) -> dict[str, Any] | Response:
    """An upload's validated fields, or a 413 when the body or the file is over the limit."""
    limit = services.max_upload_bytes()
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limit + MULTIPART_OVERHEAD_BYTES:
        return _too_large(limit)
    form = UsageImportSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    if form.validated_data["file"].size > limit:
        return _too_large(limit)
    return form.validated_data


def _preview(data: dict[str, Any]) -> Response:
    """The preview action's body: same fields and limits as the import, nothing stored."""
    from accounting.models import ImportJob
    from accounting.parsing.layouts import LayoutError, layout_options
    from accounting.usage_preview import preview_usage

    try:
        options = layout_options(data["kind"], **{name: data.get(name) for name in LAYOUT_FIELDS})
        job = ImportJob(
            kind=data["kind"],
            cluster=data["cluster"],
            timezone=data["timezone"],
            exported_at=data.get("as_of") or data.get("exported_at"),
            parse_options=options,
        )
        return Response(preview_usage(job, data["file"]))
    except LayoutError as exc:
        raise ValidationError(exc.errors) from exc
    except services.ImportInputError as exc:
        raise ValidationError(exc.errors) from exc


class ImportJobViewSet(
    TabularListMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Usage imports: status, progress (0-100), counts, and the bad lines of a failed file."""

    queryset = ImportJob.objects.select_related("cluster", "created_by")
    serializer_class = ImportJobSerializer
    filterset_class = ImportJobFilterSet
    ordering_fields = ["created", "finished_at", "status"]

    def get_queryset(self):
        # A team-scoped user sees and retries only imports holding no other team's data.
        queryset = super().get_queryset()
        if getattr(self, "swagger_fake_view", False):
            return queryset
        return scope_import_jobs(queryset, self.request.user)

    @extend_schema(request=None, responses={202: ImportJobSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Import the stored file again (after fixing aliases or mappings, say)."""
        try:
            job = services.retry_import(self.get_object())
        except services.ImportInputError as exc:
            raise ValidationError(exc.errors) from exc
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class GresAliasViewSet(ConditionalUpdateMixin, TabularListMixin, viewsets.ModelViewSet):
    """Gres type → catalog card model; these rows win over the built-in alias table."""

    queryset = GresAlias.objects.select_related("accelerator")
    serializer_class = GresAliasSerializer
    filterset_class = GresAliasFilterSet
    search_fields = ["gres_type", "accelerator__name"]


class PartitionMappingViewSet(ConditionalUpdateMixin, TabularListMixin, viewsets.ModelViewSet):
    """Slurm partition → pool (and card model for untyped gres/gpu=N), per cluster."""

    queryset = PartitionMapping.objects.select_related("cluster", "pool", "accelerator")
    serializer_class = PartitionMappingSerializer
    filterset_class = PartitionMappingFilterSet


class SreportUtilizationViewSet(TabularListMixin, viewsets.ReadOnlyModelViewSet):
    """Imported sreport cluster-utilization rows (Down and planned-down card-hours)."""

    queryset = SreportUtilization.objects.all()
    serializer_class = SreportUtilizationSerializer
    filterset_class = SreportUtilizationFilterSet
    ordering_fields = ["period_start", "cluster"]


class ReportQueryMixin:
    """Validate a report's query and compute it with the selectors (400 on a bad query)."""

    query_serializer: type[serializers.Serializer]
    money_keys: tuple[str, ...] = ()  # the totals ?currency= converts (none: not offered)

    @staticmethod
    def compute(scope: selectors.AccountingScope) -> dict:
        raise NotImplementedError

    def report(self, request) -> dict:
        query = self.query_serializer(data=request.query_params, context={"request": request})
        query.is_valid(raise_exception=True)
        try:
            report = self.compute(query.scope())
        except selectors.AccountingQueryError as exc:
            raise ValidationError(exc.errors) from exc
        except CostInputError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from exc
        # Team rows of other teams are dropped for a team-scoped user (access.scoping).
        report = scope_report(report, visible_teams(request.user))
        target = query.validated_data.get("currency")
        if target and self.money_keys:
            last_day = (query.validated_data["end"] - dt.timedelta(microseconds=1)).date()
            report["converted"] = in_reporting_currency(
                report["totals"], self.money_keys, target, last_day
            )
        return report


class ReportView(ReportQueryMixin, APIView):
    """GET-only report: validate the query, compute with the selectors, serialize."""

    report_serializer: type[serializers.Serializer]

    def get(self, request):
        return Response(self.report_serializer(self.report(request)).data)


class ReportRowsView(ReportQueryMixin, RowsView):
    """A report's rows as a list: the spreadsheet form of the report (JSON, CSV, XLSX)."""

    def get_rows(self, request, *args, **kwargs) -> list[dict]:
        return self.report(request)["rows"]


class UtilizationRowsView(ReportRowsView):
    """Measured utilization, one row per group and bucket (the utilization report's rows)."""

    query_serializer = UtilizationQuerySerializer
    serializer_class = UtilizationRowSerializer
    compute = staticmethod(selectors.utilization_report)
    export_filename = "utilization"


class CostRowsView(ReportRowsView):
    """Cost, one row per group and bucket; factors and money lost per factor as dotted columns."""

    query_serializer = CostQuerySerializer
    serializer_class = CostRowSerializer
    compute = staticmethod(selectors.cost_report)
    export_filename = "costs"


class ChargebackRowsView(ReportRowsView):
    """Chargeback, one row per team and bucket (the chargeback report's rows)."""

    query_serializer = ChargebackQuerySerializer
    serializer_class = ChargebackRowSerializer
    compute = staticmethod(selectors.chargeback_report)
    export_filename = "chargeback"


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
    money_keys = selectors.COST_MONEY_COLUMNS
    compute = staticmethod(selectors.cost_report)

    @extend_schema(parameters=[CostQuerySerializer], responses=CostReportSerializer)
    def get(self, request):
        """Cost per group and bucket: ownership or rental + energy (tariff, PUE), CO₂, cost per
        allocated card-hour and per effective PFLOP-day, and money lost per factor."""
        return super().get(request)


class ChargebackReportView(ReportView):
    query_serializer = ChargebackQuerySerializer
    report_serializer = ChargebackReportSerializer
    money_keys = ("total_cost", "charged_cost")  # summed over the buckets of the period
    compute = staticmethod(selectors.chargeback_report)

    @extend_schema(parameters=[ChargebackQuerySerializer], responses=ChargebackReportSerializer)
    def get(self, request):
        """Chargeback per team: used card-hours at cost plus a share of the idle cost
        (idle_rule none, proportional or even); per bucket the charges sum to the total."""
        return super().get(request)
