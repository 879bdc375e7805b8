"""Who may save an alert rule, and to whom it may be e-mailed (the rule of `access.scoping`).

A rule is read by whoever may see its scope: a team rule by that team's users, any other
scope by users who see every team. So a user creates or edits only rules of scopes they may
see, only the rule's owner (or an administrator) changes its recipients, and every recipient
must be someone who may see the rule (`access.recipients`); delivery filters them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from access.recipients import audience
from access.roles import owner_or_admin
from access.scoping import scope_refusal
from alerts.models import AlertRule


@dataclass(frozen=True)
class RuleCheck:
    """``forbidden``: the user may not do this at all (403); ``errors``: fields to fix (400)."""

    forbidden: str = ""
    errors: dict[str, str] = field(default_factory=dict)


def check_rule(
    user, *, scope: str, team: str, recipients: list[str], before: AlertRule | None = None
) -> RuleCheck:
    """What stops ``user`` saving a rule of ``scope``/``team`` with ``recipients`` (``before``:
    the stored rule when editing, which the user already may see)."""
    refusal = scope_refusal(user, scope, team)
    if refusal:
        return RuleCheck(forbidden=f"{refusal} A rule's e-mail carries its figures.")
    changed = before is not None and _changed(before.recipients, recipients)
    if changed and not owner_or_admin(user, before.created_by_id):
        owner = before.created_by or "no one"
        return RuleCheck(
            forbidden=f"Only the rule's owner ({owner}) or an administrator changes its recipients."
        )
    moved = before is None or (before.scope, before.team) != (scope, team)
    if moved or changed:
        withheld = audience(recipients, [], scope, team).withheld
        if withheld:
            return RuleCheck(
                errors={"recipients": "Would not get this rule: " + "; ".join(withheld)}
            )
    return RuleCheck()


def _changed(old: list[str] | None, new: list[str] | None) -> bool:
    return sorted(a.lower() for a in old or []) != sorted(a.lower() for a in new or [])


def deliverable(rule: AlertRule):
    """The rule's recipients who may see it now (`access.recipients.Audience`)."""
    return audience(rule.recipients or [], [], rule.scope, rule.team)
