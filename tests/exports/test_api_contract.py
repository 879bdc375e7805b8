"""The OpenAPI schema against the running API: schemathesis sends generated GETs (every
endpoint, format and filter the schema documents) as each role (administrator, planner,
viewer, a viewer tied to one team, and anonymous) and checks that no answer is a 5xx and every
documented answer matches its schema; anonymous requests all get 401 (the schema and docs need
a login too: tests/access/test_authorization_matrix.py)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)

from tests.support.openapi import validated_schema

# Examples per operation and role: the administrator explores most (it may read everything);
# the other roles see the same code paths minus what they may not read.
EXAMPLES_PER_OPERATION = {"admin": 6, "planner": 3, "viewer": 3, "team_viewer": 3, "anonymous": 1}
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
# CI replays the same examples every run (a gate must not depend on luck); local runs explore.
DERANDOMIZE = bool(os.environ.get("CI"))


def role_user(request, role: str):
    """The user of a role (None for anonymous); the team viewer only sees team-a's usage."""
    from access.models import TeamMembership
    from tests.support.builders import make_user

    if role == "anonymous":
        return None
    if role == "team_viewer":
        user = make_user("team-a-viewer", "viewer")
        TeamMembership.objects.create(user=user, team="team-a")
        return user
    return request.getfixturevalue({"admin": "fleet_admin"}.get(role, role))


@pytest.fixture(params=list(EXAMPLES_PER_OPERATION))
def api_schema(request, fleet):
    from access.tokens import issue_token
    from config.wsgi import application

    role = request.param
    user = role_user(request, role)

    schema = schemathesis.openapi.from_dict(validated_schema())
    schema.app = application  # requests go through WSGI, in this process and test database
    token = issue_token(user)[1] if user is not None else None
    # As Django's test client does: a request must not close the test database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    # Reads only: writes are covered by each app's tests; the token URL needs a real token.
    yield (
        role,
        token,
        schema.include(method="GET").exclude(path_regex=r"^/api/v1/(export/|schema/|docs/|redoc/)"),
    )
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
def test_get_endpoints_conform_to_the_schema(api_schema):
    role, token, api_schema = api_schema
    headers = {"Authorization": f"Token {token}"} if token else {}
    failures, tested = [], []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION[role],
            deadline=None,
            database=None,
            derandomize=DERANDOMIZE,
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            if token is None:
                response = case.call()
                assert response.status_code == 401, (case.path, response.status_code)
                assert "www-authenticate" in response.headers, case.path
            else:
                case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            check()
        except BaseException as exc:  # schemathesis raises a (Base)ExceptionGroup
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failures.append(f"{operation.label}: {exc}")
        tested.append(operation.label)
    assert len(tested) > 30, tested
    assert not failures, "\n\n".join(failures)
