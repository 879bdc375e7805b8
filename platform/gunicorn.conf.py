"""gunicorn settings for the web process (production image)."""

import multiprocessing
import os
import sys
from pathlib import Path

from gunicorn.glogging import Logger

# This file is run by path, not imported: make the project importable for its log redaction.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from core.logredact import REDACTED, SECRET_HEADERS, redact

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "2"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
# Recycle each web worker after this many requests (jittered, so they do not restart together):
# report-heavy load leaves a worker's memory at its high-water mark (docs/deployment.md).
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "1000"))
max_requests_jitter = int(os.environ.get("GUNICORN_MAX_REQUESTS_JITTER", "100"))
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")


class RedactingLogger(Logger):
    """The access log without export-link tokens, token query parameters or credentials."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key, value in atoms.items():
            if key[1:-2] in SECRET_HEADERS and key.endswith("}i"):
                atoms[key] = REDACTED
            elif isinstance(value, str):
                atoms[key] = redact(value)
        return atoms


logger_class = RedactingLogger
