"""Admin pages for API tokens: create one (its key is shown once), list, revoke by deleting.

A token acts as its user, so minting one for someone else is acting as them: only superusers
do that. Anyone else with the admin page's add permission mints tokens for themselves only.
"""

from __future__ import annotations

import rest_framework.authtoken.admin  # noqa: F401  (registers TokenProxy, unregistered below)
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from rest_framework.authtoken.models import TokenProxy

from access.tokens import ApiToken

# DRF's own tokens are stored in plaintext and no longer authenticate: hide their admin.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "user", "name", "created", "last_used_at"]
    search_fields = ["user__username", "name", "key_prefix"]
    autocomplete_fields = ["user"]
    fields = ["user", "name", "key_prefix", "created", "last_used_at"]
    readonly_fields = ["key_prefix", "created", "last_used_at"]

    def get_readonly_fields(self, request, obj=None):
        # A token's owner is fixed: give someone else a token of their own.
        return [*self.readonly_fields, "user"] if obj else self.readonly_fields

    def get_autocomplete_fields(self, request):
        # Others pick from one account, their own: a plain menu, not a search of every user.
        return self.autocomplete_fields if request.user.is_superuser else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if not change and obj.user_id != request.user.pk and not request.user.is_superuser:
            raise PermissionDenied("Only a superuser creates a token for another account.")
        key = None if change else obj.set_new_key()
        super().save_model(request, obj, form, change)
        if key:
            messages.warning(
                request,
                f"The key of token {obj.key_prefix}… for {obj.user} is {key} — copy it now: "
                "it is not stored and cannot be shown again.",
            )
