"""Evaluate rules and raise, clear, notify and acknowledge their events.

A rule fires once per crossing: *ok → firing* opens an event and sends one e-mail; the event
stays active while the figure stays across; *firing → ok* clears it; only a new crossing
opens the next. Without data the rule is *no data* and its open event stays as it was.
"""

from __future__ import annotations

import datetime as dt
import logging
import smtplib

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils import timezone

from alerts.authorization import deliverable
from alerts.metrics import Reading, read
from alerts.models import MONEY_METRICS, AlertEvent, AlertRule, Direction, RuleState
from engine.text import one_line

logger = logging.getLogger(__name__)
MAIL_ERRORS = (smtplib.SMTPException, OSError)


def crossed(rule: AlertRule, value: float) -> bool:
    if rule.direction == Direction.BELOW:
        return value < rule.threshold
    return value > rule.threshold


def describe(rule: AlertRule, value: float) -> str:
    """“train-hetero: utilization 42.0 % falls below 60.0 % (7 days)”."""
    if rule.metric in MONEY_METRICS:
        shown, limit = f"{value:,.0f} {rule.currency}", f"{rule.threshold:,.0f} {rule.currency}"
    else:
        shown, limit = f"{value:.1%}", f"{rule.threshold:.1%}"
    verb, days = rule.get_direction_display(), rule.window_days
    return f"{rule.name}: {rule.get_metric_display()} {shown} {verb} {limit} ({days} days)"


def evaluate(rule: AlertRule, now: dt.datetime | None = None) -> AlertEvent | None:
    """Read the rule's figure and move its state; the event it fired, if any."""
    now = now or timezone.now()
    reading = read(rule, now)
    with transaction.atomic():
        rule = AlertRule.objects.select_for_update().get(pk=rule.pk)
        event = _transition(rule, reading, now)
        rule.last_value, rule.last_evaluated_at = reading.value, now
        rule.last_reason = reading.reason[:300]
        rule.save(update_fields=["state", "last_value", "last_reason", "last_evaluated_at"])
    if event is not None:
        transaction.on_commit(lambda: notify(event.pk), robust=True)
    return event


def _transition(rule: AlertRule, reading: Reading, now: dt.datetime) -> AlertEvent | None:
    if not reading.has_data:
        # No data is not a crossing and not a clearing: an open event stays open.
        if rule.state != RuleState.FIRING:
            rule.state = RuleState.NO_DATA
        return None
    value = float(reading.value)
    if not crossed(rule, value):
        if rule.state == RuleState.FIRING:
            rule.events.filter(cleared_at__isnull=True).update(cleared_at=now)
        rule.state = RuleState.OK
        return None
    if rule.state == RuleState.FIRING:
        return None
    rule.state = RuleState.FIRING
    return AlertEvent.objects.create(
        rule=rule, value=value, message=describe(rule, value)[:500], fired_at=now
    )


def evaluate_all(now: dt.datetime | None = None) -> int:
    """Every enabled rule once; the number of events fired."""
    fired = 0
    for rule in AlertRule.objects.filter(enabled=True).order_by("pk"):
        try:
            fired += evaluate(rule, now) is not None
        except Exception as exc:  # one broken rule must not stop the others
            logger.exception("alert rule %s: evaluation failed", rule.pk)
            reason = f"Evaluation failed: {exc}"[:300]
            AlertRule.objects.filter(pk=rule.pk).update(last_reason=reason)
    return fired


def notify(event_id: int) -> bool:
    """E-mail an event once to those of its rule's recipients who may see the rule now
    (`alerts.authorization.deliverable`); the others are named in ``notify_error``."""
    event = AlertEvent.objects.select_related("rule").filter(pk=event_id).first()
    if event is None or event.notified_at is not None or not event.rule.recipients:
        return False
    recipients = deliverable(event.rule)
    withheld = "Withheld from " + "; ".join(recipients.withheld) if recipients.withheld else ""
    if not recipients.allowed:
        AlertEvent.objects.filter(pk=event_id).update(notify_error=withheld[:500])
        return False
    message = EmailMessage(
        # One line whatever the rule's name holds: a line break in a header fails the send.
        subject=one_line(f"[Fleetwise alert] {event.message}", 250),
        body=_body(event),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(recipients.allowed),
    )
    try:
        message.send(fail_silently=False)
    except (*MAIL_ERRORS, ValueError) as exc:  # ValueError: a message Django cannot write
        AlertEvent.objects.filter(pk=event_id).update(notify_error=f"{type(exc).__name__}: {exc}")
        return False
    AlertEvent.objects.filter(pk=event_id).update(
        notified_at=timezone.now(), notify_error=withheld[:500]
    )
    return True


def _body(event: AlertEvent) -> str:
    return (
        f"{event.message}\n\nFired at {event.fired_at:%Y-%m-%d %H:%M} UTC. "
        "You get one e-mail per crossing; the next comes only after the figure has cleared "
        "and crossed again.\n"
    )


def acknowledge(event: AlertEvent, user) -> bool:
    """Mark an event seen; False when it already was."""
    updated = AlertEvent.objects.filter(pk=event.pk, acknowledged_at__isnull=True).update(
        acknowledged_at=timezone.now(), acknowledged_by=user
    )
    return bool(updated)
