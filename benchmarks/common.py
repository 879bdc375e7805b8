"""What every benchmark script needs: its own PostgreSQL database, Django set up, peak RSS."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def ensure_postgres_database(url: str) -> None:
    """Create the benchmark's database when it does not exist yet."""
    import psycopg
    from psycopg import sql

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def setup_django(database_url: str, **environ: str) -> None:
    """Django on ``database_url`` with local settings, DEBUG off (it keeps every query)."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.update(environ)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ["DJANGO_LOG_LEVEL"] = "WARNING"
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import django

    django.setup()
