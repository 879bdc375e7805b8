"""Accounting data: imported usage records, sreport cluster utilization, import jobs, aliases.

Usage records are written only by `accounting.services` (bulk upserts keyed on
``(cluster, record_key)``, one transaction per file); measured utilization, costs and
chargeback are read by `accounting.selectors`.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from accounting.parsing import JOB_STATES, normalize_gres_type
from accounting.served_models import resolve_served_model
from accounting.slurmrestd_source import SlurmrestdSource  # noqa: F401 - a model of this app
from core.jobs.models import DurableJob
from engine.inference.memory import KV_PRECISIONS, WEIGHT_PRECISIONS
from engine.limits import date_error, limit_errors
from inventory.models import (
    AcceleratorModel,
    Cluster,
    Pool,
    hidden_cluster_ids,
    hidden_pool_ids,
)

non_negative = MinValueValidator(0)
fraction = [MinValueValidator(0.0), MaxValueValidator(1.0)]


def _choices(values) -> list[tuple[str, str]]:
    return [(value, value) for value in values]


class OfLiveInventory(models.Manager):
    """Hides the rows of deleted clusters and pools (inventory's soft delete) from every
    read, until a restore shows them again or the purge deletes them; ``_base_manager`` (a
    plain manager) still sees them."""

    cluster_field: str | None = "cluster"
    pool_field: str | None = "pool"

    def get_queryset(self) -> models.QuerySet:
        rows = super().get_queryset()
        if self.cluster_field:
            rows = rows.exclude(**{f"{self.cluster_field}_id__in": hidden_cluster_ids()})
        if self.pool_field:
            rows = rows.exclude(**{f"{self.pool_field}_id__in": hidden_pool_ids()})
        return rows


class OfLiveClusters(OfLiveInventory):
    pool_field = None


class OfLivePools(OfLiveInventory):
    cluster_field = None


class JobState(models.TextChoices):
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMEOUT = "timeout", "Timed out"
    NODE_FAIL = "node_fail", "Node failure"
    PREEMPTED = "preempted", "Preempted"
    RUNNING = "running", "Running"


assert tuple(JobState.values) == JOB_STATES, "JobState must list the parser's JOB_STATES"


class ImportKind(models.TextChoices):
    SACCT = "sacct", "Slurm sacct --parsable2"
    SREPORT = "sreport", "Slurm sreport cluster utilization"
    CSV = "csv", "CSV with the documented header"
    XLSX = "xlsx", "Excel workbook with the documented header"


class AsOfSource(models.TextChoices):
    """Where an import's as-of time came from (accounting.parsing.as_of, in this order)."""

    FILE = "file", "the latest time in the file"
    FIELD = "field", "the as-of time given with the import"
    UPLOAD = "upload", "the upload time"


class GresAlias(models.Model):
    """A site's name for a card model in Slurm (``gres/gpu:<gres_type>``).

    Rows override the parser's built-in ``DEFAULT_GRES_ALIASES``; ``gres_type`` is stored
    normalized (lower case, vendor prefix dropped), so ``NVIDIA-H100`` and ``h100`` are one key.
    """

    gres_type = models.CharField(max_length=100)
    accelerator = models.ForeignKey(
        AcceleratorModel, on_delete=models.PROTECT, related_name="gres_aliases"
    )
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="gres_aliases",
        help_text="Only for this cluster (e.g. which A100 'a100' means there); empty: all.",
    )
    notes = models.CharField(max_length=250, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gres_type", "cluster"]
        verbose_name = "gres alias"
        verbose_name_plural = "gres aliases"
        constraints = [
            models.UniqueConstraint(
                fields=["gres_type"],
                condition=models.Q(cluster__isnull=True),
                name="gres_alias_unique_for_all_clusters",
            ),
            models.UniqueConstraint(
                fields=["gres_type", "cluster"], name="gres_alias_unique_per_cluster"
            ),
        ]

    def __str__(self) -> str:
        where = f" on {self.cluster}" if self.cluster_id else ""
        return f"{self.gres_type} → {self.accelerator}{where}"

    def save(self, *args, **kwargs) -> None:
        self.gres_type = normalize_gres_type(self.gres_type)
        super().save(*args, **kwargs)


class PartitionMapping(models.Model):
    """What a Slurm partition of a cluster means: its pool and, for untyped GPUs, its card."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="partition_mappings"
    )
    partition = models.CharField(max_length=100)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.CASCADE, related_name="partition_mappings"
    )
    accelerator = models.ForeignKey(
        AcceleratorModel,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="partition_mappings",
        help_text="Card model of jobs that ask for untyped gres/gpu=N in this partition.",
    )

    class Meta:
        ordering = ["cluster", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "partition"], name="partition_mapping_unique_per_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}:{self.partition}"


class ImportJob(DurableJob):
    """One uploaded (or command-line) usage file and its import run.

    A run is identified by ``run_id``; the worker writes the outcome only while its run_id
    is current, so a redelivered task of a superseded run cannot overwrite a newer result.
    """

    kind = models.CharField(max_length=10, choices=ImportKind.choices)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="import_jobs")
    file = models.FileField(upload_to="usage-imports/%Y/%m/", blank=True)
    source_name = models.CharField(max_length=255, blank=True, help_text="Original file name.")
    size_bytes = models.PositiveBigIntegerField(default=0)
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="Zone the scheduler printed its times in."
    )
    exported_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The as-of time given with the import (--as-of); used when the file has no "
        "time of its own.",
    )
    as_of = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The export's as-of time: running jobs count up to it, and the usage "
        "covers the cluster up to it.",
    )
    as_of_source = models.CharField(max_length=8, choices=AsOfSource.choices, blank=True)
    report_period_start = models.DateTimeField(
        null=True, blank=True, help_text="sreport without its banner: the report period."
    )
    report_period_end = models.DateTimeField(null=True, blank=True)
    parse_options = models.JSONField(
        default=dict,
        blank=True,
        help_text="Layout of the file: columns, delimiter, time_unit.",
    )
    issues = models.JSONField(
        default=list, blank=True, help_text='Bad lines as "line N, column X: reason".'
    )
    warnings = models.JSONField(default=list, blank=True)
    bytes_read = models.PositiveBigIntegerField(default=0)
    lines_read = models.PositiveBigIntegerField(default=0)
    records_read = models.PositiveBigIntegerField(default=0)
    records_created = models.PositiveBigIntegerField(default=0)
    records_updated = models.PositiveBigIntegerField(default=0)
    records_unchanged = models.PositiveBigIntegerField(default=0)
    records_skipped = models.PositiveBigIntegerField(
        default=0, help_text="Lines that are not usage (pending, never started, no GPU)."
    )
    skipped_lines = models.JSONField(
        default=list, blank=True, help_text="Skipped lines per reason: count and first job ids."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["cluster", "status"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} import #{self.pk} into {self.cluster_id}"

    @property
    def as_of_text(self) -> str:
        """E.g. "as of 2025-03-01 09:00 UTC (the latest time in the file)"; "" before a run."""
        if self.as_of is None:
            return ""
        source = self.as_of_source
        label = AsOfSource(source).label if source in AsOfSource.values else source
        return f"as of {self.as_of.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC ({label})"


class UsageRecord(models.Model):
    """One job (or one card kind of a job that held two) on one cluster."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="usage_records")
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    record_key = models.CharField(
        max_length=200, help_text="Upsert key, unique per cluster (sacct: JobIDRaw@Submit)."
    )
    job_id = models.CharField(max_length=100)
    job_label = models.CharField(max_length=100, blank=True)
    parent_job_id = models.CharField(max_length=100, blank=True)
    account = models.CharField("account / team", max_length=100, blank=True)
    user = models.CharField(max_length=100, blank=True)
    partition = models.CharField(max_length=100, blank=True)
    accelerator = models.ForeignKey(
        AcceleratorModel,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="usage_records",
    )
    gres_type = models.CharField(max_length=100, blank=True, help_text="As the file wrote it.")
    mig_profile = models.CharField(max_length=32, blank=True)
    cards = models.FloatField(validators=[non_negative], help_text="Fractional for MIG slices.")
    nodes = models.PositiveIntegerField(null=True, blank=True)
    node_list = models.TextField(
        blank=True, help_text="Slurm NodeList (hostlist); joins jobs with GPU telemetry."
    )
    submit = models.DateTimeField(null=True, blank=True)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True, help_text="Empty while running.")
    duration_h = models.FloatField(validators=[non_negative])
    card_hours = models.FloatField(validators=[non_negative])
    state = models.CharField(max_length=12, choices=JobState.choices)
    scheduler_state = models.CharField(max_length=40, blank=True)
    gpu_utilization = models.FloatField(null=True, blank=True, validators=fraction)
    tokens_per_s = models.FloatField(null=True, blank=True, validators=[non_negative])
    model_params = models.FloatField(null=True, blank=True, validators=[non_negative])
    mfu = models.FloatField(null=True, blank=True, validators=fraction)
    import_job = models.ForeignKey(
        ImportJob,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The import that last created or changed this record.",
    )

    objects = OfLiveInventory()

    class Meta:
        ordering = ["cluster", "start", "record_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "record_key"], name="usage_record_key_unique_per_cluster"
            ),
            models.CheckConstraint(
                condition=models.Q(end__isnull=True) | models.Q(end__gte=models.F("start")),
                name="usage_record_end_after_start",
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "start"]),
            models.Index(fields=["cluster", "end"]),
            # The API's default order (newest first): a page is 50 index rows, not a sort.
            models.Index(fields=["-start", "id"], name="usage_record_newest_first"),
            models.Index(fields=["account"]),
        ]

    def __str__(self) -> str:
        return f"job {self.job_label or self.job_id} on {self.cluster_id}"


