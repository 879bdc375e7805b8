"""config/celery_redis.py: the Redis transport that lets a worker outlive a broker outage with a
task in flight (docs/decisions/0006). The outage itself, with a real worker:
tests/core/jobs/test_broker_restart_mid_task.py."""

from __future__ import annotations

import json

import pytest
import redis
from kombu import Connection

from tests.support.processes import run_python
from tests.support.redis_server import redis_server

READ_TRANSPORT = """
import json, django
django.setup()
from django.conf import settings
from config.celery_app import app
transport = type(app.connection_for_write().transport)
print(json.dumps([getattr(settings, "CELERY_BROKER_TRANSPORT", None),
                  f"{transport.__module__}:{transport.__name__}"]))
"""
FIXED = "config.celery_redis:Transport"


@pytest.mark.parametrize(
    ("broker_url", "setting", "transport"),
    [
        ("redis://127.0.0.1:1/0", FIXED, FIXED),
        ("rediss://127.0.0.1:1/0", FIXED, FIXED),
        ("filesystem://", None, "kombu.transport.filesystem:Transport"),
        ("sentinel://127.0.0.1:1", None, "kombu.transport.redis:SentinelTransport"),
    ],
    ids=["redis", "rediss", "filesystem", "sentinel"],
)
def test_redis_brokers_get_the_fixed_transport(broker_url, setting, transport):
    result = run_python(
        READ_TRANSPORT, DJANGO_SETTINGS_MODULE="config.settings.local", CELERY_BROKER_URL=broker_url
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [setting, transport]


def restore_after_collect(url: str, transport: str) -> None:
    """What the worker's consumer does in an outage: Connection.collect() detached the
    transport while a channel stayed open; the channel then restores its unacked messages."""
    with Connection(url, transport=transport) as connection:
        channel = connection.channel()
        transport_obj = connection.transport
        transport_obj.client = None
        channel._disconnect_pools()
        try:
            channel.qos.restore_unacked()
        finally:
            transport_obj.client = connection


def test_a_detached_channel_reports_a_lost_broker(tmp_path):
    with (
        redis_server(tmp_path / "redis.log") as server,
        pytest.raises(redis.ConnectionError, match="transport detached"),
    ):
        restore_after_collect(server.url(), FIXED)


def test_kombus_own_transport_still_fails_there(tmp_path):
    """When this fails, kombu fixed the bug: drop config/celery_redis.py and its setting."""
    with (
        redis_server(tmp_path / "redis.log") as server,
        pytest.raises(AttributeError, match="'NoneType' object has no attribute 'hostname'"),
    ):
        restore_after_collect(server.url(), "kombu.transport.redis:Transport")
