"""Viewers tied to team-a or team-b. The team usage they are scoped to (the 16-card "alpha"
cluster with usage of team-a, team-b and team-c on 2024-03-01, rolled up) is the shared
`team_usage` fixture (tests/support/fixtures/fleet.py)."""

from __future__ import annotations

import pytest

from tests.support.alpha_usage import TEAM
from tests.support.builders import team_viewer


@pytest.fixture
def team_a_viewer(db):
    return team_viewer("viewer-a", TEAM)


@pytest.fixture
def team_b_viewer(db):
    return team_viewer("viewer-b", "team-b")
