"""Admin pages for API tokens: create one (its key is shown once), list, revoke by deleting."""

from __future__ import annotations

import rest_framework.authtoken.admin  # noqa: F401  (registers TokenProxy, unregistered below)
from django.contrib import admin, messages
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

    def save_model(self, request, obj, form, change):
        key = None if change else obj.set_new_key()
        super().save_model(request, obj, form, change)
        if key:
            messages.warning(
                request,
                f"The key of token {obj.key_prefix}… for {obj.user} is {key} — copy it now: "
                "it is not stored and cannot be shown again.",
            )
