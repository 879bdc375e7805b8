"""The suite's shared fixtures, registered once for every folder: users and API clients,
fleets (the demo fleet and its analysis, the 16-card "alpha" cluster, the reports' fleet),
a real Celery worker and Debian's Chromium (tests/support/fixtures/). Builders and helpers
are in tests/support; a folder's conftest.py holds only that folder's fixtures, and no test
module or conftest imports another.

Django is imported inside fixtures so the pure-core suites also run with `-p no:django`.
"""

import pytest

# Assertions in the support helpers report their operands, as in test modules.
pytest.register_assert_rewrite("tests.support")

pytest_plugins = [
    "tests.support.fixtures.users",
    "tests.support.fixtures.fleet",
    "tests.support.fixtures.worker",
    "tests.support.fixtures.browser",
]


def _uses_the_database(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(
        item.get_closest_marker("django_db")
        or fixtures & {"db", "transactional_db", "live_server", "django_db_setup"}
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """FLEETWISE_TESTS_DATABASE_ONLY=1 keeps only the tests that touch the database: CI's run
    on the embedded defaults repeats those, while the run on PostgreSQL runs every test."""
    import os

    if os.environ.get("FLEETWISE_TESTS_DATABASE_ONLY") != "1":
        return
    kept = [item for item in items if _uses_the_database(item)]
    deselected = [item for item in items if not _uses_the_database(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
