from django.contrib import admin

from access.admin_scoping import TeamReportsAdminMixin
from core.text import SafeNamesAdminMixin
from reports.models import Report, ReportSchedule


@admin.register(ReportSchedule)
class ReportScheduleAdmin(SafeNamesAdminMixin, TeamReportsAdminMixin, admin.ModelAdmin):
    name_fields = ("name", "team")
    list_display = ["name", "template", "scope", "frequency", "timezone", "enabled", "next_run_at"]
    list_filter = ["template", "scope", "frequency", "enabled"]
    search_fields = ["name", "team"]
    readonly_fields = ["next_run_at", "last_run_at", "created", "updated"]
    filter_horizontal = ["recipient_users"]


@admin.register(Report)
class ReportAdmin(TeamReportsAdminMixin, admin.ModelAdmin):
    team_reports_prefix = "schedule__"
    list_display = ["schedule", "period_start", "period_end", "status", "delivery_attempts"]
    list_filter = ["status", "trigger"]
    list_select_related = ["schedule"]
    readonly_fields = [field.name for field in Report._meta.fields]
