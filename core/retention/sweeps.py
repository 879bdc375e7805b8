"""The retention run: expired files, orphaned files, then the sweeps apps registered (the
inventory purges clusters and pools deleted longer ago than their retention period)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from django.utils import timezone

from core.retention.files import expire_files
from core.retention.orphans import delete_orphans

logger = logging.getLogger(__name__)

# now -> counts of what the sweep deleted.
Sweep = Callable[[dt.datetime], dict[str, int]]
_SWEEPS: dict[str, Sweep] = {}


def register_sweep(name: str, sweep: Sweep) -> None:
    """Called from an app's ``ready()``; a name registered twice is replaced."""
    _SWEEPS[name] = sweep


def apply_retention(now: dt.datetime | None = None) -> dict[str, object]:
    """One pass of every rule; a failing sweep is logged and the others still run."""
    now = now or timezone.now()
    done: dict[str, object] = {
        "expired_files": expire_files(now),
        "orphaned_files": delete_orphans(now),
    }
    for name, sweep in _SWEEPS.items():
        try:
            done[name] = sweep(now)
        except Exception:
            logger.exception("retention sweep %s failed", name)
            done[name] = "failed"
    return done
