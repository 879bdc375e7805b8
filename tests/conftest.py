"""Shared fixtures: users for each role, API clients, the demo fleet and a real Celery worker.

Django is imported inside fixtures so the pure-core suites also run with `-p no:django`.
"""

from __future__ import annotations

import pytest


def make_user(username: str, role: str | None = None, *, all_teams: bool = True, **extra):
    """A user of the role; ``all_teams``: the explicit grant to see every team (a team
    membership added later replaces it, as in the admin)."""
    from django.contrib.auth.models import Group, User

    from access.models import FleetWideAccess

    user = User.objects.create_user(username=username, password="pw-" + username, **extra)
    if role:
        user.groups.add(Group.objects.get(name=role))
    if all_teams:
        FleetWideAccess.objects.create(user=user)
    return user


@pytest.fixture
def viewer(db):
    return make_user("viewer", "viewer")


@pytest.fixture
def planner(db):
    return make_user("planner", "planner")


@pytest.fixture
def fleet_admin(db):
    return make_user("fleetadmin", "admin", is_staff=True)


@pytest.fixture
def no_role_user(db):
    return make_user("norole")


@pytest.fixture
def client_for():
    """An APIClient logged in (by session) as the given user, or anonymous for None."""
    from rest_framework.test import APIClient

    def build(user):
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return build


@pytest.fixture
def demo_fleet(db):
    from inventory.services import load_demo_fleet

    return load_demo_fleet()


@pytest.fixture(scope="session")
def celery_worker_session(django_db_setup, django_db_blocker):
    """A real Celery worker (in a thread) consuming from the configured broker."""
    from celery.contrib.testing.worker import start_worker
    from django.conf import settings

    from config.celery_app import app

    with django_db_blocker.unblock():
        app.control.purge()  # drop messages left by an earlier, interrupted run
        # The queue by name: a test that points app.conf at a private queue for a while must
        # not leave the worker consuming only that one (app.amqp caches its queue list).
        queues = [settings.CELERY_TASK_DEFAULT_QUEUE]
        with start_worker(
            app, pool="solo", perform_ping_check=False, shutdown_timeout=30, queues=queues
        ):
            yield app


@pytest.fixture
def celery_worker(celery_worker_session, transactional_db):
    """Use with tests that need the worker; they run with real commits so the worker sees data."""
    return celery_worker_session
