"""Accounts and role groups in ``/admin/``, without privilege escalation.

The admin role may manage accounts, but only below its own role: an admin-role user who is
not a superuser changes (or deletes, or sets the password of) viewers, planners and accounts
without a role, and themselves, never another admin or a superuser; gives only the roles
below its own; and never sets ``is_superuser``, ``is_staff`` or single permissions, on any
account, their own included. Role groups' permissions are kept by
``access.services.grant_role_permissions``: only superusers change groups.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User

from access.admin_names import NameCheckedAdminMixin
from access.roles import ROLES, grantable_roles, may_manage

# Fields that grant rights beyond a role: a superuser's to set.
PRIVILEGE_FIELDS = ("is_superuser", "is_staff", "user_permissions")


class FleetwiseUserAdmin(NameCheckedAdminMixin, UserAdmin):
    name_fields = ("first_name", "last_name")  # display names: one line of visible text

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        fields += PRIVILEGE_FIELDS
        if obj is not None and obj.pk == request.user.pk:
            fields.append("groups")  # nobody changes their own role
        return fields

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "groups" and not request.user.is_superuser:
            # Only the roles below the actor's own; other groups are a superuser's to give.
            kwargs["queryset"] = Group.objects.filter(name__in=grantable_roles(request.user))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def has_change_permission(self, request, obj=None):
        allowed = super().has_change_permission(request, obj)
        if obj is None or not allowed:
            return allowed
        return obj.pk == request.user.pk or may_manage(request.user, obj)

    def has_delete_permission(self, request, obj=None):
        allowed = super().has_delete_permission(request, obj)
        if obj is None or not allowed:
            return allowed
        return obj.pk != request.user.pk and may_manage(request.user, obj)


class FleetwiseGroupAdmin(GroupAdmin):
    """The role groups (viewer, planner, admin) and any other group: superusers change them."""

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and (obj is None or obj.name not in ROLES)


for model, model_admin in ((User, FleetwiseUserAdmin), (Group, FleetwiseGroupAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, model_admin)
