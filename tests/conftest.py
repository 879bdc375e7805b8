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


def _repeated_on_another_backend(item: pytest.Item) -> bool:
    """Whether a test's outcome may depend on the database and broker: it touches the
    database, and it is not a browser test (those drive the same views the others query)."""
    return _uses_the_database(item) and not item.get_closest_marker("browser")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """FLEETWISE_TESTS_BACKEND_ONLY=1 keeps only the tests whose outcome may depend on the
    database and broker: CI's run on the embedded defaults repeats those, while its run on
    PostgreSQL + Redis runs every test."""
    import os

    if os.environ.get("FLEETWISE_TESTS_BACKEND_ONLY") != "1":
        return
    deselected = [item for item in items if not _repeated_on_another_backend(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if _repeated_on_another_backend(item)]
