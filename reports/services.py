"""Write side of reports: schedule upkeep, the beat tick, generation and delivery.

Idempotence, end to end:

* a period is a pure function of a fire time (:mod:`reports.periods`), and a Report is unique
  per (schedule, period_start, period_end): duplicate ticks and "run now" twice meet at
  ``get_or_create`` on that constraint;
* generation is claimed with a conditional UPDATE (queued/failed → generating), delivery with
  another (generated/delivery_failed → sending): of two workers only one wins each claim, so
  one report is built and one e-mail sent. A worker that dies mid-claim leaves the report in
  generating/sending; a generating claim older than ``STALE_CLAIM`` may be taken again, a
  sending one is never re-sent automatically (at most one e-mail), an admin can retry it.
"""

from __future__ import annotations

import datetime as dt
import logging
import smtplib
from dataclasses import dataclass
from email.mime.image import MIMEImage

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.mail import EmailMultiAlternatives
from django.core.mail.message import SafeMIMEMultipart
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from core.faults import injected_pause
from core.jobs.dispatch import send_or_defer, send_task
from engine.text import one_line
from reports import content, periods, render
from reports.authorization import deliverable, still_deliverable
from reports.charts import render_charts
from reports.models import (
    Report,
    ReportFormat,
    ReportSchedule,
    ReportStatus,
    Trigger,
)

logger = logging.getLogger(__name__)

STALE_CLAIM = dt.timedelta(minutes=30)
# A beat that was down catches up on at most this many missed firings per schedule.
MAX_CATCH_UP = 3
# What an SMTP server or the network can throw at a send; anything else is a bug, not retried.
DELIVERY_ERRORS = (smtplib.SMTPException, OSError)
# A message Django cannot write (BadHeaderError is a ValueError) fails before any SMTP DATA.
UNWRITABLE_MESSAGE = (ValueError,)
SUBJECT_MAX_CHARS = 250


# -- schedules ---------------------------------------------------------------------------------


def refresh_next_run(schedule: ReportSchedule, now: dt.datetime | None = None) -> None:
    """Set ``next_run_at`` from the schedule's definition (None while paused); no save."""
    now = now or timezone.now()
    schedule.next_run_at = periods.next_fire(schedule.spec(), now) if schedule.enabled else None


def save_schedule(schedule: ReportSchedule, *, now: dt.datetime | None = None) -> ReportSchedule:
    """Validate and save; the next firing is recomputed from now (a change applies forward)."""
    schedule.full_clean()
    refresh_next_run(schedule, now)
    schedule.save()
    return schedule


def set_enabled(schedule: ReportSchedule, enabled: bool) -> ReportSchedule:
    schedule.enabled = enabled
    refresh_next_run(schedule)
    schedule.save(update_fields=["enabled", "next_run_at", "updated"])
    return schedule


def recipients_of(schedule: ReportSchedule) -> list[str]:
    """Users' addresses (active users with one) then plain addresses, without duplicates."""
    addresses = [
        user.email for user in schedule.recipient_users.all() if user.is_active and user.email
    ]
    addresses += list(schedule.recipient_addresses or [])
    return list(dict.fromkeys(address.strip() for address in addresses if address.strip()))


# -- creating reports ------------------------------------------------------------------------


def get_or_create_report(
    schedule: ReportSchedule,
    period: periods.Period,
    *,
    trigger: str = Trigger.SCHEDULE,
    user=None,
    deliver: bool = True,
) -> tuple[Report, bool]:
    """The one report of (schedule, period); ``created`` False when it already existed."""
    lookup = {
        "schedule": schedule,
        "period_start": period.start.astimezone(dt.UTC),
        "period_end": period.end.astimezone(dt.UTC),
    }
    defaults = {"trigger": trigger, "requested_by": user, "deliver": deliver}
    try:
        return Report.objects.get_or_create(**lookup, defaults=defaults)
    except IntegrityError:
        # Another worker inserted it between our SELECT and INSERT (get_or_create re-reads on
        # PostgreSQL; SQLite can surface the race here).
        return Report.objects.get(**lookup), False


def tick(now: dt.datetime | None = None) -> list[int]:
    """Create the report of every due firing and queue its generation; returns new report ids.

    Due = enabled with ``next_run_at`` ≤ now. Each schedule is advanced with a conditional
    UPDATE on its old ``next_run_at``, so a duplicated tick skips it; even if two ticks both
    got through, the periods are the same and the reports collapse on the unique constraint.
    """
    now = now or timezone.now()
    created_ids: list[int] = []
    due = ReportSchedule.objects.filter(enabled=True, next_run_at__lte=now).order_by("pk")
    for schedule in due:
        spec = schedule.spec()
        fires = periods.fires_between(
            spec, schedule.next_run_at - dt.timedelta(microseconds=1), now
        )[-MAX_CATCH_UP:]
        with transaction.atomic():
            advanced = ReportSchedule.objects.filter(
                pk=schedule.pk, next_run_at=schedule.next_run_at
            ).update(next_run_at=periods.next_fire(spec, now), last_run_at=now)
            if not advanced:
                continue  # another tick took this one
            for fire in fires:
                report, created = get_or_create_report(
                    schedule, periods.period_for_fire(spec, fire)
                )
                if created:
                    created_ids.append(report.pk)
                    # After commit; deferred while the broker is down, sent once it is back.
                    send_or_defer(report)
    return created_ids


