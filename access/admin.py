from django.contrib import admin

from access.admin_names import NameCheckedAdminMixin
from access.models import FleetWideAccess, TeamMembership


@admin.register(TeamMembership)
class TeamMembershipAdmin(NameCheckedAdminMixin, admin.ModelAdmin):
    name_fields = ("team",)
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
# Accounts and role groups without privilege escalation: access/admin_users.py.
from access import admin_tokens, admin_users  # noqa: E402, F401
