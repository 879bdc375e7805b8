"""Deleting the files of finished jobs after their retention period (core.retention).

The jobs are the registered job kinds (core.jobs.registry) whose model has file fields: no
app is named here. A job's age is counted from when it finished (or, for a kind without a
finish time, from when it was generated or created); open jobs (queued, running, …) are never
touched. A failed job's files go sooner: nobody downloads a failed export, and a failed
upload is retried within days or not at all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging

from django.conf import settings
from django.db import models, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.jobs.registry import JobKind, kinds, label_of
from core.retention.models import ExpiredFile

logger = logging.getLogger(__name__)

FAILED = "failed"
# The first of these a model has is when its files were last written (newest first).
AGE_FIELDS = ("finished_at", "generated_at", "created", "queued_at")


def retention_days(failed: bool = False) -> float:
    if failed:
        return float(settings.FLEETWISE_FAILED_FILE_RETENTION_DAYS)
    return float(settings.FLEETWISE_FILE_RETENTION_DAYS)


def file_fields(model: type[models.Model]) -> list[str]:
    return [f.name for f in model._meta.concrete_fields if isinstance(f, models.FileField)]


def _stored_at(model: type[models.Model]) -> Coalesce | models.F:
    names = {f.name for f in model._meta.concrete_fields}
    present = [name for name in AGE_FIELDS if name in names]
    return Coalesce(*present) if len(present) > 1 else models.F(present[0])


def _holding_files(model: type[models.Model], fields: list[str]) -> models.Q:
    holding = models.Q()
    for name in fields:
        holding |= ~models.Q(**{name: ""})
    return holding


def due(kind: JobKind, now: dt.datetime) -> list[int]:
    """Ids of the kind's finished jobs that still hold a file past their retention period."""
    model = kind.model
    fields = file_fields(model)
    if not fields:
        return []
    rows = (
        model._base_manager.exclude(status__in=kind.open_statuses)
        .filter(_holding_files(model, fields))
        .annotate(stored_at=_stored_at(model))
    )
    old = models.Q(stored_at__lt=now - dt.timedelta(days=retention_days()))
    failed = models.Q(
        status=FAILED, stored_at__lt=now - dt.timedelta(days=retention_days(failed=True))
    )
    return list(rows.filter(old | failed).order_by("pk").values_list("pk", flat=True))


def _expire_row(kind: JobKind, pk: int, now: dt.datetime) -> int:
    """Clear one job's file fields, record them, delete the files after the commit."""
    model, fields = kind.model, file_fields(kind.model)
    with transaction.atomic():
        row = model._base_manager.select_for_update().filter(pk=pk).first()
        if row is None:
            return 0
        days = retention_days(failed=getattr(row, "status", "") == FAILED)
        gone = [(name, getattr(row, name)) for name in fields if getattr(row, name)]
        for name, file in gone:
            ExpiredFile.objects.update_or_create(
                model_label=label_of(model),
                object_id=pk,
                field=name,
                defaults={
                    "name": file.name,
                    "size_bytes": _size(file),
                    "kept_days": days,
                    "expired_at": now,
                },
            )
        model._base_manager.filter(pk=pk).update(**{name: "" for name, _ in gone})
        names = [(file.storage, file.name) for _, file in gone]
        transaction.on_commit(lambda: _delete_files(names))
    return len(gone)


def _size(file) -> int | None:
    with contextlib.suppress(OSError):
        return int(file.storage.size(file.name))
    return None


def _delete_files(names: list) -> None:
    for storage, name in names:
        try:
            storage.delete(name)
        except OSError:  # left for the orphan sweep, which retries it
            logger.warning("could not delete expired file %s", name, exc_info=True)


def expire_files(now: dt.datetime | None = None) -> dict[str, int]:
    """Delete every file past its retention period; counts deleted files per job model."""
    now = now or timezone.now()
    expired: dict[str, int] = {}
    for kind in kinds():
        for pk in due(kind, now):
            if count := _expire_row(kind, pk, now):
                expired[kind.label] = expired.get(kind.label, 0) + count
    return expired


def expired_file(obj: models.Model, field: str) -> ExpiredFile | None:
    """Why ``obj``'s ``field`` is empty, when the retention task emptied it. A row that still
    holds its file, or is too young to have lost it, costs no query."""
    if getattr(obj, field):
        return None
    names = {f.name for f in type(obj)._meta.concrete_fields}
    times = [getattr(obj, name) for name in AGE_FIELDS if name in names]
    stored_at = next((when for when in times if when is not None), None)
    youngest = timezone.now() - dt.timedelta(days=min(retention_days(), retention_days(True)))
    if stored_at is None or stored_at > youngest:
        return None
    return ExpiredFile.objects.filter(
        model_label=label_of(type(obj)), object_id=obj.pk, field=field
    ).first()
