"""Report API: /api/v1/report-schedules/ and /api/v1/reports/ (JSON, CSV and XLSX lists).

Roles (enforced per action): everyone with the viewer role reads; planners run a schedule now,
preview it and retry a delivery; admins create, change, pause (PATCH enabled) and delete
schedules, and delete reports.
"""

from __future__ import annotations

from django.http import FileResponse, Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from access.roles import ADMIN, PLANNER, VIEWER
from core.concurrency import ConditionalUpdateMixin
from core.tabular.exporting import TabularListMixin
from reports import content, selectors, services
from reports.api.serializers import (
    ReportDetailSerializer,
    ReportScheduleSerializer,
    ReportSerializer,
    RunNowResultSerializer,
    RunNowSerializer,
)
from reports.models import FILE_FORMATS
from reports.views import DOWNLOAD_TYPES, expired_message


class ReportScheduleViewSet(ConditionalUpdateMixin, TabularListMixin, viewsets.ModelViewSet):
    queryset = selectors.schedules_queryset()
    serializer_class = ReportScheduleSerializer
    filterset_fields = ["scope", "template", "frequency", "enabled"]
    ordering_fields = ["name", "next_run_at", "created"]
    ordering = ["name"]
    search_fields = ["name", "team"]

    def get_queryset(self):
        # A team-scoped user reads (and runs) only its teams' team-scope schedules.
        if getattr(self, "swagger_fake_view", False):
            return super().get_queryset()
        return selectors.schedules_queryset(self.request.user)

    @property
    def read_role(self) -> str:
        return PLANNER if getattr(self, "action", None) == "preview" else VIEWER

    @property
    def write_role(self) -> str:
        return PLANNER if getattr(self, "action", None) == "run" else ADMIN

    @extend_schema(request=RunNowSerializer, responses={202: RunNowResultSerializer})
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        """Run now: queue the report of one period (one report per period: a second run of the
        same period returns the existing report and sends nothing)."""
        schedule = self.get_object()
        body = RunNowSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        period = body.period(schedule, timezone.now())
        report, queued = services.run_now(
            schedule, period, user=request.user, deliver=body.validated_data["deliver"]
        )
        data = {
            "queued": queued,
            "report": ReportSerializer(report, context={"request": request}).data,
        }
        return Response(data, status=status.HTTP_202_ACCEPTED if queued else status.HTTP_200_OK)

    @extend_schema(
        parameters=[
            OpenApiParameter("day", OpenApiTypes.DATE, description="A day inside the period.")
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The report numbers.")},
    )
    @action(detail=True, methods=["get"])
    def preview(self, request, pk=None):
        """The numbers the report of a period would show, computed now and stored nowhere."""
        schedule = self.get_object()
        body = RunNowSerializer(data=request.query_params)
        body.is_valid(raise_exception=True)
        return Response(content.build_numbers(schedule, body.period(schedule, timezone.now())))


class ReportViewSet(
    TabularListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    queryset = selectors.reports_queryset()
    serializer_class = ReportSerializer
    filterset_fields = ["schedule", "status", "trigger"]
    ordering_fields = ["period_start", "generated_at", "queued_at"]
    ordering = ["-period_start", "-pk"]
    read_role = VIEWER

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return super().get_queryset()
        return selectors.reports_queryset(self.request.user)

    @property
    def write_role(self) -> str:
        return PLANNER if getattr(self, "action", None) == "retry_delivery" else ADMIN

    def get_serializer_class(self):
        return ReportDetailSerializer if self.action == "retrieve" else ReportSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "file_format",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=[fmt.value for fmt in FILE_FORMATS],
            )
        ],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    @action(detail=True, methods=["get"], url_path=r"download/(?P<file_format>[a-z_]+)")
    def download(self, request, pk=None, file_format: str = ""):
        """One of the report's files (xlsx, csv, print_html) as an attachment."""
        report = self.get_object()
        file = report.file_for(file_format)
        if not file:
            if expired := expired_message(report, file):
                return Response({"detail": expired}, status=status.HTTP_410_GONE)
            raise Http404(f"This report has no {file_format} file.")
        return FileResponse(
            file.open("rb"),
            as_attachment=True,
            filename=file.name.rsplit("/", 1)[-1],
            content_type=DOWNLOAD_TYPES[file_format],
        )

    @extend_schema(request=None, responses={202: ReportSerializer, 409: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"], url_path="retry-delivery")
    def retry_delivery(self, request, pk=None):
        """Queue another delivery of a report whose delivery failed."""
        report = self.get_object()
        if not services.retry_delivery(report):
            return Response(
                {"status": f"Only a failed delivery can be retried (this one is {report.status})."},
                status=status.HTTP_409_CONFLICT,
            )
        report.refresh_from_db()
        return Response(
            ReportSerializer(report, context={"request": request}).data,
            status=status.HTTP_202_ACCEPTED,
        )
