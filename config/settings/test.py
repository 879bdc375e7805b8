"""Test settings: the same wiring as local, with fast hashing and a private broker folder."""

import os
import tempfile
from pathlib import Path

from .base import *  # noqa: F403
from .base import CELERY_BROKER_URL, DATABASES, env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so a worker thread sees the same test database.
    # Exported so a worker subprocess started by a test opens the same file.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.setdefault(
            "FLEETWISE_TEST_SQLITE",
            str(Path(tempfile.gettempdir()) / f"fleetwise-test-{os.getpid()}.sqlite3"),
        )
    }

if CELERY_BROKER_URL.startswith("filesystem://"):
    # Exported so a worker subprocess started by a test shares the message folder.
    _broker = Path(
        os.environ.setdefault(
            "FLEETWISE_TEST_BROKER_FOLDER", tempfile.mkdtemp(prefix="fleetwise-broker-")
        )
    )
    for _sub in ("out", "processed", "control"):
        (_broker / _sub).mkdir(exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "out"),
        "data_folder_out": str(_broker / "out"),
        "processed_folder": str(_broker / "processed"),
        "store_processed": False,
        "control_folder": str(_broker / "control"),
    }

STATICFILES_DIRS: list = []
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)

# The in-thread test worker must not keep connections that block dropping the test database.
DATABASES["default"]["CONN_MAX_AGE"] = 0
