"""Deleting clusters and pools without losing measured data by accident.

A cluster or pool that holds measured data (counters the apps above register here: usage
records, serving loads) is never removed at once. :func:`delete` needs the explicit
confirmation :data:`CONFIRM_USAGE` (else :class:`ConfirmationNeeded` names the records, count
and period), then stamps ``deleted_at``, which hides it, its pools and node groups and —
through the managers of the apps above (accounting's ``OfLiveInventory``) — its records on
every page, API and analysis. Nothing cascades, so :func:`restore` (or reverting to an earlier
version in its history) brings all of it back. One without measured data is deleted as any
other object (its history can recreate it, as before). The retention task
(core.retention) calls :func:`purge_deleted`: what was deleted longer ago than
``FLEETWISE_DELETED_RETENTION_DAYS`` is then deleted for good.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from inventory.models import Cluster, Pool, SoftDeletable
from inventory.signals import inventory_hidden, inventory_purging, inventory_restored

logger = logging.getLogger(__name__)

# The value of the ``confirm`` field (form) or query parameter (API) that confirms it.
CONFIRM_USAGE = "delete-usage"


@dataclass(frozen=True)
class Measured:
    """Measured rows hanging off an object: how many, and the period they cover."""

    what: str  # plural, e.g. "usage records"
    count: int
    first: dt.datetime | None = None
    last: dt.datetime | None = None

    def describe(self) -> str:
        """ "1,234 usage records (2024-03-01 to 2024-03-31)"."""
        period = ""
        if self.first is not None and self.last is not None:
            period = f" ({self.first:%Y-%m-%d} to {self.last:%Y-%m-%d})"
        return f"{self.count:,} {self.what}{period}"

    def as_dict(self) -> dict[str, object]:
        return {
            "what": self.what,
            "count": self.count,
            "first": self.first.isoformat() if self.first else None,
            "last": self.last.isoformat() if self.last else None,
        }


# (cluster or pool) -> its measured rows of one kind (None or count 0: none).
MeasuredCounter = Callable[[models.Model], Measured | None]
_COUNTERS: dict[str, MeasuredCounter] = {}


def register_measured(name: str, counter: MeasuredCounter) -> None:
    """Called from an app's ``ready()`` (accounting: usage records, serving loads)."""
    _COUNTERS[name] = counter


def measured_data(obj: models.Model) -> list[Measured]:
    found = (counter(obj) for counter in _COUNTERS.values())
    return [measured for measured in found if measured is not None and measured.count]


def retention_days() -> float:
    return float(settings.FLEETWISE_DELETED_RETENTION_DAYS)


def kept_until(obj: SoftDeletable) -> dt.datetime:
    """When a deleted object is purged (from now, for one not deleted yet)."""
    return (obj.deleted_at or timezone.now()) + dt.timedelta(days=retention_days())


def label(obj: models.Model) -> str:
    """Its name, marked when it is deleted (a blocker a user no longer sees in lists)."""
    deleted_at = getattr(obj, "deleted_at", None)
    if deleted_at is None:
        return str(obj)
    return f"{obj} (deleted; restorable until {kept_until(obj):%Y-%m-%d})"


def listed(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


class ConfirmationNeeded(Exception):
    """Deleting would hide measured data: the caller must confirm with CONFIRM_USAGE."""

    def __init__(self, obj: models.Model, measured: list[Measured]) -> None:
        self.obj, self.measured = obj, measured
        name = type(obj)._meta.verbose_name
        self.message = (
            f"{str(name).capitalize()} “{obj}” holds "
            f"{listed([m.describe() for m in measured])}. Deleting it deletes them with it: "
            f"they can be restored from its history until {kept_until(obj):%Y-%m-%d} "
            "and are then deleted for good."
        )
        super().__init__(self.message)


class RestoreRefused(Exception):
    """The object cannot be brought back as it is (a clash, or its cluster is deleted)."""


def _cluster_id(obj: SoftDeletable) -> int:
    return obj.pk if isinstance(obj, Cluster) else obj.cluster_id


def delete(
    obj: SoftDeletable, *, user: AbstractBaseUser | None = None, confirm: str | None = None
) -> bool:
    """Delete a cluster or pool; True when it was soft-deleted (it held measured data: hidden
    with all that hangs off it, restorable until purged), False when deleted outright (it held
    none: nothing measured is lost, and its history can still recreate it). Raises
    :class:`ConfirmationNeeded` when it holds measured data and ``confirm`` is not
    :data:`CONFIRM_USAGE`, and ProtectedError when something still points at it."""
    with transaction.atomic():
        measured = measured_data(obj)
        if not measured:
            if user is not None:
                obj._history_user = user
            obj.delete()
            return False
        if confirm != CONFIRM_USAGE:
            raise ConfirmationNeeded(obj, measured)
        obj.deleted_at = timezone.now()
        obj._change_reason = f"Deleted; restorable until {kept_until(obj):%Y-%m-%d}"
        if user is not None:
            obj._history_user = user
        obj.save()
        inventory_hidden.send(type(obj), instance=obj, cluster_id=_cluster_id(obj))
    return True


def check_restorable(obj: SoftDeletable) -> None:
    """Raise :class:`RestoreRefused` when ``obj`` cannot come back as it is."""
    if isinstance(obj, Pool):
        cluster = Cluster.all_objects.filter(pk=obj.cluster_id).first()
        if cluster is not None and cluster.deleted_at is not None:
            raise RestoreRefused(f"Its cluster “{cluster}” is deleted: restore the cluster first.")
    try:
        obj.validate_constraints()
    except ValidationError as exc:
        raise RestoreRefused(" ".join(exc.messages)) from exc


def restore(obj: SoftDeletable, *, user: AbstractBaseUser | None = None) -> None:
    """Bring a deleted cluster or pool back, with its pools, node groups and usage records."""
    if obj.deleted_at is None:
        return
    obj.deleted_at = None
    check_restorable(obj)
    obj._change_reason = "Restored"
    if user is not None:
        obj._history_user = user
    with transaction.atomic():
        obj.save()
        announce_restored(obj)


def announce_restored(obj: SoftDeletable) -> None:
    """Tell the apps above (accounting rebuilds the cluster's usage rollups)."""
    inventory_restored.send(type(obj), instance=obj, cluster_id=_cluster_id(obj))


def _purge_one(obj: SoftDeletable) -> bool:
    try:
        with transaction.atomic():
            inventory_purging.send(type(obj), instance=obj, cluster_id=_cluster_id(obj))
            obj.delete()
    except ProtectedError as exc:
        names = ", ".join(sorted({str(o) for o in exc.protected_objects})[:5])
        logger.warning("deleted %s %s not purged: still used by %s", type(obj).__name__, obj, names)
        return False
    return True


def purge_deleted(now: dt.datetime | None = None) -> dict[str, int]:
    """Delete for good the clusters and pools deleted before the retention period."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=retention_days())
    purged: dict[str, int] = {}
    for model in (Pool, Cluster):  # a pool of a cluster purged below goes with it anyway
        for obj in model.all_objects.filter(deleted_at__lt=cutoff).order_by("pk"):
            if _purge_one(obj):
                key = str(model._meta.verbose_name_plural)
                purged[key] = purged.get(key, 0) + 1
    return purged
