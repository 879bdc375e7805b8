"""Who may receive an object's e-mail: the same rule as who may read it, failing closed.

An alert or a report goes only to people who may see its scope (``access.scoping.
may_see_scope``): the viewer role and teams that cover it. A recipient *user* is judged by
their account. A plain *address* is judged by the active accounts that hold it (the e-mail
field, case-insensitive): it receives the object only when at least one active account holds
it and every active account holding it may see the scope. An address that no active account
holds is withheld: nobody vouches for who reads it (give a mailing list an account of its
own, with the role and teams it may see). Each withheld recipient is named with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models.functions import Lower

from access.scoping import may_see_scope, scope_label


@dataclass(frozen=True)
class Audience:
    """The addresses an object may go to, and those withheld ("address: why")."""

    allowed: tuple[str, ...]
    withheld: tuple[str, ...]


def audience(
    addresses: Iterable[str], users: Iterable, scope: str, team: str | None = ""
) -> Audience:
    """Split recipient users and plain addresses into allowed and withheld (in order, once)."""
    judged: dict[str, str] = {}  # address → why it is withheld ("" when allowed)
    for user in users:
        address = (user.email or "").strip()
        if address and address.lower() not in {seen.lower() for seen in judged}:
            judged[address] = _user_reason(user, scope, team)
    plain = [address.strip() for address in addresses if address and address.strip()]
    holders = _active_holders(plain)
    for address in plain:
        if address.lower() not in {seen.lower() for seen in judged}:
            judged[address] = _address_reason(
                address, holders.get(address.lower(), []), scope, team
            )
    return Audience(
        allowed=tuple(address for address, why in judged.items() if not why),
        withheld=tuple(f"{address}: {why}" for address, why in judged.items() if why),
    )


def _user_reason(user, scope: str, team: str | None) -> str:
    if not user.is_active:
        return f"the account {user} is inactive"
    if not may_see_scope(user, scope, team):
        return f"the account {user} may not see {scope_label(scope, team)}"
    return ""


def _address_reason(address: str, holders: list, scope: str, team: str | None) -> str:
    if not holders:
        return "no active account holds this address"
    for user in holders:
        if not may_see_scope(user, scope, team):
            return f"the account {user} holding it may not see {scope_label(scope, team)}"
    return ""


def _active_holders(addresses: list[str]) -> dict[str, list]:
    """Lower-cased address → the active accounts whose e-mail it is (one query)."""
    if not addresses:
        return {}
    lowered = {address.lower() for address in addresses}
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .annotate(email_lower=Lower("email"))
        .filter(email_lower__in=lowered)
        .order_by("pk")
    )
    holders: dict[str, list] = {}
    for user in users:
        holders.setdefault(user.email_lower, []).append(user)
    return holders
