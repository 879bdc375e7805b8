"""How a test uses the database, read from its `django_db` marker and its fixtures: the one
classification behind the suite's order (tests/support/xdist_scheduling.py), the shared demo
analysis (tests/support/fixtures/fleet.py) and CI's run on a second backend (tests/conftest.py).
"""

from __future__ import annotations

from typing import Literal

import pytest

DatabaseUse = Literal["none", "rolled_back", "transactional"]

# Requested directly or through another fixture (pytest lists the closure in fixturenames).
TRANSACTIONAL_FIXTURES = frozenset(
    {
        "transactional_db",
        "live_server",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
    }
)
ROLLED_BACK_FIXTURES = frozenset({"db", "django_db_setup"})


def database_use(item: pytest.Item) -> DatabaseUse:
    """Its use: "transactional" (commits, flushed after), "rolled_back" or "none"."""
    fixtures = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    flags = marker.kwargs if marker is not None else {}
    committed = flags.get("transaction") or flags.get("reset_sequences")
    if committed or fixtures & TRANSACTIONAL_FIXTURES:
        return "transactional"
    if marker is not None or fixtures & ROLLED_BACK_FIXTURES:
        return "rolled_back"
    return "none"
