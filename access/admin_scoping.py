"""Team scoping in ``/admin/``: a team-scoped staff user sees only their teams' rows.

Mixed into the ModelAdmins of team data (usage records, report schedules and reports; import
jobs: `accounting.scoping`) ahead of ``admin.ModelAdmin``; the same rules as the API
(:mod:`access.scoping`).
"""

from __future__ import annotations

from access.scoping import scope_records, team_reports_filter, visible_teams


class TeamRowsAdminMixin:
    """Rows with a team column (``team_field``, the usage ``account`` by default)."""

    team_field = "account"

    def get_queryset(self, request):
        return scope_records(super().get_queryset(request), request.user, self.team_field)


class TeamReportsAdminMixin:
    """Team-scope report schedules (``prefix=""``) or reports (``"schedule__"``) of the
    user's teams; fleet, site and cluster reports list every team, so scoped users see none."""

    team_reports_prefix = ""

    def get_queryset(self, request):
        teams = visible_teams(request.user)
        queryset = super().get_queryset(request)
        return queryset.filter(team_reports_filter(teams, self.team_reports_prefix))
