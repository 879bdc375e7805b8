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


@pytest.fixture(scope="module")
def authz_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The authorization matrix's world (`tests.support.authz_world`), built once per module
    (once per pytest-xdist worker that runs any of its tests) in an outer transaction: each
    test runs in a savepoint inside it (pytest-django's ``db``), rolled back after the test,
    and the world itself is rolled back after the module's last test."""
    from django.db import transaction
    from django.test import override_settings

    from tests.support.authz_world import build_world

    media = override_settings(MEDIA_ROOT=str(tmp_path_factory.mktemp("authz-media")))
    media.enable()
    outer = transaction.atomic()
    outer._from_testcase = True  # as TestCase's class-level block: tests nest inside it
    with django_db_blocker.unblock():
        outer.__enter__()
        try:
            world = build_world()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            media.disable()
            raise
    yield world
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        outer.__exit__(None, None, None)
    media.disable()
