"""Page access (Django views): every page needs login; reading needs the viewer role, writing
the planner role. The DRF twin is access.permissions."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied

from access.roles import PLANNER, VIEWER, has_role

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def required_role(method: str, read_role: str, write_role: str) -> str:
    return read_role if method in READ_METHODS else write_role


def check_role(user, role: str) -> None:
    if not has_role(user, role):
        raise PermissionDenied(f"this needs the {role} role")


class RoleRequiredMixin(LoginRequiredMixin):
    """Anonymous users go to the login page; a missing role is a 403 (before any handler runs)."""

    read_role = VIEWER
    write_role = PLANNER

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        check_role(request.user, required_role(request.method, self.read_role, self.write_role))
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["can_edit"] = has_role(self.request.user, PLANNER)
        return context


class PlannerRequiredMixin(RoleRequiredMixin):
    """Pages that exist only to change data (forms, delete, import): planner even to look."""

    read_role = PLANNER


def role_required(read_role: str = VIEWER, write_role: str = PLANNER):
    """The function-view twin of RoleRequiredMixin."""

    def decorate(view):
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            check_role(request.user, required_role(request.method, read_role, write_role))
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
