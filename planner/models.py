"""Stored efficiency analyses: one row per scope and period, computed by Celery workers.

Both are durable jobs (core.jobs): a run is identified by `run_id`; a task writes only while
its run_id is current, so a late or redelivered task of a superseded run can never overwrite a
newer result (idempotent writes).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.jobs.models import DurableJob
from core.scopes import Scope, scope_choices

# The scopes an analysis covers (no team: an analysis is of inventory), in the stored order.
ANALYSIS_SCOPES = scope_choices(Scope.POOL, Scope.CLUSTER, Scope.SITE, Scope.FLEET)
ANALYSIS_SCOPE_VALUES = tuple(value for value, _ in ANALYSIS_SCOPES)


class Analysis(DurableJob):
    scope = models.CharField(max_length=10, choices=ANALYSIS_SCOPES)
    object_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Id of the pool, cluster or site; empty for the fleet."
    )
    scope_label = models.CharField(max_length=250, blank=True)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    stale = models.BooleanField(
        default=False, help_text="The inventory changed after the last successful run."
    )
    stale_reason = models.CharField(
        max_length=300,
        blank=True,
        help_text="What changed since the last run, e.g. usage imported for a cluster.",
    )
    parts_total = models.PositiveIntegerField(default=0)
    parts_done = models.PositiveIntegerField(default=0)
    input_snapshot = models.JSONField(null=True, blank=True)
    results = models.JSONField(
        null=True, blank=True, help_text="The last successful result; a failed run keeps it."
    )
    succeeded_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "analyses"
        indexes = [models.Index(fields=["scope", "object_id"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope="fleet", object_id__isnull=True)
                | (~models.Q(scope="fleet") & models.Q(object_id__isnull=False)),
                name="analysis_object_id_matches_scope",
            ),
            models.CheckConstraint(
                condition=models.Q(period_end__gt=models.F("period_start")),
                name="analysis_period_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_scope_display()} {self.scope_label or self.object_id or ''}".strip()


class AnalysisPart(models.Model):
    """One cluster's share of a run; parts make the fan-out idempotent under redelivery."""

    analysis = models.ForeignKey(Analysis, on_delete=models.CASCADE, related_name="parts")
    run_id = models.UUIDField()
    cluster_id = models.PositiveBigIntegerField()
    pool_rows = models.JSONField()
    inputs = models.JSONField()
    finished_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["analysis", "run_id", "cluster_id"], name="analysis_part_once_per_run"
            )
        ]

    def __str__(self) -> str:
        return f"part of analysis {self.analysis_id} for cluster {self.cluster_id}"


class Plan(DurableJob):
    """A stored capacity plan: a training workload evaluated over many options by a worker.

    Same run discipline as Analysis: a task writes only while its `run_id` is current, and a
    failed run keeps the last successful `results` and records why in `error`.
    """

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="plans",
        help_text="Only the owner or an administrator may change, recompute or delete it.",
    )
    workload = models.JSONField(help_text="TrainingWorkload inputs: model_params, tokens, ...")
    options_spec = models.JSONField(
        help_text="Card models by catalog name or id, card counts or deadlines, sites by "
        "inventory id or explicit figures, existing pool ids."
    )
    overrides = models.JSONField(
        default=dict, blank=True, help_text="Factor and reliability overrides for every option."
    )
    levers = models.JSONField(
        default=list, blank=True, help_text="Improvement levers with one-off costs, for payback."
    )
    summary = models.JSONField(
        null=True, blank=True, help_text="Headline of the last result (kept small for lists)."
    )
    results = models.JSONField(
        null=True, blank=True, help_text="The last successful result; a failed run keeps it."
    )
    input_snapshot = models.JSONField(
        null=True, blank=True, help_text="The option rows (inventory figures) the result used."
    )
    cloned_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones"
    )
    stale = models.BooleanField(
        default=False,
        help_text="A site, cluster, pool, node group or card model the plan used changed "
        "after its last successful run began.",
    )
    inventory_changed_at = models.DateTimeField(
        null=True, blank=True, help_text="When an inventory edit last touched the plan's inputs."
    )
    inventory_refs = models.JSONField(
        default=dict,
        blank=True,
        help_text='Inventory ids the options use: {"site": [..], "cluster": [..], "pool": [..], '
        '"accelerator": [..]} (what an edit must touch to make the plan stale).',
    )
    succeeded_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [models.Index(fields=["owner", "status"])]

    def __str__(self) -> str:
        return self.name


class InferencePlan(models.Model):
    """A stored serving estimate (docs/inference.md): its inputs and the result they gave.

    The estimate takes milliseconds, so it is computed in the request that saves the plan, not
    by a worker; changed inputs or a recompute replace `results` at once.
    """

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="inference_plans",
        help_text="Only the owner or an administrator may change, recompute or delete it.",
    )
    inputs = models.JSONField(
        help_text="The inference estimate's input (POST /api/v1/estimates/inference/)."
    )
    results = models.JSONField(help_text="The estimate the inputs gave when last computed.")
    computed_at = models.DateTimeField()
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return self.name