def run_now(
    schedule: ReportSchedule, period: periods.Period, *, user=None, deliver: bool = True
) -> tuple[Report, bool]:
    """Queue the report of ``period`` ("run now"). An existing report is returned as it is,
    except one whose generation failed, which is queued again."""
    report, created = get_or_create_report(
        schedule, period, trigger=Trigger.MANUAL, user=user, deliver=deliver
    )
    queue = created or report.status == ReportStatus.FAILED
    if queue:
        send_or_defer(report)
    return report, queue


# -- generation --------------------------------------------------------------------------------


def _claim(
    report_id: int, from_statuses, to_status: str, now: dt.datetime, *, stale_ok=False, **extra
) -> bool:
    """Move the report to ``to_status`` if it is in ``from_statuses``: one UPDATE, so of two
    concurrent callers exactly one sees a row changed. ``stale_ok`` also takes over a claim of
    ``to_status`` older than STALE_CLAIM (its worker died)."""
    condition = Q(status__in=from_statuses)
    if stale_ok:
        condition |= Q(status=to_status, claimed_at__lt=now - STALE_CLAIM)
    updated = Report.objects.filter(condition, pk=report_id).update(
        status=to_status, claimed_at=now, **extra
    )
    return updated == 1


@dataclass
class Outcome:
    done: bool
    status: str
    error: str = ""


def generate(report_id: int) -> Outcome:
    """Build the numbers and files of a report, once (claimed); then it awaits delivery."""
    now = timezone.now()
    claimed = _claim(
        report_id,
        [ReportStatus.QUEUED, ReportStatus.FAILED],
        ReportStatus.GENERATING,
        now,
        stale_ok=True,
    )
    if not claimed:
        status = Report.objects.filter(pk=report_id).values_list("status", flat=True).first()
        return Outcome(False, status or "missing")
    injected_pause("REPORT_GENERATE_DELAY_S")
    report = Report.objects.select_related("schedule").get(pk=report_id)
    schedule = report.schedule
    try:
        numbers = content.build_numbers(schedule, report.period)
        files = render_files(numbers, schedule.formats)
    except Exception as exc:
        logger.exception("report %s: generation failed", report_id)
        error = f"{type(exc).__name__}: {exc}"
        Report.objects.filter(pk=report_id, status=ReportStatus.GENERATING).update(
            status=ReportStatus.FAILED, error=error, claimed_at=None
        )
        return Outcome(False, ReportStatus.FAILED, error)
    stem = f"{slug(schedule.name)}-{report.period.start:%Y%m%d}-{report.period.end:%Y%m%d}"
    with transaction.atomic():
        for field_name, (extension, data) in files.items():
            getattr(report, field_name).save(f"{stem}.{extension}", ContentFile(data), save=False)
        report.numbers = numbers
        audience = deliverable(schedule) if report.deliver else None
        report.recipients = list(audience.allowed) if audience else []
        report.withheld_recipients = list(audience.withheld) if audience else []
        report.generated_at = timezone.now()
        report.status = ReportStatus.GENERATED
        report.error = ""
        report.claimed_at = None
        report.save()
    return Outcome(True, ReportStatus.GENERATED)


def slug(text: str) -> str:
    from django.utils.text import slugify

    return slugify(text)[:60] or "report"


def render_files(numbers: dict, formats: list[str]) -> dict[str, tuple[str, bytes]]:
    """The file fields of a report → (extension, bytes), for the formats chosen."""
    files: dict[str, tuple[str, bytes]] = {}
    if ReportFormat.XLSX in formats:
        files["xlsx_file"] = ("xlsx", render.render_xlsx(numbers))
    if ReportFormat.CSV in formats:
        files["csv_file"] = ("csv", render.render_csv(numbers))
    if ReportFormat.PRINT_HTML in formats:
        html = render.render_html(numbers, mode="print")
        files["html_file"] = ("html", html.encode("utf-8"))
    return files


# -- delivery ----------------------------------------------------------------------------------


def needs_delivery(report: Report) -> bool:
    return report.deliver and bool(report.recipients)


def report_url(report: Report) -> str:
    return settings.FLEETWISE_BASE_URL.rstrip("/") + reverse(
        "reports:report-detail", args=[report.pk]
    )


