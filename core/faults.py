"""Fault injection for tests: a pause inside a running task, room to kill its worker.

The pauses are test settings only (config/settings/test.py, from FLEETWISE_*_DELAY_S); the
production settings define none, so a pause there costs one attribute lookup.
"""

from __future__ import annotations

import time

from django.conf import settings


def injected_pause(name: str) -> None:
    """Sleep the seconds the setting ``name`` holds, if the settings have it at all."""
    seconds = getattr(settings, name, 0.0)
    if seconds:
        time.sleep(seconds)
