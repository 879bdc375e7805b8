"""Optional team scoping: a user tied to teams sees only those teams' usage and chargeback.

A team is the usage ``account`` string (``accounting.UsageRecord.account``, the chargeback
``team``). A user with no membership is not scoped; see :mod:`access.scoping`.
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
