"""A report queued while the broker is down is generated and e-mailed once the broker is back.

Real parts: the outage is a publisher pointed at a port nothing listens on, then the app's
own broker again; a real Celery worker generates the report and a real SMTP server
(aiosmtpd) receives the e-mail.
"""

from __future__ import annotations

import time
from email import message_from_bytes
from email.header import decode_header, make_header

import pytest
from aiosmtpd.controller import Controller
from django.test import override_settings

from core.jobs.dispatch import WORKERS_UNAVAILABLE, dispatch_pending_task, pending_count
from reports import services
from reports.models import Report, ReportStatus
from tests.support.builders import APR, MAR, MARCH
from tests.support.builders import finance_monthly_schedule as make_schedule
from tests.support.net import free_port
from tests.support.polling import wait_for_status
from tests.support.smtp import FlakySMTP
from tests.support.workers import UNREACHABLE_BROKER, broker_at

pytestmark = pytest.mark.worker


@pytest.fixture
def smtp_inbox():
    inbox = FlakySMTP(failures=0)  # accepts every message
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


def wait_for_report(report: Report, status: str, timeout_s: float = 90) -> Report:
    def fetch() -> Report:
        report.refresh_from_db()
        return report

    return wait_for_status(fetch, f"report {report.pk}", (status,), timeout_s)


def test_a_report_queued_during_an_outage_is_sent_when_the_broker_is_back(
    report_fleet, celery_worker, smtp_inbox
):
    controller, inbox = smtp_inbox
    schedule = make_schedule()
    with override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=controller.port,
    ):
        with broker_at(UNREACHABLE_BROKER):
            report, queued = services.run_now(schedule, MARCH)
            assert queued
            report.refresh_from_db()
            assert (report.status, report.error) == (ReportStatus.QUEUED, WORKERS_UNAVAILABLE)
            # Still down: the beat task leaves it waiting and nothing reaches the worker.
            assert dispatch_pending_task() == {"sent": 0, "waiting": 1}
        time.sleep(1)
        report.refresh_from_db()
        assert report.status == ReportStatus.QUEUED and inbox.received == []

        # The broker is back: the next beat run sends it, the worker generates and mails it.
        assert dispatch_pending_task() == {"sent": 1, "waiting": 0}
        assert pending_count() == 0
        report = wait_for_report(report, ReportStatus.DELIVERED)
    assert report.error == ""
    assert (report.period_start, report.period_end) == (MAR, APR)
    assert len(inbox.received) == 1
    subject = message_from_bytes(inbox.received[0])["Subject"]
    assert str(make_header(decode_header(subject))).startswith("Finance monthly: 2024-03-01")