class ReportEmail(EmailMultiAlternatives):
    """multipart/mixed [ multipart/related [ alternative [text, html], chart PNGs ], files ]:
    the charts sit beside the HTML that cites them (cid:), the files stay real attachments."""

    inline_images: dict[str, bytes]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inline_images = {}

    def _create_alternatives(self, msg):
        msg = super()._create_alternatives(msg)
        if not self.inline_images:
            return msg
        related = SafeMIMEMultipart(
            _subtype="related", encoding=self.encoding or settings.DEFAULT_CHARSET
        )
        related.attach(msg)
        for cid, png in self.inline_images.items():
            image = MIMEImage(png, "png")
            image.add_header("Content-ID", f"<{cid}>")
            image.add_header("Content-Disposition", "inline", filename=cid.split("@")[0] + ".png")
            related.attach(image)
        return related


def build_message(report: Report) -> ReportEmail:
    """The e-mail: text + HTML body with inline chart images (CID), the files attached."""
    numbers = report.numbers
    schedule = report.schedule
    formats = schedule.formats
    url = report_url(report)
    # One line whatever the stored name holds: a line break in a header fails the whole send.
    subject = one_line(f"{schedule.name}: {report.period_label}", SUBJECT_MAX_CHARS)
    message = ReportEmail(
        subject=subject,
        body=render.render_text(numbers, url),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=report.recipients,
    )
    if ReportFormat.HTML_EMAIL in formats:
        charts = render_charts(numbers)
        message.attach_alternative(
            render.render_html(numbers, mode="email", charts=charts, report_url=url), "text/html"
        )
        message.inline_images = {render.chart_cid(name): png for name, png in charts.items()}
    media_types = {
        "xlsx_file": render.XLSX_MEDIA_TYPE,
        "csv_file": "text/csv",
        "html_file": "text/html",
    }
    for field_name, media_type in media_types.items():
        file = getattr(report, field_name)
        if file:
            with file.open("rb") as handle:
                message.attach(file.name.rsplit("/", 1)[-1], handle.read(), media_type)
    return message


def deliver(report_id: int) -> Outcome:
    """Send the report's e-mail once. A failure is recorded (status delivery_failed + error)
    and the caller retries; a report already sending or delivered is left alone."""
    now = timezone.now()
    report = Report.objects.select_related("schedule").filter(pk=report_id).first()
    if report is None:
        return Outcome(False, "missing")
    _withhold_unseeing(report)
    if not needs_delivery(report):
        return Outcome(False, report.status)
    if not _claim(
        report_id,
        [ReportStatus.GENERATED, ReportStatus.DELIVERY_FAILED],
        ReportStatus.SENDING,
        now,
        delivery_attempts=F("delivery_attempts") + 1,
    ):
        status = Report.objects.filter(pk=report_id).values_list("status", flat=True).first()
        return Outcome(False, status or "missing")
    try:
        message = build_message(report)
    except Exception as exc:  # nothing was sent: record why instead of staying "sending"
        why = f"The e-mail could not be built: {type(exc).__name__}: {exc}"
        return _delivery_failed(report_id, why)
    try:
        message.send(fail_silently=False)
    except (*DELIVERY_ERRORS, *UNWRITABLE_MESSAGE) as exc:
        return _delivery_failed(report_id, f"{type(exc).__name__}: {exc}")
    Report.objects.filter(pk=report_id, status=ReportStatus.SENDING).update(
        status=ReportStatus.DELIVERED, delivered_at=timezone.now(), error="", claimed_at=None
    )
    return Outcome(True, ReportStatus.DELIVERED)


def _delivery_failed(report_id: int, error: str) -> Outcome:
    logger.warning("report %s: delivery failed: %s", report_id, error)
    Report.objects.filter(pk=report_id, status=ReportStatus.SENDING).update(
        status=ReportStatus.DELIVERY_FAILED, error=error, claimed_at=None
    )
    return Outcome(False, ReportStatus.DELIVERY_FAILED, error)


def _withhold_unseeing(report: Report) -> None:
    """Drop the recipients who may no longer see the report (a role or team changed since it
    was generated), naming them, before anything is sent."""
    if not report.recipients:
        return
    audience = still_deliverable(report.recipients, report.schedule)
    if not audience.withheld:
        return
    report.recipients = list(audience.allowed)
    report.withheld_recipients = [*report.withheld_recipients, *audience.withheld]
    Report.objects.filter(pk=report.pk).update(
        recipients=report.recipients, withheld_recipients=report.withheld_recipients
    )


def retry_delivery(report: Report) -> bool:
    """Queue another delivery of a failed (or stuck sending) report; False if not applicable."""
    stuck = Q(status=ReportStatus.SENDING, claimed_at__lt=timezone.now() - STALE_CLAIM)
    updated = Report.objects.filter(
        Q(status=ReportStatus.DELIVERY_FAILED) | stuck, pk=report.pk
    ).update(status=ReportStatus.DELIVERY_FAILED)
    if updated:
        # By task name: services sit below the tasks that call them.
        transaction.on_commit(lambda: send_task("reports.deliver_report", report.pk), robust=True)
    return bool(updated)


def preview(schedule: ReportSchedule, period: periods.Period) -> str:
    """The report of ``period`` as a print page, computed now and stored nowhere."""
    return render.render_html(content.build_numbers(schedule, period), mode="print")
