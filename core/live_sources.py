"""A live source: one cluster's outside system read on a schedule (a slurmrestd, a
Prometheus with kube-state-metrics), its health and its read as a durable job (core.jobs).

The concrete sources add what they read and how (accounting.slurmrestd_source,
telemetry.kubernetes.models); what every such source holds is here once: its encrypted
bearer token, its schedule, the window of its last read and how its reads are going.
core.live_source_runs queues, fails and runs them.
"""

from __future__ import annotations

from typing import ClassVar

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.jobs.models import DurableJob
from core.secrets import decrypt_secret, encrypt_secret


class EncryptedToken(models.Model):
    """A bearer token encrypted at rest (core.secrets) and never shown back; a subclass
    names its label, so each kind of source's tokens are apart."""

    TOKEN_LABEL: ClassVar[str]

    token_encrypted = models.TextField(blank=True, editable=False)

    class Meta:
        abstract = True

    @property
    def has_token(self) -> bool:
        return bool(self.token_encrypted)

    def set_token(self, token: str | None) -> None:
        self.token_encrypted = encrypt_secret(token, label=self.TOKEN_LABEL) if token else ""

    def token(self) -> str | None:
        """The token, or None when none is stored or the key changed since (enter it again)."""
        if not self.token_encrypted:
            return None
        return decrypt_secret(self.token_encrypted, label=self.TOKEN_LABEL)


class LiveSource(EncryptedToken, DurableJob):
    """Schedule and health every live source shares (its token: EncryptedToken)."""

    interval_s = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(60), MaxValueValidator(86_400)]
    )
    timeout_s = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1), MaxValueValidator(600)]
    )
    window_start = models.DateTimeField(null=True, blank=True, editable=False)
    window_end = models.DateTimeField(null=True, blank=True, editable=False)
    last_success_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_failure_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    next_attempt_at = models.DateTimeField(null=True, blank=True, editable=False)
    warnings = models.JSONField(default=list, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
