"""Scheduled reports: what to report on and when (ReportSchedule), and what was produced (Report).

Exactly one Report exists per schedule and period (a unique constraint), and every status
change that does work (generate, send) is claimed with a conditional UPDATE, so a retried or
duplicated beat tick, or two workers, can never produce a second report or a second e-mail.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import models

from core.scopes import Scope, scope_choices
from inventory.currency import validate_currency
from inventory.models import Cluster, Site
from reports import periods

# The scopes a report covers (no single pool), in the stored order.
REPORT_SCOPES = scope_choices(Scope.FLEET, Scope.SITE, Scope.CLUSTER, Scope.TEAM)


class ReportTemplate(models.TextChoices):
    UTILIZATION = "utilization", "Utilization"
    COST_CHARGEBACK = "cost_chargeback", "Cost and chargeback"
    EFFICIENCY_REVIEW = "efficiency_review", "Efficiency review"


class Frequency(models.TextChoices):
    DAILY = periods.DAILY, "Daily"
    WEEKLY = periods.WEEKLY, "Weekly (Mondays)"
    MONTHLY = periods.MONTHLY, "Monthly (on the 1st)"
    QUARTERLY = periods.QUARTERLY, "Quarterly (1 Jan, Apr, Jul, Oct)"
    CRON = periods.CRON, "Cron expression"


class ReportFormat(models.TextChoices):
    HTML_EMAIL = "html_email", "HTML e-mail body"
    XLSX = "xlsx", "Excel workbook (XLSX)"
    CSV = "csv", "CSV"
    PRINT_HTML = "print_html", "Print-ready HTML page"


# Formats that are files (stored on the report and attached to the e-mail).
FILE_FORMATS = (ReportFormat.XLSX, ReportFormat.CSV, ReportFormat.PRINT_HTML)
DEFAULT_FORMATS = [ReportFormat.HTML_EMAIL.value, ReportFormat.XLSX.value]


def default_formats() -> list[str]:
    return list(DEFAULT_FORMATS)


def validate_addresses(value) -> None:
    if not isinstance(value, list):
        raise ValidationError("Give a list of e-mail addresses.")
    for address in value:
        try:
            validate_email(address)
        except ValidationError as exc:
            raise ValidationError(f'"{address}" is not an e-mail address.') from exc


def validate_formats(value) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("Choose at least one format.")
    unknown = [item for item in value if item not in ReportFormat.values]
    if unknown:
        raise ValidationError(
            f"Unknown format(s) {', '.join(map(str, unknown))}; "
            f"choose from {', '.join(ReportFormat.values)}."
        )


def validate_timezone(value: str) -> None:
    try:
        periods.zone(value)
    except periods.ScheduleError as exc:
        raise ValidationError(exc.message) from exc


class ReportSchedule(models.Model):
    name = models.CharField(max_length=200, unique=True)
    scope = models.CharField(max_length=10, choices=REPORT_SCOPES, default=Scope.FLEET)
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.PROTECT, related_name="report_schedules"
    )
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="report_schedules"
    )
    team = models.CharField(
        max_length=100, blank=True, help_text="Account / team name (team scope only)."
    )
    template = models.CharField(
        max_length=20, choices=ReportTemplate.choices, default=ReportTemplate.UTILIZATION
    )
    frequency = models.CharField(max_length=10, choices=Frequency.choices, default=Frequency.WEEKLY)
    cron_expression = models.CharField(
        max_length=100,
        blank=True,
        help_text="Five fields, local time: minute hour day-of-month month day-of-week "
        "(frequency cron only). The period runs from the previous firing to this one.",
    )
    send_time = models.TimeField(
        default=dt.time(7, 0), help_text="Local time of day the report goes out (not for cron)."
    )
    timezone = models.CharField(
        max_length=64, default="UTC", validators=[validate_timezone], help_text="IANA name."
    )
    reporting_currency = models.CharField(
        max_length=3,
        blank=True,
        validators=[validate_currency],
        help_text="ISO 4217 code: money converted with the dated exchange rates of the period "
        "end (all or nothing). Blank: per currency.",
    )
    recipient_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="report_subscriptions"
    )
    recipient_addresses = models.JSONField(
        default=list, blank=True, validators=[validate_addresses], help_text="Plain addresses."
    )
    formats = models.JSONField(default=default_formats, validators=[validate_formats])
    enabled = models.BooleanField(default=True, help_text="Paused schedules do not fire.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_report_schedules",
    )
    next_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Next firing (empty while paused); kept by the service."
    )
    last_run_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["enabled", "next_run_at"])]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(scope="fleet", site__isnull=True, cluster__isnull=True, team="")
                    | models.Q(scope="site", site__isnull=False, cluster__isnull=True, team="")
                    | models.Q(scope="cluster", site__isnull=True, cluster__isnull=False, team="")
                    | (
                        models.Q(scope="team", site__isnull=True, cluster__isnull=True)
                        & ~models.Q(team="")
                    )
                ),
                name="report_schedule_scope_target",
            ),
            models.CheckConstraint(
                condition=models.Q(frequency="cron") & ~models.Q(cron_expression="")
                | ~models.Q(frequency="cron") & models.Q(cron_expression=""),
                name="report_schedule_cron_only_for_cron",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.reporting_currency = (self.reporting_currency or "").upper()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        targets = {"site": self.site_id, "cluster": self.cluster_id, "team": self.team}
        for name, value in targets.items():
            if self.scope == name and not value:
                errors[name] = f"Choose the {name} this report covers."
            elif self.scope != name and value:
                errors[name] = f"Leave empty unless the scope is {name}."
        if self.frequency == Frequency.CRON:
            try:
                periods.parse_cron(self.cron_expression)
            except periods.ScheduleError as exc:
                errors["cron_expression"] = exc.message
        elif self.cron_expression:
            errors["cron_expression"] = "Only for the cron frequency."
        if errors:
            raise ValidationError(errors)

    def spec(self) -> periods.Schedule:
        return periods.Schedule(
            frequency=self.frequency,
            timezone=self.timezone,
            at=self.send_time,
            cron=self.cron_expression,
        )

    @property
    def scope_label(self) -> str:
        if self.scope == Scope.SITE:
            return f"Site {self.site}"
        if self.scope == Scope.CLUSTER:
            return f"Cluster {self.cluster}"
        if self.scope == Scope.TEAM:
            return f"Team {self.team}"
        return "Fleet"

    @property
    def schedule_label(self) -> str:
        if self.frequency == Frequency.CRON:
            return f"cron {self.cron_expression} ({self.timezone})"
        return f"{self.get_frequency_display()} at {self.send_time:%H:%M} {self.timezone}"


class ReportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    GENERATING = "generating", "Generating"
    GENERATED = "generated", "Generated"
    SENDING = "sending", "Sending"
    DELIVERED = "delivered", "Delivered"
    DELIVERY_FAILED = "delivery_failed", "Delivery failed"
    FAILED = "failed", "Generation failed"


class Trigger(models.TextChoices):
    SCHEDULE = "schedule", "Schedule"
    MANUAL = "manual", "Run now"


def report_upload_to(instance: Report, filename: str) -> str:
    return f"reports/{instance.schedule_id}/{instance.pk}/{filename}"


class Report(models.Model):
    """The artifact of one schedule and one period: numbers, files and the delivery record."""

    schedule = models.ForeignKey(ReportSchedule, on_delete=models.CASCADE, related_name="reports")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    status = models.CharField(
        max_length=20, choices=ReportStatus.choices, default=ReportStatus.QUEUED
    )
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    deliver = models.BooleanField(default=True, help_text="E-mail the recipients when generated.")
    numbers = models.JSONField(null=True, blank=True, help_text="The figures the report shows.")
    xlsx_file = models.FileField(upload_to=report_upload_to, blank=True, max_length=300)
    csv_file = models.FileField(upload_to=report_upload_to, blank=True, max_length=300)
    html_file = models.FileField(upload_to=report_upload_to, blank=True, max_length=300)
    recipients = models.JSONField(default=list, blank=True, help_text="Addresses it went to.")
    withheld_recipients = models.JSONField(
        default=list,
        blank=True,
        help_text="Recipients it was not sent to, each with why: they may not see its scope.",
    )
    error = models.TextField(blank=True, help_text="Why generation or the last delivery failed.")
    delivery_attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(auto_now_add=True)
    generated_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-period_start", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "period_start", "period_end"],
                name="report_once_per_schedule_period",
            ),
            models.CheckConstraint(
                condition=models.Q(period_end__gt=models.F("period_start")),
                name="report_period_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.schedule} · {self.period_label}"

    @property
    def period(self) -> periods.Period:
        tz = periods.zone(self.schedule.timezone)
        return periods.Period(self.period_start.astimezone(tz), self.period_end.astimezone(tz))

    @property
    def period_label(self) -> str:
        return self.period.label()

    def file_for(self, file_format: str):
        return {
            ReportFormat.XLSX: self.xlsx_file,
            ReportFormat.CSV: self.csv_file,
            ReportFormat.PRINT_HTML: self.html_file,
        }.get(file_format)

    @property
    def available_formats(self) -> list[str]:
        return [fmt.value for fmt in FILE_FORMATS if self.file_for(fmt)]
