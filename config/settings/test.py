"""Test settings: the same wiring as local, with fast hashing and a private broker folder."""

import os
import tempfile
from pathlib import Path

from .base import *  # noqa: F403
from .base import (
    CELERY_BROKER_TRANSPORT_OPTIONS,
    CELERY_BROKER_URL,
    CELERY_TASK_DEFAULT_QUEUE,
    DATABASES,
    INSTALLED_APPS,
    env,
)

# Under pytest-xdist each worker process ("gw0", "gw1", …) gets its own SQLite file, broker
# folder and queue; pytest-django suffixes its test database. Subprocesses inherit the name.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_SUFFIX = f"_{XDIST_WORKER.upper()}" if XDIST_WORKER else ""

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so a worker thread sees the same test database.
    # Exported so a worker subprocess started by a test opens the same file.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.setdefault(
            f"FLEETWISE_TEST_SQLITE{_WORKER_SUFFIX}",
            str(Path(tempfile.gettempdir()) / f"fleetwise-test-{os.getpid()}.sqlite3"),
        )
    }

    # Longer than the app's 20 s busy timeout: two test suites may share the two cores, and a
    # worker subprocess of a test writes to the same file.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 60

if CELERY_BROKER_URL.startswith("filesystem://"):
    # Exported so a worker subprocess started by a test shares the message folder.
    _broker = Path(
        os.environ.setdefault(
            f"FLEETWISE_TEST_BROKER_FOLDER{_WORKER_SUFFIX}",
            tempfile.mkdtemp(prefix="fleetwise-broker-"),
        )
    )
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "out"),
        "data_folder_out": str(_broker / "out"),
        "processed_folder": str(_broker / "processed"),
        "store_processed": False,
        "control_folder": str(_broker / "control"),
    }

if XDIST_WORKER and "FLEETWISE_CELERY_QUEUE" not in os.environ:
    # One Redis database serves every xdist worker: each consumes its own queue.
    CELERY_TASK_DEFAULT_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-{XDIST_WORKER}"

if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # kombu keeps one unacked index per Redis database, and a worker re-queues any message in
    # it older than its own visibility timeout: the worker-kill tests' 4 s workers re-sent other
    # xdist workers' running tasks. Each xdist worker's consumers keep their own index (only
    # consumers read these keys, so a test's publisher pointed elsewhere still matches). kombu
    # also looks for overdue messages only every 10 s × every 10th time: a kill test's fresh
    # worker re-sent the killed task after 100 s, near its wait; here every second.
    _unacked = f"-{XDIST_WORKER}" if XDIST_WORKER else ""
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "unacked_key": f"unacked{_unacked}",
        "unacked_index_key": f"unacked_index{_unacked}",
        "unacked_mutex_key": f"unacked_mutex{_unacked}",
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }

# Worker heartbeats of this test process alone (not those of a suite running beside it).
_HEARTBEATS_KEY = f"FLEETWISE_TEST_HEARTBEAT_DIR{_WORKER_SUFFIX}"
if "FLEETWISE_HEARTBEAT_DIR" not in os.environ and _HEARTBEATS_KEY not in os.environ:
    os.environ[_HEARTBEATS_KEY] = tempfile.mkdtemp(prefix="fleetwise-heartbeats-")
FLEETWISE_HEARTBEAT_DIR = os.environ.get("FLEETWISE_HEARTBEAT_DIR", os.environ[_HEARTBEATS_KEY])

STATICFILES_DIRS: list = []
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)

# Tests that kill workers count how often a task really completed: a result table for tests
# only (the app reads job rows).
INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_results"]
CELERY_RESULT_BACKEND = "django-db"
CELERY_RESULT_EXTENDED = True
CELERY_TASK_IGNORE_RESULT = False

# Fault injection (core.faults): seconds an analysis part sleeps before it writes, a usage
# import after each written chunk (inside its transaction) and a report generation after its
# claim: room to kill a worker mid-task. Test settings only.
ANALYSIS_PART_DELAY_S = env.float("FLEETWISE_ANALYSIS_PART_DELAY_S", default=0.0)
IMPORT_CHUNK_DELAY_S = env.float("FLEETWISE_IMPORT_CHUNK_DELAY_S", default=0.0)
REPORT_GENERATE_DELAY_S = env.float("FLEETWISE_REPORT_GENERATE_DELAY_S", default=0.0)

# The dashboards' warm-up after each rollup refresh (a cache fill of every default view, seconds
# with demo usage) is off in tests: the tests of the warm-up turn it on (the fixture
# `dashboard_warmup`); every other refresh in the suite would pay for it.
USAGE_ROLLUP_REFRESH_HOOKS: list[str] = []

# The in-thread test worker must not keep connections that block dropping the test database.
DATABASES["default"]["CONN_MAX_AGE"] = 0
# WhiteNoise looks a static file up when it is asked for, instead of indexing every file each
# time a test client builds its middleware (about 20 ms a client, thousands of clients a run).
WHITENOISE_AUTOREFRESH = True
