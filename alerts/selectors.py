"""The rules and events a user may see: a team-scoped user only its teams' team rules."""

from __future__ import annotations

from django.db.models import QuerySet

from access.scoping import team_reports_filter, visible_teams
from alerts.models import AlertEvent, AlertRule


def rules_for(user) -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(team_reports_filter(visible_teams(user))).select_related(
        "created_by"
    )


def events_for(user) -> QuerySet[AlertEvent]:
    scope = team_reports_filter(visible_teams(user), prefix="rule__")
    return AlertEvent.objects.filter(scope).select_related("rule", "acknowledged_by")
