"""A live Slurm source: one cluster's slurmrestd, pulled on a schedule (accounting.slurmrestd).

The row is the source's settings, its cursor and health, and its pull as a durable job
(core.jobs): each pull is a new run of the row, so a source holds one run at a time and the
table stays one row per cluster. Its JWT is encrypted at rest (Fernet, like the telemetry
bearer tokens) and never shown back. accounting.models imports this module; it imports no
other accounting module, so the pulling package may import it without an import cycle.
"""

from __future__ import annotations

import re
import zoneinfo

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models

from core.live_sources import LiveSource
from core.outbound import validate_base_url
from inventory.models import Cluster

DEFAULT_API_VERSION = "v0.0.38"
# slurmdb plugin path segments: v0.0.38 (Slurm 21.08, 22.05) up to v0.0.44 (Slurm 25.x).
API_VERSION_PATTERN = r"^v0\.0\.(3[89]|4[0-4])$"
# Slurm user and cluster names as slurmdbd stores them (no spaces, no separators of lists).
SLURM_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,99}$"


def validate_slurmrestd_url(value: str) -> None:
    validate_base_url(
        value, what="the slurmrestd base URL, e.g. https://slurmrestd.example.org:6820"
    )


def validate_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        message = f'Unknown time zone "{value}"; use an IANA name such as UTC.'
        raise ValidationError(message) from exc


validate_api_version = RegexValidator(
    re.compile(API_VERSION_PATTERN),
    "An API version such as v0.0.38 (Slurm 22.05) or v0.0.40 (Slurm 23.11).",
)
validate_slurm_name = RegexValidator(
    re.compile(SLURM_NAME_PATTERN), "Letters, digits and _ . @ - only, at most 100."
)


ENCRYPTION_LABEL = "slurmrestd-token"  # core.secrets: the telemetry tokens' key, its own label


class SlurmrestdSource(LiveSource):
    """Where one cluster's Slurm accounting is read live, and how its pulls are going."""

    TOKEN_LABEL = ENCRYPTION_LABEL

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="slurmrestd_source"
    )
    url = models.CharField(
        max_length=500,
        validators=[validate_slurmrestd_url],
        help_text="slurmrestd base URL, e.g. http://slurmctl:6820",
    )
    api_version = models.CharField(
        max_length=10, default=DEFAULT_API_VERSION, validators=[validate_api_version]
    )
    slurm_cluster = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_slurm_name],
        help_text="ClusterName in slurm.conf, when one slurmdbd serves several clusters.",
    )
    user_name = models.CharField(
        max_length=100,
        validators=[validate_slurm_name],
        help_text="Sent as X-SLURM-USER-NAME; it must see every user's jobs (an operator).",
    )
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="Zone sacct prints this cluster's times in: a job pulled live and the same "
        "job imported from a sacct file are then one record.",
    )
    enabled = models.BooleanField(default=True, help_text="Pulled by the schedule.")
    overlap_s = models.PositiveIntegerField(
        default=3600,
        validators=[MaxValueValidator(7 * 86_400)],
        help_text="Each pull re-reads this much before the cursor (late records).",
    )
    cursor = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last job end seen, held back to the start of jobs still running; the next "
        "pull reads from here minus the overlap. Empty: the last day.",
    )
    records_read = models.PositiveIntegerField(default=0, editable=False)
    records_created = models.PositiveIntegerField(default=0, editable=False)
    records_updated = models.PositiveIntegerField(default=0, editable=False)
    records_unchanged = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["cluster"]
        indexes = [models.Index(fields=["enabled", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"slurmrestd of {self.cluster}"
