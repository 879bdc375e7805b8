"""A Kubernetes allocation source: one cluster's kube-state-metrics, read from Prometheus.

The row is the source's settings, its cursor and health, and its fetch as a durable job
(core.jobs): each fetch is a new run of the row. Node rules map node names or a node label's
value to node groups (so pools and card models); team rules map namespaces (or a pod label's
value) to teams. telemetry.models imports this module; it imports no telemetry model.
"""

from __future__ import annotations

import fnmatch
import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core.live_sources import LiveSource
from inventory.models import Cluster, NodeGroup
from telemetry.promql import validate_label_selector, validate_prometheus_url
from telemetry.secrets import LABEL as TELEMETRY_TOKEN_LABEL

# kube-state-metrics writes a Kubernetes label as label_<name with non-word characters as _>.
KSM_LABEL_PATTERN = r"^label_[a-zA-Z0-9_]{1,100}$"
# Shell wildcards over names Kubernetes allows (DNS labels, label values): nothing else.
GLOB_PATTERN = r"^[A-Za-z0-9_.*?\[\]!/-]{1,200}$"
TEAM_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.@ -]{0,99}$"

validate_ksm_label = RegexValidator(
    re.compile(KSM_LABEL_PATTERN),
    "A kube-state-metrics label name such as label_team (label_ + letters, digits, _).",
)
validate_team = RegexValidator(
    re.compile(TEAM_PATTERN), "Letters, digits, spaces and _ . @ - only, at most 100."
)


def validate_glob(value: str) -> None:
    """Shell wildcards (``gpu-a*``, ``team-[ab]*``) over Kubernetes names only."""
    if not re.match(GLOB_PATTERN, value):
        raise ValidationError(
            "A shell-wildcard pattern of letters, digits and . _ - / with * ? [ ] only."
        )
    if value.count("[") != value.count("]"):
        raise ValidationError("Unbalanced [ ] in the pattern.")


class NodeMatch(models.TextChoices):
    NAME = "name", "node name"
    LABEL = "label", "value of the source's node label"


class TeamMatch(models.TextChoices):
    NAMESPACE = "namespace", "namespace"
    LABEL = "label", "value of the source's pod team label"


class KubernetesSource(LiveSource):
    """Where one cluster's pod GPU requests are read, and how its fetches are going."""

    TOKEN_LABEL = TELEMETRY_TOKEN_LABEL  # the cluster's Prometheus token may be the same

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="kubernetes_source"
    )
    url = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_prometheus_url],
        help_text="Prometheus base URL; empty: the cluster's telemetry source's URL and token.",
    )
    label_selector = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_label_selector],
        help_text='Label matchers when one Prometheus serves several clusters: cluster="k1"',
    )
    node_label = models.CharField(
        max_length=110,
        blank=True,
        validators=[validate_ksm_label],
        help_text="kube_node_labels label that names a node's pool, e.g. label_nodepool.",
    )
    team_label = models.CharField(
        max_length=110,
        blank=True,
        validators=[validate_ksm_label],
        help_text="kube_pod_labels label that names a pod's team, e.g. label_team; "
        "empty: the namespace.",
    )
    default_team = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_team],
        help_text="Team of namespaces no rule maps; empty: the namespace (or label value).",
    )
    step_s = models.PositiveIntegerField(
        default=300,
        validators=[MinValueValidator(60), MaxValueValidator(3600)],
        help_text="Resolution: a pod counts for a step when Running at its end.",
    )
    scrape_interval_s = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(5), MaxValueValidator(600)],
        help_text="Prometheus scrape interval of kube-state-metrics, seconds.",
    )
    enabled = models.BooleanField(default=True, help_text="Fetched by the schedule.")
    overlap_s = models.PositiveIntegerField(
        default=3600,
        validators=[MaxValueValidator(7 * 86_400)],
        help_text="Each fetch re-reads from the UTC midnight before cursor − overlap.",
    )
    cursor = models.DateTimeField(
        null=True, blank=True, help_text="End of the last fetched step; empty: the last day."
    )
    records_written = models.PositiveIntegerField(default=0, editable=False)
    card_hours = models.FloatField(default=0.0, editable=False)
    mapped = models.JSONField(
        default=list, blank=True, editable=False,
        help_text="Card-hours of the last window per pool, team and card model.",
    )  # fmt: skip
    unmapped_nodes = models.JSONField(default=list, blank=True, editable=False)
    unmapped_namespaces = models.JSONField(default=list, blank=True, editable=False)

    class Meta:
        ordering = ["cluster"]
        indexes = [models.Index(fields=["enabled", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"Kubernetes of {self.cluster}"


class KubernetesNodeRule(models.Model):
    """Nodes whose name (or node-label value) matches ``pattern`` are in ``node_group``;
    tried in ``priority`` order (lowest first), the first match wins, at every step."""

    source = models.ForeignKey(
        KubernetesSource, on_delete=models.CASCADE, related_name="node_rules"
    )
    match = models.CharField(max_length=8, choices=NodeMatch.choices, default=NodeMatch.NAME)
    pattern = models.CharField(max_length=200, validators=[validate_glob])
    node_group = models.ForeignKey(NodeGroup, on_delete=models.CASCADE, related_name="+")
    priority = models.PositiveSmallIntegerField(default=100)

    class Meta:
        ordering = ["source", "priority", "pk"]

    def __str__(self) -> str:
        return f"{self.match} {self.pattern} → {self.node_group}"

    def matches(self, value: str) -> bool:
        return fnmatch.fnmatchcase(value, self.pattern)


class KubernetesTeamRule(models.Model):
    """Pods whose namespace (or team-label value) matches ``pattern`` belong to ``team``."""

    source = models.ForeignKey(
        KubernetesSource, on_delete=models.CASCADE, related_name="team_rules"
    )
    match = models.CharField(max_length=10, choices=TeamMatch.choices, default=TeamMatch.NAMESPACE)
    pattern = models.CharField(max_length=200, validators=[validate_glob])
    team = models.CharField(max_length=100, validators=[validate_team])
    priority = models.PositiveSmallIntegerField(default=100)

    class Meta:
        ordering = ["source", "priority", "pk"]

    def __str__(self) -> str:
        return f"{self.match} {self.pattern} → {self.team}"

    def matches(self, value: str) -> bool:
        return fnmatch.fnmatchcase(value, self.pattern)
