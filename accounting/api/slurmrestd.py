"""Live Slurm sources (GET/POST /api/v1/slurmrestd-sources/, POST .../<id>/pull/): one
cluster's slurmrestd, its JWT (write-only, stored encrypted, never shown back), its schedule
and how its pulls are going (docs/usage-import.md, "Live from slurmrestd").

Administrators only, read and write: a source holds a credential that reads every user's jobs.
"""

from __future__ import annotations

import re

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from access.roles import ADMIN
from accounting import usage_sources
from accounting.api.live_sources import RUN_STATUS, LiveSourceSerializer, read_now
from accounting.slurmrestd_source import SlurmrestdSource
from core.bounds import WithinDates

# A JWT is three base64url parts joined by dots; nothing else may reach a request header.
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_=+/-]+(\.[A-Za-z0-9_=+/-]*){0,4}$")
SETTINGS = (
    "cluster", "url", "api_version", "slurm_cluster", "user_name", "timezone", "enabled",
    "interval_s", "overlap_s", "timeout_s", "cursor",
)  # fmt: skip
STATUS = (
    *RUN_STATUS, "records_read", "records_created", "records_updated", "records_unchanged",
    "warnings", "created", "updated",
)  # fmt: skip


class SlurmrestdSourceSerializer(LiveSourceSerializer):
    RECONNECT = frozenset({"url", "api_version", "user_name", "slurm_cluster", "enabled"})

    token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=8192,
        help_text="slurmrestd JWT (scontrol token); stored encrypted, never shown. Empty: remove.",
    )  # fmt: skip
    cursor = serializers.DateTimeField(
        required=False, allow_null=True, validators=[WithinDates()],
        help_text="Where the next pull starts (less the overlap); empty: the last day.",
    )  # fmt: skip

    class Meta:
        model = SlurmrestdSource
        fields = ["id", *SETTINGS, "token", *STATUS]
        read_only_fields = list(STATUS)

    def validate_token(self, value: str) -> str:
        if value and not TOKEN_PATTERN.match(value):
            raise serializers.ValidationError("Not a JWT: base64url parts joined by dots.")
        return value

    def validate_cluster(self, value):
        """One source kind per cluster (docs/kubernetes-usage.md): no Slurm source where
        Kubernetes gives the allocation."""
        if refusal := usage_sources.upload_refusal(value):
            raise serializers.ValidationError(refusal)
        return value

    def validate_cursor(self, value):
        if value is not None and value > timezone.now():
            raise serializers.ValidationError("The cursor cannot be in the future.")
        return value


class SlurmrestdSourceViewSet(viewsets.ModelViewSet):
    queryset = SlurmrestdSource.objects.select_related("cluster").order_by("pk")
    serializer_class = SlurmrestdSourceSerializer
    read_role = ADMIN
    write_role = ADMIN

    @extend_schema(request=None, responses={202: SlurmrestdSourceSerializer})
    @action(detail=True, methods=["post"])
    def pull(self, request: Request, pk: str | None = None) -> Response:
        """Pull now, whatever the schedule or back-off says (409 while a pull runs)."""
        return read_now(self, "pull")
