"""PostgreSQL restarted under the app: a request during the gap fails cleanly (503, at once),
and the next one after it reconnects, with the same handler and no restart of the app.

A restart is simulated on this test's own database only, from a second connection: its
server-side backends are terminated (pg_terminate_backend), and for the gap new connections
are refused (ALTER DATABASE ... ALLOW_CONNECTIONS false). The shared server keeps running.
Requests go through Django's WSGI handler as gunicorn would call it, so the request_started
and request_finished connection housekeeping runs (the test client switches it off).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import Client
from django.test.client import RequestFactory

from access.tokens import issue_token
from config.middleware import MESSAGE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("simulates a PostgreSQL restart (run with DATABASE_URL=postgres://...)")


@pytest.fixture
def persistent_connections():
    """Production's persistent connections (test settings use CONN_MAX_AGE=0)."""
    saved = connection.settings_dict["CONN_MAX_AGE"], connection.settings_dict["CONN_HEALTH_CHECKS"]
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = 600
    connection.settings_dict["CONN_HEALTH_CHECKS"] = True
    yield
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"], connection.settings_dict["CONN_HEALTH_CHECKS"] = saved


@contextmanager
def admin_session():
    """A second connection, to the maintenance database, for the server-side actions."""
    import psycopg

    settings = connection.settings_dict
    with psycopg.connect(
        dbname="postgres",
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        autocommit=True,
    ) as admin:
        yield admin


def terminate_backends(admin, database: str) -> int:
    rows = admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        [database],
    ).fetchall()
    return len(rows)


def allow_connections(admin, database: str, allowed: bool) -> None:
    quoted = '"' + database.replace('"', '""') + '"'
    admin.execute(f"ALTER DATABASE {quoted} ALLOW_CONNECTIONS {'true' if allowed else 'false'}")


class App:
    """The WSGI application as a server calls it: one handler for the whole test."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def get(self, path: str, **headers) -> tuple[int, bytes, float]:
        environ = RequestFactory()._base_environ(PATH_INFO=path, REQUEST_METHOD="GET", **headers)
        status = {}

        def start_response(line, response_headers, exc_info=None):
            status["code"] = int(line.split()[0])

        started = time.monotonic()
        response = self.handler(environ, start_response)
        try:
            body = b"".join(response)
        finally:
            response.close()  # request_finished: Django's connection housekeeping
        return status["code"], body, time.monotonic() - started


def test_requests_fail_cleanly_while_postgres_restarts_and_recover_after(
    postgres, persistent_connections, planner
):
    database = connection.settings_dict["NAME"]
    api = {"HTTP_AUTHORIZATION": f"Token {issue_token(planner)[1]}"}
    browser = Client()
    browser.force_login(planner)
    page = {"HTTP_COOKIE": f"sessionid={browser.cookies['sessionid'].value}"}
    connection.close()
    app = App()

    code, _, _ = app.get("/api/v1/pools/", **api)
    assert code == 200
    assert connection.connection is not None, "the connection should persist between requests"
    first_backend = connection.connection.info.backend_pid

    with admin_session() as admin:
        # A quick restart, over before the next request: the health check reconnects.
        assert terminate_backends(admin, database) >= 1
        code, _, _ = app.get("/api/v1/pools/", **api)
        assert code == 200
        assert connection.connection.info.backend_pid != first_backend

        # A longer one: requests during the gap are refused cleanly and quickly.
        allow_connections(admin, database, False)
        try:
            terminate_backends(admin, database)
            code, body, seconds = app.get("/api/v1/pools/", **api)
            assert code == 503 and json.loads(body) == {"detail": MESSAGE}
            assert seconds < 5
            code, body, _ = app.get("/inventory/", **page)
            assert code == 503 and MESSAGE.encode() in body
        finally:
            allow_connections(admin, database, True)

    # The server is back: the same app answers without a restart.
    code, body, _ = app.get("/api/v1/pools/", **api)
    assert code == 200 and "results" in json.loads(body)
    code, _, _ = app.get("/inventory/", **page)
    assert code == 200
