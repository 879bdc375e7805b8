from django.contrib import admin

from access.models import TeamMembership


@admin.register(TeamMembership)
class TeamMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "created"]
    list_filter = ["team"]
    search_fields = ["user__username", "team"]
    autocomplete_fields = ["user"]
