"""Team scoping, in one place: which teams' usage and chargeback rows a user may see.

``visible_teams(user)`` is None for "every team" (an explicit `access.FleetWideAccess` grant,
or an administrator, who manages the memberships anyway) and otherwise the set of the user's
teams: empty, so nothing, for a user with neither (scoping fails closed). Every read of
usage records, team utilization, chargeback rows and team reports goes through the helpers
below, so API lists, exports (tokens and jobs run as their owner), pages and chart downloads
agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet

from access.models import FleetWideAccess
from access.roles import ADMIN, VIEWER, has_role

# How the accounting reports label records without an account (accounting.selectors).
NO_ACCOUNT = "(no account)"


def visible_teams(user) -> frozenset[str] | None:
    """None: every team. Else the teams the user may see (empty for an anonymous user)."""
    if user is None or not user.is_authenticated:
        return frozenset()
    if has_role(user, ADMIN):
        return None
    cached = getattr(user, "_fleetwise_teams", False)
    if cached is False:
        if FleetWideAccess.objects.filter(user_id=user.pk).exists():
            cached = None
        else:
            cached = frozenset(user.team_memberships.values_list("team", flat=True))
        user._fleetwise_teams = cached
    return cached


def request_teams(request) -> frozenset[str] | None:
    """The teams of a request's user; None for an internal request without a user (the
    worker precomputing the dashboards' shared defaults, which are filtered when read)."""
    user = getattr(request, "user", None)
    return None if user is None else visible_teams(user)


def scope_records(queryset: QuerySet, user, field: str = "account") -> QuerySet:
    """Usage-like rows of the user's teams only (records without an account: "(no account)")."""
    teams = visible_teams(user)
    if teams is None:
        return queryset
    return queryset.filter(**{f"{field}__in": allowed_accounts(teams)})


def team_allowed(team: str | None, teams: frozenset[str] | None) -> bool:
    if teams is None:
        return True
    return (team or NO_ACCOUNT) in teams


def scope_rows(
    rows: Iterable[dict[str, Any]], teams: frozenset[str] | None, column: str = "team"
) -> list[dict[str, Any]]:
    """Report rows (dicts) of the given teams; rows without the column are not team rows."""
    rows = list(rows)
    if teams is None:
        return rows
    return [row for row in rows if column not in row or team_allowed(row[column], teams)]


def scope_frame(frame, teams: frozenset[str] | None, column: str = "team"):
    """A pandas frame's rows of the given teams (unchanged when it has no such column)."""
    if teams is None or frame is None or frame.empty or column not in frame.columns:
        return frame
    kept = frame[frame[column].fillna(NO_ACCOUNT).isin(teams)]
    kept = kept.reset_index(drop=True)
    kept.attrs = dict(frame.attrs)
    return kept


def team_reports_filter(teams: frozenset[str] | None, prefix: str = "") -> Q:
    """Reports and schedules a scoped user may read: team-scope ones of their teams (fleet,
    site and cluster reports list every team's chargeback)."""
    if teams is None:
        return Q()
    return Q(**{f"{prefix}scope": "team", f"{prefix}team__in": sorted(teams)})


def scope_visible(teams: frozenset[str] | None, scope: str, team: str | None = "") -> bool:
    """Whether these teams cover an object of ``scope``: a team object needs its team; a fleet,
    site, cluster or pool object holds every team's figures, so it needs every team."""
    if teams is None:
        return True
    return scope == "team" and bool(team) and team in teams


def may_see_scope(user, scope: str, team: str | None = "") -> bool:
    """The one rule for an object of a scope (alert rule, report schedule, report): the viewer
    role, and teams that cover it (:func:`scope_visible`); the twin of team_reports_filter."""
    return has_role(user, VIEWER) and scope_visible(visible_teams(user), scope, team)


def scope_refusal(user, scope: str, team: str | None = "") -> str:
    """Why ``user`` may not see objects of this scope, naming the team; "" when they may."""
    if may_see_scope(user, scope, team):
        return ""
    if not has_role(user, VIEWER):
        return f"{user} holds no role that reads figures."
    return f"{user} may not see {scope_label(scope, team)}."


def scope_label(scope: str, team: str | None = "") -> str:
    if scope == "team":
        return f"team {team}'s figures"
    return f"every team's figures (a {scope} scope holds every team's)"


def allowed_accounts(teams: frozenset[str]) -> list[str]:
    """The usage ``account`` values of these teams ("(no account)" is the empty account)."""
    return sorted(set(teams) | ({""} if NO_ACCOUNT in teams else set()))
