"""Real worker processes and brokers in tests: the test database's URL for a worker
subprocess (settings: tests/support/worker_settings.py), a usage file big enough to kill a
worker in, polling that acts as beat, and a broker outage."""

from __future__ import annotations

from contextlib import contextmanager

from tests.support.polling import wait_until as poll_until

WORKER_SETTINGS = "tests.support.worker_settings"
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def database_url() -> str:
    """The URL a worker subprocess opens to reach this test's database."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def usage_csv(cluster: str, lines: int) -> bytes:
    """A usage CSV of ``lines`` 8-card H100 jobs on the cluster."""
    header = "cluster,job_id,cards,start,end,state,accelerator_model,team,user\n"
    body = "".join(
        f"{cluster},job-{i},8,2024-03-01T{i % 24:02d}:00:00Z,2024-03-02T{i % 24:02d}:00:00Z,"
        f"completed,H100 SXM5 80GB,team-{i % 7},user-{i % 31}\n"
        for i in range(lines)
    )
    return (header + body).encode()


def wait_until(predicate, timeout_s: float, what: str, *, recover: bool = False):
    """Poll until predicate() is truthy; with ``recover`` act as beat (config.recover_stalled)."""
    from core.jobs.recovery import recover_stalled

    return poll_until(
        predicate,
        timeout_s=timeout_s,
        what=what,
        interval_s=0.5,
        on_retry=recover_stalled if recover else None,
    )


@contextmanager
def broker_at(url: str):
    """Point the app's publishers at `url`, then back (the worker keeps its own connection)."""
    from config.celery_app import app

    def drop_pools() -> None:
        # Publishers are pooled per broker URL; forget them so the next send uses `url`.
        app.amqp._producer_pool = None
        app._pool = None

    saved = app.conf.get("broker_write_url")
    app.conf.broker_write_url = url  # publishers only; the worker keeps consuming
    drop_pools()
    try:
        yield
    finally:
        app.conf.broker_write_url = saved
        drop_pools()
