"""Export token and export job serializers (the clear token appears only on creation)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from core.text import validate_name
from exports.models import ExportFormat, ExportJob, ExportToken, ExportTokenUse


class ExportTokenSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    state = serializers.CharField(read_only=True, help_text="active, revoked or expired")
    scope = serializers.CharField(read_only=True, help_text="Path and query the token reads.")

    class Meta:
        model = ExportToken
        fields = [
            "id",
            "name",
            "owner",
            "prefix",
            "path",
            "query",
            "scope",
            "format",
            "state",
            "created",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "use_count",
        ]
        read_only_fields = fields


class ExportTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, validators=[validate_name])
    url = serializers.CharField(
        max_length=2300, help_text="The API list to share, e.g. /api/v1/usage-records/?team=a"
    )
    format = serializers.ChoiceField(choices=ExportFormat.choices, default="csv")
    expires_in_days = serializers.IntegerField(min_value=1, default=30)

    def validate_expires_in_days(self, value: int) -> int:
        if value > settings.EXPORT_TOKEN_MAX_DAYS:
            raise serializers.ValidationError(f"At most {settings.EXPORT_TOKEN_MAX_DAYS} days.")
        return value


class ExportTokenCreatedSerializer(ExportTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown once; only a hash is kept.")
    link = serializers.CharField(read_only=True, help_text="For Excel From Web / IMPORTDATA.")

    class Meta(ExportTokenSerializer.Meta):
        fields = [*ExportTokenSerializer.Meta.fields, "token", "link"]
        read_only_fields = fields


class ExportTokenUseSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExportTokenUse
        fields = ["id", "used_at", "status_code", "rows", "remote_addr", "user_agent"]
        read_only_fields = fields


class ExportJobSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = ExportJob
        fields = [
            "id",
            "owner",
            "path",
            "query",
            "status",
            "progress",
            "rows_total",
            "rows_written",
            "size_bytes",
            "error",
            "download_url",
            "created",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_download_url(self, job: ExportJob) -> str | None:
        if job.status != "succeeded":
            return None
        return f"/api/v1/export-jobs/{job.pk}/download/"


class ExportJobCreateSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=2300, help_text="The API list to build as XLSX.")
