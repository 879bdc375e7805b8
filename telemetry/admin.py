from django.contrib import admin

from core.outbound import without_credentials
from telemetry.models import GpuDay, HostPattern, JobDay, PrometheusSource, TelemetryFetch


@admin.register(PrometheusSource)
class PrometheusSourceAdmin(admin.ModelAdmin):
    list_display = ["cluster", "shown_url", "enabled", "has_token", "scrape_interval_s", "step_s"]
    exclude = ["token_encrypted"]  # set through the API; never shown

    @admin.display(description="URL")
    def shown_url(self, source: PrometheusSource) -> str:
        return without_credentials(source.url)


@admin.register(HostPattern)
class HostPatternAdmin(admin.ModelAdmin):
    list_display = ["cluster", "pattern", "node_group", "priority"]
    list_filter = ["cluster"]


@admin.register(TelemetryFetch)
class TelemetryFetchAdmin(admin.ModelAdmin):
    list_display = ["pk", "cluster", "kind", "period_start", "period_end", "status", "progress"]
    list_filter = ["status", "kind"]
    readonly_fields = [f.name for f in TelemetryFetch._meta.fields]


@admin.register(GpuDay)
class GpuDayAdmin(admin.ModelAdmin):
    list_display = ["day", "hostname", "gpu", "pool", "tensor_active", "energy_kwh", "idle_h"]
    list_filter = ["cluster", "day"]


@admin.register(JobDay)
class JobDayAdmin(admin.ModelAdmin):
    list_display = [
        "day",
        "job_id",
        "account",
        "allocated_card_hours",
        "active_card_hours",
        "idle_card_hours",
    ]
    list_filter = ["cluster", "day"]
