"""The folders the embedded defaults write to, made when the app starts (not when settings are
imported): the SQLite file's folder and the filesystem broker's message folders."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


def ensure_local_dirs() -> None:
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        for name in (database.get("NAME"), database.get("TEST", {}).get("NAME")):
            if name and str(name) != ":memory:" and not str(name).startswith("file:"):
                Path(name).parent.mkdir(parents=True, exist_ok=True)
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for key in BROKER_FOLDERS:
            if options.get(key):
                Path(options[key]).mkdir(parents=True, exist_ok=True)
