from django.contrib import admin

from access.admin_scoping import TeamRowsAdminMixin
from accounting.models import (
    GresAlias,
    ImportJob,
    PartitionMapping,
    ServingLoad,
    SlurmrestdSource,
    SreportUtilization,
    UsageRecord,
)
from accounting.scoping import ImportJobsAdminMixin
from core.outbound import without_credentials


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


@admin.register(SlurmrestdSource)
class SlurmrestdSourceAdmin(admin.ModelAdmin):
    list_display = [
        "cluster", "shown_url", "enabled", "has_token", "status", "last_success_at",
        "consecutive_failures", "next_attempt_at",
    ]  # fmt: skip
    exclude = ["token_encrypted"]  # set through the API; never shown
    # The pull's own fields: written by its runs, never by a form (a save would undo a run).
    readonly_fields = [
        "status", "progress", "error", "queued_at", "started_at", "finished_at", "duration_s",
        "heartbeat_at", "window_start", "window_end", "last_success_at", "last_failure_at",
        "last_error", "consecutive_failures", "next_attempt_at", "records_read",
        "records_created", "records_updated", "records_unchanged", "warnings",
    ]  # fmt: skip

    @admin.display(description="URL")
    def shown_url(self, source: SlurmrestdSource) -> str:
        return without_credentials(source.url)

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            super().save_model(request, obj, form, change)
        elif form.changed_data:  # only what was edited: a pull may be writing its own fields
            obj.save(update_fields=[*form.changed_data, "updated"])
