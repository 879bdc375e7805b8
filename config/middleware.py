"""A database that went away (restart, failover) answers 503 "try again", not a 500 page.

Django drops the broken connection at the end of the request (CONN_HEALTH_CHECKS checks a
persistent one before its next use), so the next request reconnects by itself.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.http import HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

MESSAGE = "The database is unavailable for a moment (restarting?). Try again in a few seconds."
RETRY_AFTER_S = 5


def database_is_down() -> bool:
    """True when the default connection is gone or no longer answers (not a bad query)."""
    connection = connections[DEFAULT_DB_ALIAS]
    return connection.connection is None or not connection.is_usable()


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        if not database_is_down():
            return None  # e.g. SQLite "no such table": a real error, shown as one
        logger.warning(
            "database unavailable during %s %s: %s", request.method, request.path, exception
        )
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": MESSAGE}, status=503)
        else:
            body = f"<!doctype html><title>Try again</title><h1>Try again</h1><p>{MESSAGE}</p>"
            response = HttpResponse(body, status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
