"""Secrets out of logs: export-link tokens in paths, token-like query parameters, credentials
in URLs.

An export link (`/api/v1/export/<token>/`) is a bearer credential, and access logs are read
by more people than the admins (docs/deployment.md). Used by the Django log filter below
(runserver's `django.server`, `django.request`, and the console handler every app logger
writes through) and by gunicorn's access logger (`platform/gunicorn.conf.py`).
"""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"
# The export link's path part, query parameters that carry credentials, and the user:password
# of a URL (an outbound source's, e.g. a Prometheus URL saved before they were refused).
_PATTERNS = (
    re.compile(r"(/api/v1/export/)[^/\s?#\"]+"),
    re.compile(r"((?:^|[?&;])(?:token|key|api_key|access_token|auth)=)[^&;\s#\"]*", re.I),
    re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s?#@\"']+(?=@)", re.I),
)
# Request headers that are credentials whatever their content.
SECRET_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def redact(text: str) -> str:
    """`text` with every token-like part replaced by "[redacted]"."""
    for pattern in _PATTERNS:
        text = pattern.sub(rf"\g<1>{REDACTED}", text)
    return text


class RedactTokensFilter(logging.Filter):
    """Rewrites a record's message without its tokens (the record is still logged)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True
