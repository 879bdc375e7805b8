"""The three roles, kept as Django groups: viewer < planner < admin.

A superuser counts as admin. A user in no role group can log in but reads nothing.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

VIEWER = "viewer"
PLANNER = "planner"
ADMIN = "admin"
ROLES = (VIEWER, PLANNER, ADMIN)

# Each role includes the ones before it.
_RANK = {VIEWER: 1, PLANNER: 2, ADMIN: 3}


def role_rank(user: User | AnonymousUser) -> int:
    """The highest role the user holds as a number (0 = none)."""
    if not user.is_authenticated or not user.is_active:
        return 0
    if user.is_superuser:
        return _RANK[ADMIN]
    cached = getattr(user, "_fleetwise_role_rank", None)
    if cached is None:
        names = user.groups.filter(name__in=ROLES).values_list("name", flat=True)
        cached = max((_RANK[name] for name in names), default=0)
        user._fleetwise_role_rank = cached
    return cached


def has_role(user: User | AnonymousUser, role: str) -> bool:
    """True when the user holds `role` or a higher one."""
    return role_rank(user) >= _RANK[role]
