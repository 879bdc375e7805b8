"""The levels a figure is taken at: fleet, site, cluster, pool, team. One enum for every app.

A model stores only the levels it knows, as its own choices (`scope_choices`): an analysis has
no team scope, a report no pool scope. Values and labels are the ones stored all along.
"""

from __future__ import annotations

from django.db import models


class Scope(models.TextChoices):
    FLEET = "fleet", "Fleet"
    SITE = "site", "Site"
    CLUSTER = "cluster", "Cluster"
    POOL = "pool", "Pool"
    TEAM = "team", "Team"


def scope_choices(*scopes: Scope) -> list[tuple[str, str]]:
    """Choices of a field that takes some of the scopes, in the order given."""
    return [(scope.value, scope.label) for scope in scopes]
