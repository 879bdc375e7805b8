"""The rules and events a user may see: a team-scoped user only its teams' team rules."""

from __future__ import annotations

from django.db.models import QuerySet

from access.scoping import team_reports_filter, visible_teams
from alerts.models import AlertEvent, AlertRule
from core.scopes import Scope
from inventory.models import Cluster, Pool, Site

# Scopes whose rule watches one inventory object (its id in AlertRule.object_id).
OBJECT_SCOPES = (Scope.SITE, Scope.CLUSTER, Scope.POOL)


def rules_for(user) -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(team_reports_filter(visible_teams(user))).select_related(
        "created_by"
    )


def events_for(user) -> QuerySet[AlertEvent]:
    scope = team_reports_filter(visible_teams(user), prefix="rule__")
    return AlertEvent.objects.filter(scope).select_related("rule", "acknowledged_by")


def _object_names() -> dict[str, dict[int, str]]:
    """Live sites, clusters and pools by id, each named by its path ("site / cluster / pool")."""
    clusters = Cluster.objects.select_related("site").order_by("site__name", "name")
    pools = Pool.objects.select_related("cluster__site")
    return {
        Scope.SITE: {site.pk: site.name for site in Site.objects.order_by("name")},
        Scope.CLUSTER: {c.pk: f"{c.site.name} / {c.name}" for c in clusters},
        Scope.POOL: {
            p.pk: f"{p.cluster.site.name} / {p.cluster.name} / {p.name}"
            for p in pools.order_by("cluster__site__name", "cluster__name", "name")
        },
    }


def object_choices() -> list[tuple[str, list[tuple[str, str]]]]:
    """The alert form's grouped choices: ("Sites", [("site:3", "Frankfurt DC1"), …]), …"""
    names = _object_names()
    groups = ((Scope.SITE, "Sites"), (Scope.CLUSTER, "Clusters"), (Scope.POOL, "Pools"))
    return [
        (label, [(f"{scope}:{pk}", name) for pk, name in names[scope].items()])
        for scope, label in groups
        if names[scope]
    ]


def name_watched_objects(rules: list[AlertRule]) -> list[AlertRule]:
    """Set ``watched`` on each rule: its object's name, or why there is none to show."""
    names = _object_names() if any(r.scope in OBJECT_SCOPES for r in rules) else {}
    for rule in rules:
        rule.watched = rule.team
        if rule.scope in OBJECT_SCOPES:
            found = names[rule.scope].get(rule.object_id or 0)
            rule.watched = found or f"(a deleted {rule.scope}, id {rule.object_id})"
    return rules
