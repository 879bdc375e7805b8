"""Export tokens (spreadsheet links), the token URL itself, and background XLSX jobs.

Any signed-in role manages its own tokens and jobs; administrators see everyone's. The token
URL ``/api/v1/export/<token>/`` is the one endpoint without a login: the token is the
credential, it reads only its scope, as its owner, and is rate limited per token.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from access.roles import VIEWER
from core.jobs.limits import JobLimitReached, too_many_jobs
from core.retention.files import expired_file
from exports import services
from exports.api.serializers import (
    ExportJobCreateSerializer,
    ExportJobSerializer,
    ExportTokenCreatedSerializer,
    ExportTokenCreateSerializer,
    ExportTokenSerializer,
    ExportTokenUseSerializer,
)
from exports.models import ExportJob, ExportToken

TOKEN_USES_SHOWN = 100


class ExportTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your spreadsheet links (all of them for administrators). DELETE revokes."""

    serializer_class = ExportTokenSerializer
    write_role = VIEWER  # every role may share what it can read
    filterset_fields = ["format"]
    ordering_fields = ["created", "expires_at", "last_used_at", "name"]

    queryset = ExportToken.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ExportToken.objects.none()
        return services.tokens_for(self.request.user)

    @extend_schema(
        request=ExportTokenCreateSerializer, responses={201: ExportTokenCreatedSerializer}
    )
    def create(self, request):
        """Create a read-only link to one query; the token is in the answer, and only there."""
        payload = ExportTokenCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        try:
            token, clear = services.create_token(
                owner=request.user,
                name=data["name"],
                url=data["url"],
                fmt=data["format"],
                expires_in_days=data["expires_in_days"],
            )
        except services.ExportForbidden as exc:
            raise PermissionDenied(exc.detail) from exc
        except services.ExportInputError as exc:
            raise ValidationError(exc.errors) from exc
        body = ExportTokenSerializer(token).data
        body["token"] = clear
        body["link"] = request.build_absolute_uri(f"/api/v1/export/{clear}/")
        return Response(body, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        services.revoke(instance)  # kept (with its use log), never usable again

    @extend_schema(request=None, responses=ExportTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Revoke the link at once; spreadsheets using it get 410 Gone."""
        return Response(ExportTokenSerializer(services.revoke(self.get_object())).data)

    @extend_schema(responses=ExportTokenUseSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def uses(self, request, pk=None):
        """The latest uses of the link: when, from where, status and rows sent."""
        uses = self.get_object().uses.all()[:TOKEN_USES_SHOWN]
        return Response(ExportTokenUseSerializer(uses, many=True).data)


class ExportTokenThrottle(SimpleRateThrottle):
    """Per token (not per address): a refreshing spreadsheet cannot flood the server."""

    scope = "export_token"
    # Shared by every web process, so the limit is per token, not per process.
    cache = caches["dashboards"]

    def get_rate(self):
        return settings.EXPORT_TOKEN_RATE

    def get_cache_key(self, request, view):
        return self.cache_format % {
            "scope": self.scope,
            "ident": services.hash_token(view.kwargs.get("token", ""))[:32],
        }


class ExportTokenFetchView(APIView):
    """The spreadsheet link: the token's query, as its owner, without a login."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes = [ExportTokenThrottle]
    renderer_classes = [JSONRenderer]

    def perform_content_negotiation(self, request, force=False):
        # The scoped view negotiates its own format; errors here are always JSON.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        auth=[],
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The scoped rows."),
            404: OpenApiResponse(description="Unknown token."),
            410: OpenApiResponse(description="Revoked or expired token."),
            429: OpenApiResponse(description="Too many requests for this token."),
        },
    )
    def get(self, request, token: str):
        """The rows of the token's query in its format (CSV for IMPORTDATA / From Web)."""
        try:
            return services.fetch_with_token(token, request._request)
        except services.TokenRefused as exc:
            if exc.token is not None:
                services.log_use(exc.token, Response(status=exc.status_code), request)
            return Response({"detail": exc.detail}, status=exc.status_code)


class ExportJobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Background XLSX exports of large lists: poll for progress, then download."""

    serializer_class = ExportJobSerializer
    write_role = VIEWER
    filterset_fields = ["status"]
    ordering_fields = ["created", "finished_at"]

    queryset = ExportJob.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ExportJob.objects.none()
        return services.jobs_for(self.request.user)

    @extend_schema(
        request=ExportJobCreateSerializer,
        responses={
            202: ExportJobSerializer,
            429: OpenApiResponse(
                description="You have too many exports queued or running; Retry-After says "
                "when to try again."
            ),
        },
    )
    def create(self, request):
        """Queue an XLSX of an API list (any size); a worker writes it and reports progress.
        Each user may have a few queued or running at once (429 beyond)."""
        payload = ExportJobCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            job = services.create_job(owner=request.user, url=payload.validated_data["url"])
        except services.ExportForbidden as exc:
            raise PermissionDenied(exc.detail) from exc
        except services.ExportInputError as exc:
            raise ValidationError(exc.errors) from exc
        except JobLimitReached as exc:
            return too_many_jobs(exc)
        return Response(ExportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            (200, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"): (
                OpenApiResponse(OpenApiTypes.BINARY, description="The XLSX file.")
            ),
            404: OpenApiResponse(description="No such job, or not finished."),
            410: OpenApiResponse(description="The file was deleted after its retention period."),
        }
    )
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        """The finished XLSX."""
        job = self.get_object()
        if job.status == "succeeded" and not job.file:
            expired = expired_file(job, "file")
            if expired is not None:  # the retention task deleted it (core.retention)
                message = f"{expired.message} Queue the export again."
                return Response({"detail": message}, status=status.HTTP_410_GONE)
        if job.status != "succeeded" or not job.file:
            raise NotFound(f"The export is not ready (status: {job.status}).")
        refusal = services.may_download(request.user, job)
        if refusal:
            raise PermissionDenied(refusal)
        return FileResponse(
            job.file.open("rb"), as_attachment=True, filename=f"export-{job.pk}.xlsx"
        )
