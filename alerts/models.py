"""Alert rules (a threshold on a figure of a scope) and the events they raise.

A rule is *ok*, *firing* or *no data*. It fires once when its figure crosses the threshold
(one event, one e-mail) and fires again only after the figure has cleared and crossed anew.
A figure without data never counts as crossing (or clearing): the rule says "no data".
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, validate_email
from django.db import models

from core.scopes import Scope
from engine.limits import LIMITS
from inventory.currency import validate_currency


class Metric(models.TextChoices):
    UTILIZATION = "utilization", "Utilization (measured from usage records)"
    IDLE_COST = "idle_cost", "Idle cost (money of unallocated card-hours)"
    CHARGEBACK = "chargeback", "Chargeback of a team"
    EFFECTIVE_UTILIZATION = "effective_utilization", "Effective utilization (latest analysis)"
    ENERGY = "energy", "Energy factor 1/PUE (latest analysis)"
    MFU = "mfu", "MFU (latest analysis)"
    SCALING = "scaling", "Scaling (latest analysis)"
    EFFECTIVE_TIME = "effective_time", "Effective training time (latest analysis)"


# Figures in money: their threshold carries a currency and is compared in that currency only.
MONEY_METRICS = frozenset({Metric.IDLE_COST, Metric.CHARGEBACK})
ANALYSIS_METRICS = frozenset(
    {
        Metric.EFFECTIVE_UTILIZATION,
        Metric.ENERGY,
        Metric.MFU,
        Metric.SCALING,
        Metric.EFFECTIVE_TIME,
    }
)


class Direction(models.TextChoices):
    BELOW = "below", "falls below"
    ABOVE = "above", "rises above"


class RuleState(models.TextChoices):
    OK = "ok", "OK"
    FIRING = "firing", "Firing"
    NO_DATA = "no_data", "No data"


def _window_validators() -> list:
    limit = LIMITS["alert_window_days"]
    return [MinValueValidator(int(limit.low)), MaxValueValidator(int(limit.high))]


class AlertRule(models.Model):
    name = models.CharField(max_length=200)
    metric = models.CharField(max_length=32, choices=Metric.choices)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.FLEET)
    object_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Id of the site, cluster or pool; empty otherwise."
    )
    team = models.CharField(max_length=200, blank=True, help_text="The team (scope team).")
    direction = models.CharField(max_length=5, choices=Direction.choices)
    threshold = models.FloatField(help_text="A share 0–1, or money in the rule's currency.")
    currency = models.CharField(max_length=3, blank=True, help_text="ISO 4217, money only.")
    window_days = models.PositiveIntegerField(default=7, validators=_window_validators())
    recipients = models.JSONField(default=list, blank=True, help_text="E-mail addresses.")
    enabled = models.BooleanField(default=True)
    state = models.CharField(max_length=8, choices=RuleState.choices, default=RuleState.NO_DATA)
    last_value = models.FloatField(null=True, blank=True)
    last_reason = models.CharField(max_length=300, blank=True)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {**self._scope_errors(), **self._threshold_errors()}
        for address in self.recipients or []:
            try:
                validate_email(address)
            except ValidationError:
                errors["recipients"] = f"Not an e-mail address: {address!r}."
        if errors:
            raise ValidationError(errors)

    def _scope_errors(self) -> dict[str, str]:
        errors = {}
        needs_object = self.scope in (Scope.SITE, Scope.CLUSTER, Scope.POOL)
        if needs_object and not self.object_id:
            errors["object_id"] = f"A {self.scope} rule names its {self.scope}."
        if not needs_object and self.object_id:
            errors["object_id"] = f"A {self.scope} rule names no object."
        if (self.scope == Scope.TEAM) != bool(self.team):
            errors["team"] = "A team rule names its team; other rules name none."
        if self.metric == Metric.CHARGEBACK and self.scope != Scope.TEAM:
            errors["scope"] = "Chargeback is watched per team: choose the scope team."
        return errors

    def _threshold_errors(self) -> dict[str, str]:
        errors = {}
        if self.metric in MONEY_METRICS:
            limit = LIMITS["money"]
            try:
                validate_currency(self.currency)
            except ValidationError as exc:
                errors["currency"] = " ".join(exc.messages)
        else:
            limit = LIMITS["share_or_zero"]
            if self.currency:
                errors["currency"] = "Only money thresholds carry a currency."
        if self.threshold is None or not limit.contains(float(self.threshold)):
            errors["threshold"] = limit.message
        return errors


class AlertEvent(models.Model):
    """One crossing: fired (with the value that crossed), later cleared and/or acknowledged."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="events")
    value = models.FloatField()
    message = models.CharField(max_length=500)
    fired_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    notified_at = models.DateTimeField(null=True, blank=True)
    notify_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-fired_at"]

    def __str__(self) -> str:
        return self.message

    @property
    def active(self) -> bool:
        return self.cleared_at is None
