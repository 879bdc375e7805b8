"""Who may save a report schedule, and to whom its reports may go (`access.scoping`'s rule).

A team-scope report is read by that team's users; a fleet, site or cluster report lists every
team's chargeback, so only users who see every team read it. The acting user must see the
schedule's scope; only its owner (or an administrator) changes its recipients; and every
recipient (user or plain address, `access.recipients`) must be someone who may see it. The
reports are filtered again when generated and when sent, since a role or a team can change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from access.recipients import Audience, audience
from access.roles import owner_or_admin
from access.scoping import scope_refusal
from reports.models import ReportSchedule


@dataclass(frozen=True)
class ScheduleCheck:
    """``forbidden``: the user may not do this at all (403); ``errors``: fields to fix (400)."""

    forbidden: str = ""
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipients:
    users: tuple = ()
    addresses: tuple[str, ...] = ()

    def key(self) -> tuple[frozenset[int], frozenset[str]]:
        return (
            frozenset(user.pk for user in self.users),
            frozenset(address.lower() for address in self.addresses),
        )


def stored_recipients(schedule: ReportSchedule) -> Recipients:
    if schedule.pk is None:
        return Recipients()
    return Recipients(
        tuple(schedule.recipient_users.all()), tuple(schedule.recipient_addresses or [])
    )


def check_schedule(
    user,
    *,
    scope: str,
    team: str,
    recipients: Recipients,
    before: ReportSchedule | None = None,
) -> ScheduleCheck:
    """What stops ``user`` saving a schedule of ``scope``/``team`` with ``recipients``."""
    refusal = scope_refusal(user, scope, team)
    if refusal:
        return ScheduleCheck(forbidden=f"{refusal} A report carries its scope's figures.")
    old = stored_recipients(before) if before is not None else Recipients()
    changed = old.key() != recipients.key()
    if before is not None and changed and not owner_or_admin(user, before.owner_id):
        owner = before.owner or "no one"
        return ScheduleCheck(
            forbidden=f"Only the schedule's owner ({owner}) or an administrator changes its "
            "recipients."
        )
    moved = before is None or (before.scope, before.team) != (scope, team)
    if moved or changed:
        withheld = audience(recipients.addresses, recipients.users, scope, team).withheld
        if withheld:
            return ScheduleCheck(errors=_recipient_errors(withheld, recipients))
    return ScheduleCheck()


def _recipient_errors(withheld: Iterable[str], recipients: Recipients) -> dict[str, str]:
    """Each withheld recipient under the field that named it (users or addresses)."""
    user_addresses = {(user.email or "").lower() for user in recipients.users}
    errors: dict[str, list[str]] = {}
    for line in withheld:
        address = line.split(": ", 1)[0].lower()
        name = "recipient_users" if address in user_addresses else "recipient_addresses"
        errors.setdefault(name, []).append(line)
    return {
        name: "Would not get this report: " + "; ".join(lines) for name, lines in errors.items()
    }


def deliverable(schedule: ReportSchedule) -> Audience:
    """The schedule's recipients who may see its reports now, and those withheld."""
    stored = stored_recipients(schedule)
    return audience(stored.addresses, stored.users, schedule.scope, schedule.team)


def still_deliverable(addresses: Iterable[str], schedule: ReportSchedule) -> Audience:
    """A generated report's recipients judged again at sending time."""
    return audience(addresses, [], schedule.scope, schedule.team)
