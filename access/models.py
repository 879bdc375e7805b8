"""Team scoping: a user tied to teams sees only those teams' usage and chargeback.

A team is the usage ``account`` string (``accounting.UsageRecord.account``, the chargeback
``team``). Scoping fails closed: a user sees every team only with a :class:`FleetWideAccess`
grant (or as an administrator); a user with neither sees no team. See :mod:`access.scoping`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TeamMembership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    team = models.CharField(
        max_length=100,
        help_text="The usage account / chargeback team name, exactly as in the usage records.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user__username", "team"]
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="team_membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        # Tying a user to a team scopes them: a fleet-wide grant would silently outrank it.
        FleetWideAccess.objects.filter(user_id=self.user_id).delete()


class FleetWideAccess(models.Model):
    """The explicit grant to see every team's usage, chargeback and reports."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="fleet_wide_access"
    )
    note = models.CharField(max_length=200, blank=True, help_text="Why this user sees every team.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user__username"]
        verbose_name = "fleet-wide access"
        verbose_name_plural = "fleet-wide access"

    def __str__(self) -> str:
        return f"{self.user} sees every team"


# The API token model lives beside the code that uses it; imported here so Django registers it.
from access.tokens import ApiToken  # noqa: E402, F401