class SreportUtilization(models.Model):
    """One ``sreport cluster utilization`` row: a cluster's card-hours over a period."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="sreport_utilization"
    )
    tres_name = models.CharField(max_length=100, default="gres/gpu")
    accelerator = models.ForeignKey(
        AcceleratorModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField(help_text="Exclusive.")
    allocated_card_hours = models.FloatField(validators=[non_negative])
    down_card_hours = models.FloatField(validators=[non_negative])
    planned_down_card_hours = models.FloatField(validators=[non_negative])
    idle_card_hours = models.FloatField(validators=[non_negative])
    planned_card_hours = models.FloatField(validators=[non_negative])
    reported_card_hours = models.FloatField(validators=[non_negative])
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = OfLiveClusters()

    class Meta:
        ordering = ["cluster", "period_start", "tres_name"]
        verbose_name = "sreport utilization row"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "tres_name", "period_start", "period_end"],
                name="sreport_row_unique_per_cluster_period",
            ),
            models.CheckConstraint(
                condition=models.Q(period_end__gt=models.F("period_start")),
                name="sreport_period_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.tres_name} {self.period_start:%Y-%m-%d}"


class UsageDailyRollup(models.Model):
    """Usage records summed per local day × cluster × pool × card × team (precomputed).

    Written only by :func:`accounting.rollups.refresh_usage_rollups` (after each import, by a
    Celery task; ``manage.py refresh_usage_rollups`` rebuilds them). Jobs are split over the
    days they ran exactly like the engine splits them over report buckets, so sums over the
    days of a week or month equal what the reports compute from the records. ``day`` is a
    calendar day in ``settings.TIME_ZONE``; ``pool`` is the record's own (None when unmapped).
    """

    day = models.DateField()
    # The report buckets the day falls in, so reads sum weeks and months in SQL.
    week = models.DateField(null=True, help_text="Monday of the day's ISO week.")
    month = models.DateField(null=True, help_text="First day of the day's month.")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accelerator = models.ForeignKey(
        AcceleratorModel, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    account = models.CharField("account / team", max_length=100, blank=True)
    allocated_card_hours = models.FloatField(default=0.0)
    lost_card_hours = models.FloatField(
        default=0.0, help_text="Of allocated: jobs that ended failed, node_fail or preempted."
    )
    gpu_busy_card_hours = models.FloatField(
        default=0.0, help_text="Σ gres/gpuutil × card-hours of the jobs that report it."
    )
    gpu_measured_card_hours = models.FloatField(
        default=0.0, help_text="Card-hours of the jobs that report gres/gpuutil."
    )
    mfu_card_hours = models.FloatField(
        default=0.0, help_text="Whole card-hours of jobs with an MFU, on the day they started."
    )
    mfu_weighted_card_hours = models.FloatField(default=0.0, help_text="Σ MFU × card-hours.")
    refreshed_at = models.DateTimeField()

    objects = OfLiveInventory()

    class Meta:
        ordering = ["cluster", "day"]
        indexes = [
            models.Index(fields=["day", "cluster"]),
            models.Index(fields=["cluster", "day"]),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.day} {self.account}"


class RollupRefresh(DurableJob):
    """One queued rebuild of the daily rollups (and the dashboards' precomputed views).

    Sent through :func:`core.jobs.dispatch.send_or_defer` like the other worker jobs: while the
    broker is down the row waits (``error`` = WORKERS_UNAVAILABLE) and is sent again later,
    so an import never loses its refresh. ``cluster_ids`` None means every cluster.
    """

    cluster_ids = models.JSONField(null=True, blank=True)
    records = models.PositiveIntegerField(default=0)
    rows = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"rollup refresh {self.pk} {self.cluster_ids or 'all'} ({self.status})"


# Serving-load field -> its limit in engine.limits.LIMITS (the inference estimate's).
SERVING_LOAD_LIMITS = {
    "served_tokens_per_s": "serving_tokens_per_s",
    "model_params": "model_params",
    "input_tokens": "seq_len",
    "output_tokens": "seq_len",
}


class ServingLoad(models.Model):
    """Measured serving load of an inference pool over a period: the output tokens/s it
    served and the model it served, so analyses can compare it with the cards' capacity
    (docs/efficiency-model.md, "Serving pools")."""

    # What a user edits besides the pool, in order: shared by the API and the pool-page form.
    EDITABLE_FIELDS = (
        "period_start",
        "period_end",
        "served_tokens_per_s",
        "model_name",
        "model_params",
        "weight_precision",
        "kv_precision",
        "input_tokens",
        "output_tokens",
        "notes",
    )

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="serving_loads")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField(help_text="Exclusive.")
    served_tokens_per_s = models.FloatField(
        help_text="Output tokens per second served, mean over the period."
    )
    model_name = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text=(
            "Optional: the served model's name in the model catalog (e.g. Qwen3-235B-A22B). "
            "Fills the parameters and, for a mixture of experts, makes analyses use its "
            "active parameters and the experts a step reads."
        ),
    )
    model_params = models.FloatField(
        blank=True,  # filled from the catalog when model_name names a model (clean())
        help_text="Parameters N of the served model (every expert's); empty with model_name: "
        "the catalog's total.",
    )
    weight_precision = models.CharField(max_length=8, choices=_choices(WEIGHT_PRECISIONS))
    kv_precision = models.CharField(max_length=8, choices=_choices(KV_PRECISIONS))
    input_tokens = models.PositiveIntegerField(help_text="Mean prompt tokens per request.")
    output_tokens = models.PositiveIntegerField(help_text="Mean generated tokens per request.")
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = OfLivePools()

    class Meta:
        ordering = ["pool", "-period_start"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(period_end__gt=models.F("period_start")),
                name="serving_load_period_positive",
            ),
        ]

    def __str__(self) -> str:
        period = f"{self.period_start:%Y-%m-%d} – {self.period_end:%Y-%m-%d}"
        return f"{self.pool} {period}: {self.served_tokens_per_s:g} tokens/s"

    def clean(self) -> None:
        if errors := serving_load_errors(self):
            raise ValidationError(errors)


def serving_load_errors(load) -> dict[str, str]:
    """Field -> message: an unknown catalog model or a count disagreeing with it (a named
    model fills model_params: accounting/served_models.py), numbers out of their limits,
    dates outside the years, end <= start."""
    errors = resolve_served_model(load)
    errors.update(limit_errors(load, SERVING_LOAD_LIMITS))
    for field in ("period_start", "period_end"):
        if message := date_error(getattr(load, field, None)):
            errors[field] = message
    start, end = getattr(load, "period_start", None), getattr(load, "period_end", None)
    if "period_end" not in errors and start and end and end <= start:
        errors["period_end"] = "Must be after period_start."
    return errors
