"""Settings defaults, production hardening and `check --deploy`, each in a clean process."""

import json
import os
import subprocess
import sys

from tests.support.processes import CLEAN_ENV_DROP, ROOT, run_python

READ_SETTINGS = """
import json, django
django.setup()
from django.conf import settings as s
print(json.dumps({
    "engine": s.DATABASES["default"]["ENGINE"],
    "name": str(s.DATABASES["default"]["NAME"]),
    "broker": s.CELERY_BROKER_URL,
    "broker_options": s.CELERY_BROKER_TRANSPORT_OPTIONS,
    "result_backend": s.CELERY_RESULT_BACKEND,
    "beat": s.CELERY_BEAT_SCHEDULER,
    "debug": s.DEBUG,
    "hosts": s.ALLOWED_HOSTS,
}))
"""


def test_local_defaults_need_no_server():
    result = run_python(READ_SETTINGS, DJANGO_SETTINGS_MODULE="config.settings.local")
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["name"] == str(ROOT / "var" / "fleetwise.sqlite3")
    assert values["broker"] == "filesystem://"
    assert values["broker_options"]["data_folder_in"].startswith(str(ROOT / "var"))
    assert values["result_backend"] is None  # job rows hold every outcome (core.jobs)
    assert values["beat"] == "django_celery_beat.schedulers:DatabaseScheduler"
    assert values["debug"] is True


def test_environment_variables_override_the_defaults():
    result = run_python(
        READ_SETTINGS,
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DATABASE_URL="postgres://u:p@db.example:5432/fleet",
        CELERY_BROKER_URL="redis://cache.example:6379/2",
        DJANGO_ALLOWED_HOSTS="a.example,b.example",
        DJANGO_DEBUG="false",
    )
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["name"] == "fleet"
    assert values["broker"] == "redis://cache.example:6379/2"
    assert values["hosts"] == ["a.example", "b.example"]
    assert values["debug"] is False


def test_production_requires_a_secret_key():
    result = run_python(
        READ_SETTINGS,
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_ALLOWED_HOSTS="fleet.example",
        DATABASE_URL="sqlite:////tmp/x.sqlite3",
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_check_deploy_is_clean_with_production_settings():
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV_DROP}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="k" * 20 + "-Vq9#xZ2!pL7@mN4$rT8%wY1^bC6&dF3*gH5",
        DJANGO_ALLOWED_HOSTS="fleet.example",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/15",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
