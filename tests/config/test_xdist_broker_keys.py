"""Test settings on Redis: each pytest-xdist worker's Celery consumers keep their own unacked
index, so a test's worker with a 4 s visibility timeout (the worker-kill tests) never re-queues
a task that another xdist worker's test is running. It did once in CI: the re-sent run found the
import done, and its "skipped" result replaced the stored result of the run that did the work."""

from __future__ import annotations

import json
import time

import redis
from kombu import Connection

from tests.support.processes import run_python
from tests.support.redis_server import redis_server

READ_OPTIONS = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps(settings.CELERY_BROKER_TRANSPORT_OPTIONS))
"""
QUEUE = "xdist-keys"


def broker_options(settings_module: str, xdist_worker: str, broker_url: str) -> dict:
    result = run_python(
        READ_OPTIONS,
        DJANGO_SETTINGS_MODULE=settings_module,
        CELERY_BROKER_URL=broker_url,
        PYTEST_XDIST_WORKER=xdist_worker,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_each_xdist_worker_has_its_own_unacked_keys_and_its_celery_workers_share_them():
    url = "redis://127.0.0.1:1/15"
    first = broker_options("config.settings.test", "gw0", url)
    second = broker_options("config.settings.test", "gw1", url)
    started_by_a_test = broker_options("tests.support.worker_settings", "gw1", url)
    keys = ("unacked_key", "unacked_index_key", "unacked_mutex_key")
    assert all(first[key] != second[key] for key in keys)
    assert all(started_by_a_test[key] == second[key] for key in keys)
    assert first["visibility_timeout"] == second["visibility_timeout"] == 65 * 60
    # Overdue messages are looked for every second, not every 100 s (kombu's 10 s × 10th time).
    assert first["unacked_restore_interval"] * first["unacked_restore_throttle"] == 1


def restore_overdue(url: str, options: dict) -> None:
    """What an impatient consumer does in its event loop: re-queue every unacked message."""
    with Connection(url, transport_options={**options, "visibility_timeout": 0}) as connection:
        connection.default_channel.qos.restore_visible(interval=1)


def test_a_short_visibility_timeout_on_one_xdist_worker_leaves_anothers_running_task(tmp_path):
    with redis_server(tmp_path / "redis.log") as server:
        url = server.url()
        running = broker_options("config.settings.test", "gw0", url)
        impatient = broker_options("config.settings.test", "gw1", url)
        client = redis.Redis.from_url(url)
        with Connection(url, transport_options=running) as connection:
            queue = connection.SimpleQueue(QUEUE)
            queue.put({"job": 1})
            message = queue.get(timeout=5)  # delivered, not acknowledged: a running task
            time.sleep(0.05)

            restore_overdue(url, impatient)
            assert client.llen(QUEUE) == 0
            assert client.hlen(running["unacked_key"]) == 1

            restore_overdue(url, running)  # the same xdist worker's consumers would re-send it
            assert client.llen(QUEUE) == 1
            assert message.payload == {"job": 1}
            queue.close()
        client.close()
