"""Audit history of inventory objects: each change with its field diff, and reverting to one.

django-simple-history writes a historical row on every save and delete (forms, API, bulk
import, admin), with the user taken from the request (HistoryRequestMiddleware).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from inventory.deletion import RestoreRefused, announce_restored, check_restorable
from inventory.forms import FIELD_LABELS
from inventory.models import Cluster, Pool, SoftDeletable

# Set by save(): shown in the history, not something a user reverts.
UNDIFFED_FIELDS = ("created", "updated", "version")
TYPE_LABELS = {"+": "Created", "~": "Changed", "-": "Deleted"}


class RevertRefused(Exception):
    """The version cannot be restored as it is (a rule or a clash); nothing was saved."""


@dataclass(frozen=True)
class FieldChange:
    field: str
    label: str
    before: str
    after: str


@dataclass(frozen=True)
class HistoryEntry:
    record: models.Model
    type_label: str
    changes: list[FieldChange]
    is_current: bool

    @property
    def user_label(self) -> str:
        user = self.record.history_user
        return user.get_username() if user else "system"


def _label(model: type[models.Model], name: str) -> str:
    text = FIELD_LABELS.get(name) or str(model._meta.get_field(name).verbose_name)
    return text[:1].upper() + text[1:]


def _diffed_fields(model: type[models.Model]) -> list[models.Field]:
    fields = model._meta.concrete_fields
    return [f for f in fields if not f.primary_key and f.name not in UNDIFFED_FIELDS]


class _Shown:
    """Field values as a person reads them: choice labels, related names, "—" for empty."""

    def __init__(self, model: type[models.Model], records: list) -> None:
        self.names: dict[tuple[type, Any], str] = {}
        for fk in (f for f in _diffed_fields(model) if isinstance(f, models.ForeignKey)):
            ids = {getattr(r, fk.attname) for r in records} - {None}
            related = fk.related_model.objects.filter(pk__in=ids)
            for obj in related.select_related(*self._path(fk.related_model)):
                self.names[(fk.related_model, obj.pk)] = self._full_name(obj)

    @staticmethod
    def _path(model: type[models.Model]) -> list[str]:
        return {Cluster: ["site"], Pool: ["cluster__site"]}.get(model, [])

    @staticmethod
    def _full_name(obj: models.Model) -> str:
        if isinstance(obj, Pool):
            return f"{obj.cluster.site.name} / {obj.cluster.name} / {obj.name}"
        return str(obj)

    def __call__(self, field: models.Field, record) -> str:
        value = getattr(record, field.attname)
        if value is None or value == "":
            return "—"
        if isinstance(field, models.ForeignKey):
            return self.names.get((field.related_model, value), f"#{value} (deleted)")
        if field.choices:
            return str(dict(field.flatchoices).get(value, value))
        if isinstance(field, models.BooleanField):
            return "yes" if value else "no"
        return str(value)


def _type_label(record, previous) -> str:
    """Created, Changed, Deleted (also a soft delete: ``deleted_at`` set), Restored."""
    deleted_now = getattr(record, "deleted_at", None) is not None
    deleted_before = previous is not None and getattr(previous, "deleted_at", None) is not None
    if record.history_type == "~" and deleted_now != deleted_before:
        return "Deleted" if deleted_now else "Restored"
    return TYPE_LABELS.get(record.history_type, record.history_type)


def history_entries(model: type[models.Model], pk: int) -> list[HistoryEntry]:
    """Every recorded version of one object, newest first, each diffed against the one before."""
    records = list(
        model.history.filter(id=pk)
        .select_related("history_user")
        .order_by("history_date", "history_id")
    )
    shown = _Shown(model, records)
    fields = _diffed_fields(model)
    entries = []
    previous = None
    for record in records:
        changes = []
        for field in fields:
            after = shown(field, record)
            before = shown(field, previous) if previous is not None else "—"
            if previous is None and record.history_type == "+" and after == "—":
                continue  # a new object: list only the fields it was given
            if previous is None or getattr(previous, field.attname) != getattr(
                record, field.attname
            ):
                changes.append(FieldChange(field.name, _label(model, field.name), before, after))
        entries.append(
            HistoryEntry(
                record=record,
                type_label=_type_label(record, previous),
                changes=changes,
                is_current=False,
            )
        )
        previous = record
    if entries and records[-1].history_type != "-":
        last = entries[-1]
        entries[-1] = HistoryEntry(last.record, last.type_label, last.changes, is_current=True)
    entries.reverse()
    return entries


def revert_to(record, user) -> models.Model:
    """Restore the object to `record`'s values; the restore is itself a new history entry.

    A deleted cluster or pool (soft-deleted, inventory.deletion) comes back with its pools,
    node groups and usage records: a revert always leaves the object live, never deleted.
    An object deleted for good is recreated (its children, deleted with it, are not).
    Raises RevertRefused when today's rules or another object refuse those values.
    """
    instance = record.instance
    model = type(instance)
    stored = model._base_manager.filter(pk=instance.pk).first()
    # An existing row is updated in place (and keeps its creation time).
    instance._state.adding = stored is None
    was_deleted = getattr(stored, "deleted_at", None) is not None
    if isinstance(instance, SoftDeletable):
        instance.deleted_at = None
        try:
            check_restorable(instance)
        except RestoreRefused as exc:
            raise RevertRefused(str(exc)) from exc
    try:
        instance.full_clean()
    except ValidationError as exc:
        raise RevertRefused(_describe(model, exc)) from exc
    when = record.history_date.strftime("%Y-%m-%d %H:%M:%S")
    instance._change_reason = f"Reverted to the version of {when} UTC"[:100]
    instance._history_user = user
    try:
        with transaction.atomic():
            instance.save()
            if was_deleted:
                announce_restored(instance)
    except IntegrityError as exc:
        raise RevertRefused(f"The database refused the old values ({exc}).") from exc
    return instance


def _describe(model: type[models.Model], exc: ValidationError) -> str:
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    parts = []
    for name, messages in exc.message_dict.items():
        label = "" if name == "__all__" else f"{_label(model, name)}: "
        parts.append(label + " ".join(messages))
    return "This version cannot be restored: " + "; ".join(parts)
