"""Fixtures of the job framework's tests: the reports' small fleet with a month of usage."""

from tests.reports.conftest import report_fleet  # noqa: F401 - shared fixture
