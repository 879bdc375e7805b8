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


def may_manage(actor: User | AnonymousUser, target: User) -> bool:
    """Whether ``actor`` may change ``target``'s account (roles, password, details): a superuser
    anyone; anyone else only accounts below their own role, never a superuser's."""
    if actor.is_superuser:
        return True
    if target.is_superuser:
        return False
    return role_rank(target) < role_rank(actor)


def grantable_roles(actor: User | AnonymousUser) -> tuple[str, ...]:
    """The roles ``actor`` may give: a superuser every role, anyone else those below their own."""
    if actor.is_superuser:
        return ROLES
    return tuple(role for role in ROLES if _RANK[role] < role_rank(actor))


def owner_or_admin(user: User | AnonymousUser, owner_id: int | None) -> bool:
    """Whether ``user`` owns the object (``owner_id``) or holds the admin role: who edits an
    object's recipients. An object without an owner is the administrators' alone."""
    owns = owner_id is not None and user.is_authenticated and owner_id == user.pk
    return owns or has_role(user, ADMIN)
