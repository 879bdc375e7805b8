"""E-mail delivery: once per report (two workers), real SMTP failures recorded, then retried."""

from __future__ import annotations

import threading
import time
from email import message_from_bytes
from email.header import decode_header, make_header

import pytest
from django.core import mail
from django.db import connection
from django.test import override_settings

from reports import services
from reports.models import Report, ReportStatus
from tests.support.builders import MARCH
from tests.support.builders import finance_monthly_schedule as make_schedule
from tests.support.net import free_port
from tests.support.smtp import FlakySMTP


def generated_report(schedule=None) -> Report:
    report, _ = services.get_or_create_report(schedule or make_schedule(), MARCH)
    assert services.generate(report.pk).done
    report.refresh_from_db()
    return report


@pytest.mark.django_db
def test_email_has_html_with_inline_charts_text_and_attachments(report_fleet, viewer):
    viewer.email = "viewer@example.com"
    viewer.save()
    schedule = make_schedule()
    schedule.recipient_users.add(viewer)
    report = generated_report(schedule)
    assert report.recipients == ["viewer@example.com", "finance@example.com"]
    assert services.deliver(report.pk).done
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject == "Finance monthly: 2024-03-01 – 2024-03-31"
    assert message.to == ["viewer@example.com", "finance@example.com"]
    parsed = message_from_bytes(message.message().as_bytes())
    # The body parts (the attached print page is text/html too, but has a file name).
    parts = {part.get_content_type(): part for part in parsed.walk() if not part.get_filename()}
    html = parts["text/html"].get_payload(decode=True).decode()
    assert 'src="cid:chart-factors@fleetwise"' in html
    assert "Effective utilization" in html and "Chargeback per team" in html
    content_ids = {
        part["Content-ID"] for part in parsed.walk() if part.get_content_type() == "image/png"
    }
    assert content_ids == {
        "<chart-factors@fleetwise>",
        "<chart-chargeback@fleetwise>",
        "<chart-waste@fleetwise>",
    }
    names = {part.get_filename() for part in parsed.walk() if part.get_filename()}
    assert {
        "finance-monthly-20240301-20240401.xlsx",
        "finance-monthly-20240301-20240401.csv",
        "finance-monthly-20240301-20240401.html",
    } <= names
    assert "Recommendations:" in parts["text/plain"].get_payload(decode=True).decode()
    # Charts beside the HTML that cites them; the files are attachments of the outer message.
    assert parsed.get_content_type() == "multipart/mixed"
    related = parsed.get_payload()[0]
    assert related.get_content_type() == "multipart/related"
    assert related.get_payload()[0].get_content_type() == "multipart/alternative"
    report.refresh_from_db()
    assert report.status == ReportStatus.DELIVERED and report.delivery_attempts == 1
    # Delivered: a second delivery (a redelivered task) sends nothing.
    assert not services.deliver(report.pk).done
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_smtp_failure_marks_delivery_failed_and_a_later_retry_delivers(report_fleet):
    report = generated_report()
    closed = free_port()  # nothing listens here: the connection is refused
    with override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=closed,
        EMAIL_TIMEOUT=5,
    ):
        outcome = services.deliver(report.pk)
    report.refresh_from_db()
    assert not outcome.done
    assert report.status == ReportStatus.DELIVERY_FAILED
    assert report.error.startswith("ConnectionRefusedError")
    assert report.delivery_attempts == 1
    assert mail.outbox == []
    # The retry (the task's, or "Retry delivery" on the page) with the server back.
    assert services.deliver(report.pk).done
    report.refresh_from_db()
    assert report.status == ReportStatus.DELIVERED
    assert report.error == "" and report.delivery_attempts == 2
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_no_recipients_means_archived_not_sent(report_fleet):
    report = generated_report(make_schedule(recipient_addresses=[]))
    assert not services.deliver(report.pk).done
    report.refresh_from_db()
    assert report.status == ReportStatus.GENERATED
    assert mail.outbox == []


@pytest.fixture
def flaky_smtp():
    from aiosmtpd.controller import Controller

    handler = FlakySMTP()
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, handler
    controller.stop()


@pytest.mark.worker
def test_worker_retries_a_refused_send_with_backoff_and_delivers_once(
    report_fleet, celery_worker, flaky_smtp
):
    from reports.tasks import deliver_report

    controller, handler = flaky_smtp
    report = generated_report()
    with override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=controller.port,
        REPORTS_DELIVERY_RETRY_BASE_S=0.5,
    ):
        deliver_report.delay(report.pk)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            report.refresh_from_db()
            if report.status == ReportStatus.DELIVERED:
                break
            time.sleep(0.05)
    assert report.status == ReportStatus.DELIVERED, report.error
    # The server refused once and the refusal counted as an attempt. (The brief DELIVERY_FAILED
    # state is not asserted: with full jitter the retry may start within one poll.)
    assert handler.failures == 0
    assert report.delivery_attempts == 2
    assert len(handler.received) == 1
    received = message_from_bytes(handler.received[0])
    assert str(make_header(decode_header(received["Subject"]))).startswith("Finance monthly: ")


@pytest.mark.worker
def test_same_period_twice_through_the_worker_makes_one_report_and_one_email(
    report_fleet, celery_worker
):
    from reports.tasks import generate_report

    schedule = make_schedule()
    first, created = services.run_now(schedule, MARCH)
    second, created_again = services.run_now(schedule, MARCH)
    assert created and not created_again and first.pk == second.pk
    # Even a duplicated generate message changes nothing.
    generate_report.delay(first.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        first.refresh_from_db()
        if first.status == ReportStatus.DELIVERED:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # room for a duplicate to show up, if there were one
    assert first.status == ReportStatus.DELIVERED
    assert Report.objects.count() == 1
    assert len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_running_the_same_period_concurrently_make_one_report_and_one_email(
    report_fleet,
):
    schedule = make_schedule()
    barrier = threading.Barrier(2)
    results: list = []
    errors: list = []

    def worker():
        try:
            barrier.wait()
            report, _ = services.get_or_create_report(schedule, MARCH)
            generated = services.generate(report.pk)
            delivered = services.deliver(report.pk)
            results.append((report.pk, generated.done, delivered.done))
        except Exception as exc:  # surfaced below: a thread's exception is otherwise lost
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert len({pk for pk, _, _ in results}) == 1
    assert sorted(done for _, done, _ in results) == [False, True]
    assert sorted(done for _, _, done in results) == [False, True]
    assert Report.objects.count() == 1
    assert len(mail.outbox) == 1
