from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from alerts.authorization import check_rule
from alerts.models import AlertEvent, AlertRule
from core.bounds import bounded_int
from core.text import SafeNamesSerializerMixin


class AlertRuleSerializer(SafeNamesSerializerMixin, serializers.ModelSerializer):
    name_fields = ("name", "team")
    window_days = bounded_int("alert_window_days", required=False)
    recipients = serializers.ListField(
        child=serializers.EmailField(), required=False, max_length=50
    )

    class Meta:
        model = AlertRule
        fields = [
            "id",
            "url",
            "name",
            "metric",
            "scope",
            "object_id",
            "team",
            "direction",
            "threshold",
            "currency",
            "window_days",
            "recipients",
            "enabled",
            "state",
            "last_value",
            "last_reason",
            "last_evaluated_at",
            "created",
        ]
        read_only_fields = ["state", "last_value", "last_reason", "last_evaluated_at", "created"]
        extra_kwargs = {"url": {"view_name": "alert-rule-detail"}}

    def validate(self, attrs: dict) -> dict:
        rule = AlertRule(**{**self._current(), **attrs})
        rule.currency = (rule.currency or "").upper()
        try:
            rule.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        self._authorize(rule)
        return {**attrs, "currency": rule.currency}

    def _authorize(self, rule: AlertRule) -> None:
        """The acting user may see the rule's scope, and its recipients may too (403, 400)."""
        check = check_rule(
            self.context["request"].user,
            scope=rule.scope,
            team=rule.team,
            recipients=list(rule.recipients or []),
            before=self.instance,
        )
        if check.forbidden:
            raise PermissionDenied(check.forbidden)
        if check.errors:
            raise serializers.ValidationError(check.errors)

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        names = [f for f in self.Meta.fields if f not in ("id", "url", *self.Meta.read_only_fields)]
        return {name: getattr(self.instance, name) for name in names}


class AlertEventSerializer(serializers.ModelSerializer):
    rule_name = serializers.CharField(source="rule.name", read_only=True)
    active = serializers.BooleanField(read_only=True)
    acknowledged_by = serializers.CharField(
        source="acknowledged_by.username", read_only=True, default=None
    )

    class Meta:
        model = AlertEvent
        fields = [
            "id",
            "rule",
            "rule_name",
            "value",
            "message",
            "fired_at",
            "cleared_at",
            "active",
            "acknowledged_at",
            "acknowledged_by",
            "notified_at",
            "notify_error",
        ]
        read_only_fields = fields
