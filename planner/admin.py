"""Admin views of stored analyses and plans: browse and delete; workers write the results."""

from django.contrib import admin

from core.text import SafeNamesAdminMixin
from planner.models import Analysis, Plan


@admin.register(Analysis)
class AnalysisAdmin(admin.ModelAdmin):
    list_display = ["id", "__str__", "status", "progress", "stale", "created_by", "created"]
    list_filter = ["scope", "status", "stale"]
    list_select_related = ["created_by"]
    search_fields = ["scope_label"]
    date_hierarchy = "created"

    def get_readonly_fields(self, request, obj=None):
        # Analyses are started through the API so a worker run backs every row.
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Plan)
class PlanAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    list_display = ["id", "name", "owner", "status", "progress", "created", "updated"]
    list_filter = ["status"]
    list_select_related = ["owner"]
    search_fields = ["name", "owner__username"]
    date_hierarchy = "created"
    raw_id_fields = ["owner", "cloned_from"]
    # Inputs change through the API (which validates them and queues a run); here only the
    # name and owner may be corrected.
    readonly_fields = [
        "workload",
        "options_spec",
        "overrides",
        "levers",
        "status",
        "progress",
        "run_id",
        "error",
        "summary",
        "results",
        "input_snapshot",
        "cloned_from",
        "queued_at",
        "started_at",
        "finished_at",
        "succeeded_at",
        "duration_s",
        "created",
        "updated",
    ]

    def has_add_permission(self, request) -> bool:
        return False
