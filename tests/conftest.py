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
