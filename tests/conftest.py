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
    "tests.support.fixtures.slurm",
]


# Folders and modules whose tests check what a page or endpoint does with what the layers
# below return (rendering, permissions, validation before any query, the schema): the same
# on every backend. Their queries go through the selectors and services whose own tests
# are repeated. docs/decisions/0013-ci-second-backend.md says why.
_SAME_ON_EVERY_BACKEND = (
    "tests/frontend/",
    "tests/access/",
    "tests/config/test_api_fuzz.py",
    "tests/config/test_csrf.py",
    "tests/config/test_error_boundaries.py",
    "tests/config/test_null_bytes.py",
    "tests/config/test_pages.py",
    "tests/config/test_schema.py",
    "tests/exports/test_api_contract.py",
)
# ...unless the test runs a real worker or commits: then the broker or the database's
# transactions are part of what it checks.
_BACKEND_FIXTURES = {"celery_worker", "celery_worker_session", "transactional_db", "live_server"}


def _checks_only_the_layer_above(item: pytest.Item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    if not path.startswith(_SAME_ON_EVERY_BACKEND):
        return False
    return not set(getattr(item, "fixturenames", ())) & _BACKEND_FIXTURES


def _repeated_on_another_backend(item: pytest.Item) -> bool:
    """Whether a test's outcome may depend on the database and broker: it touches the
    database, it is not a browser test (those drive the same views the others query), and
    it is not one of the tests above the selectors and services."""
    from tests.support.database_use import database_use

    return (
        database_use(item) != "none"
        and not item.get_closest_marker("browser")
        and not _checks_only_the_layer_above(item)
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heavy transactional tests run last (tests/support/xdist_scheduling.py), and
    FLEETWISE_TESTS_BACKEND_ONLY=1 keeps only the tests whose outcome may depend on the
    database and broker: CI's run on the embedded defaults repeats those, while its run on
    PostgreSQL + Redis runs every test."""
    import os

    from tests.support.xdist_scheduling import run_order

    items.sort(key=run_order)  # a stable sort: each group keeps pytest-django's order
    if os.environ.get("FLEETWISE_TESTS_BACKEND_ONLY") != "1":
        return
    deselected = [item for item in items if not _repeated_on_another_backend(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if _repeated_on_another_backend(item)]


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test`'s workers share the heavy tail (tests/support/xdist_scheduling.py)."""
    # Imported here: tests.support is imported after its assertions are set to be rewritten.
    from tests.support.xdist_scheduling import TailSharingScheduling

    return TailSharingScheduling(config, log)  # type: ignore[arg-type]
