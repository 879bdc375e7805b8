from django.contrib import admin

from access.models import FleetWideAccess, TeamMembership


@admin.register(TeamMembership)
class TeamMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "created"]
    list_filter = ["team"]
    search_fields = ["user__username", "team"]
    autocomplete_fields = ["user"]


@admin.register(FleetWideAccess)
class FleetWideAccessAdmin(admin.ModelAdmin):
    """Who sees every team; everyone else sees their memberships' teams, or none."""

    list_display = ["user", "note", "created"]
    search_fields = ["user__username", "note"]
    autocomplete_fields = ["user"]


# API tokens (hashed): access/admin_tokens.py registers them.
from access import admin_tokens  # noqa: E402, F401
