from django.contrib import admin

from access.admin_scoping import TeamRowsAdminMixin
from accounting.models import (
    GresAlias,
    ImportJob,
    PartitionMapping,
    ServingLoad,
    SreportUtilization,
    UsageRecord,
)
from accounting.scoping import ImportJobsAdminMixin


@admin.register(GresAlias)
class GresAliasAdmin(admin.ModelAdmin):
    list_display = ["gres_type", "accelerator", "notes", "updated"]
    list_select_related = ["accelerator"]
    search_fields = ["gres_type", "accelerator__name"]
    autocomplete_fields = ["accelerator"]


@admin.register(PartitionMapping)
class PartitionMappingAdmin(admin.ModelAdmin):
    list_display = ["cluster", "partition", "pool", "accelerator"]
    list_filter = ["cluster"]
    list_select_related = ["cluster", "pool", "accelerator"]
    search_fields = ["partition", "cluster__name"]


@admin.register(ImportJob)
class ImportJobAdmin(ImportJobsAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "cluster",
        "source_name",
        "status",
        "progress",
        "records_read",
        "records_created",
        "records_updated",
        "created",
    ]
    list_filter = ["kind", "status", "cluster"]
    list_select_related = ["cluster"]
    readonly_fields = [field.name for field in ImportJob._meta.fields]


@admin.register(UsageRecord)
class UsageRecordAdmin(TeamRowsAdminMixin, admin.ModelAdmin):
    list_display = [
        "job_label",
        "cluster",
        "pool",
        "account",
        "user",
        "accelerator",
        "cards",
        "start",
        "end",
        "card_hours",
        "state",
    ]
    list_filter = ["state", "cluster"]
    list_select_related = ["cluster", "pool", "accelerator"]
    search_fields = ["job_id", "job_label", "account", "user"]
    date_hierarchy = "start"
    show_full_result_count = False
    raw_id_fields = ["cluster", "pool", "accelerator", "import_job"]


@admin.register(SreportUtilization)
class SreportUtilizationAdmin(admin.ModelAdmin):
    list_display = [
        "cluster",
        "tres_name",
        "period_start",
        "period_end",
        "allocated_card_hours",
        "down_card_hours",
        "planned_down_card_hours",
        "reported_card_hours",
    ]
    list_filter = ["cluster"]
    list_select_related = ["cluster"]


@admin.register(ServingLoad)
class ServingLoadAdmin(admin.ModelAdmin):
    list_display = ["pool", "period_start", "period_end", "served_tokens_per_s", "model_params"]
    list_filter = ["pool__cluster"]
    list_select_related = ["pool"]
    search_fields = ["pool__name", "notes"]
