from django.contrib import admin

from alerts.models import AlertEvent, AlertRule
from core.text import SafeNamesAdminMixin


@admin.register(AlertRule)
class AlertRuleAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    name_fields = ("name", "team")
    list_display = ["name", "metric", "scope", "team", "direction", "threshold", "state"]
    list_filter = ["metric", "scope", "state", "enabled"]
    readonly_fields = ["state", "last_value", "last_reason", "last_evaluated_at"]


@admin.register(AlertEvent)
class AlertEventAdmin(admin.ModelAdmin):
    list_display = ["rule", "message", "fired_at", "cleared_at", "acknowledged_at"]
    readonly_fields = [f.name for f in AlertEvent._meta.fields]
