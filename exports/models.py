"""Spreadsheet links and background exports.

An :class:`ExportToken` lets a spreadsheet (Excel "From Web", Google Sheets ``IMPORTDATA``)
fetch one API query without a login: read-only, for that query only, as its owner, until it
expires or is revoked. Only a SHA-256 of the token is stored; each use is logged in
:class:`ExportTokenUse`. An :class:`ExportJob` builds a large XLSX on a Celery worker.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.jobs.models import DurableJob


class ExportFormat(models.TextChoices):
    CSV = "csv", "CSV"
    XLSX = "xlsx", "XLSX"
    JSON = "json", "JSON"


class ExportToken(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="export_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the link is for (shown in lists).")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=8, editable=False, help_text="First characters of the token, to recognise it."
    )
    path = models.CharField(max_length=300, help_text="API path the token may read.")
    query = models.CharField(
        max_length=2000, blank=True, help_text="Normalized query string (sorted, no format)."
    )
    format = models.CharField(max_length=4, choices=ExportFormat.choices, default="csv")
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    use_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) → {self.path}"

    @property
    def scope(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "active"


class ExportTokenUse(models.Model):
    """One fetch through a token: who (token, owner, address), when, how many rows."""

    token = models.ForeignKey(ExportToken, on_delete=models.CASCADE, related_name="uses")
    used_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveSmallIntegerField()
    rows = models.PositiveIntegerField(null=True, blank=True)
    remote_addr = models.CharField(max_length=64, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-used_at"]
        indexes = [models.Index(fields=["token", "used_at"])]

    def __str__(self) -> str:
        return f"{self.token_id} at {self.used_at:%Y-%m-%d %H:%M}: {self.status_code}"


class ExportJob(DurableJob):
    """A large XLSX built in the background from one API query, run as its owner."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="export_jobs"
    )
    path = models.CharField(max_length=300)
    query = models.CharField(max_length=2000, blank=True)
    rows_total = models.PositiveIntegerField(null=True, blank=True)
    rows_written = models.PositiveIntegerField(default=0)
    file = models.FileField(upload_to="exports/%Y/%m/", blank=True)
    size_bytes = models.PositiveBigIntegerField(default=0)
    built_for_teams = models.JSONField(
        null=True,
        blank=True,
        help_text="The teams whose rows the file could hold (its owner's when built); "
        "empty: every team. A download needs them all.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"export #{self.pk} of {self.path}"
