"""DRF permissions built on the roles: reads need viewer, writes need planner."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from access.roles import PLANNER, VIEWER, has_role


class RolePermission(BasePermission):
    """Default for every endpoint: read with viewer, change with planner.

    A view may set `write_role = ADMIN` (or `read_role`) to demand more.
    """

    message = "Your role does not allow this action."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if request.method in SAFE_METHODS:
            return has_role(request.user, getattr(view, "read_role", VIEWER))
        return has_role(request.user, getattr(view, "write_role", PLANNER))
