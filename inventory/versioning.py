"""Optimistic locking of inventory objects: an edit names the version it started from.

Every save raises ``version`` (`inventory.models.VersionedModel`). An edit first claims the
row at the version it was opened at (`core.concurrency.claim`), in the same transaction as
its save: a conditional UPDATE that matches no row when someone saved in between (PostgreSQL
waits for a concurrent writer's commit, SQLite for the write lock), so a stale edit is refused
instead of silently reverting the other one. The history (django-simple-history) says who
changed what since.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import models

from core.concurrency import last_change


@dataclass(frozen=True)
class FieldConflict:
    name: str
    label: str
    theirs: str
    yours: str
    # False when your form still held the value you opened: theirs can be kept, no clash.
    yours_changed: bool = True


@dataclass(frozen=True)
class Conflict:
    """What happened to an object since an edit of it was opened."""

    object_label: str
    user: str
    when: datetime | None
    current_version: int
    fields: list[FieldConflict]

    @property
    def message(self) -> str:
        when = self.when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if self.when else "?"
        return f"{self.object_label} was changed by {self.user} at {when} since you opened it."


def shown(field: models.Field, value: Any) -> str:
    """A value as a person reads it: related object names, choice labels, "—" for empty."""
    if value is None or value == "":
        return "—"
    if isinstance(field, models.ForeignKey):
        if isinstance(value, models.Model):
            return str(value)
        related = field.related_model._base_manager.filter(pk=value).first()
        return str(related) if related is not None else f"#{value} (deleted)"
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(field, models.BooleanField):
        return "yes" if value else "no"
    return str(value)


def conflict_since(
    current: models.Model, opened_version: int, yours: dict[str, Any], label: str
) -> Conflict:
    """The fields of `yours` that others changed since `opened_version`, theirs beside yours.

    Without a history row of the opened version (older than the history), every field whose
    stored value differs from yours is listed, as changed by you too.
    """
    model = type(current)
    snapshot = current.history.filter(version=opened_version).order_by("-history_date").first()
    fields = []
    for name, value in yours.items():
        field = model._meta.get_field(name)
        stored = getattr(current, field.attname)
        raw = value.pk if isinstance(value, models.Model) else value
        if snapshot is None:
            changed, yours_changed = shown(field, value) != shown(field, stored), True
        else:
            before = getattr(snapshot, field.attname)
            changed, yours_changed = stored != before, raw != before
        if changed:
            theirs = getattr(current, name) if field.is_relation else stored
            text = str(field.verbose_name)
            fields.append(
                FieldConflict(
                    name,
                    text[:1].upper() + text[1:],
                    shown(field, theirs),
                    shown(field, value),
                    yours_changed,
                )
            )
    user, when = last_change(current)
    return Conflict(label, user, when, current.version, fields)
