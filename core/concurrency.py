"""ETag and If-Match on API reads and updates, so a client cannot overwrite a change it never saw.

The ETag is a strong validator of one object's representation (a hash of its serialized data
and, where the model has one, its ``version``). A PUT or PATCH with an ``If-Match`` that does
not match gets 412 naming who changed the object and when; without ``If-Match`` the update is
applied as before (existing clients keep working; docs/export.md). The check and the save
share one transaction. A versioned model (`inventory.models.VersionedModel`) is claimed at its
version by a conditional UPDATE, which serializes concurrent updates on PostgreSQL and SQLite
alike; other models are locked with SELECT … FOR UPDATE and compared again (PostgreSQL; on
SQLite, a file-locked database, the window between the check and the write stays open).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.utils.http import parse_etags, quote_etag
from rest_framework import status
from rest_framework.response import Response


def representation_etag(data, version) -> str:
    """A strong ETag of one object's serialized data and version."""
    text = json.dumps(data, sort_keys=True, cls=DjangoJSONEncoder)
    digest = hashlib.sha256(f"{version}|{text}".encode()).hexdigest()[:32]
    return quote_etag(digest)


def if_match_holds(header: str, current_etag: str) -> bool:
    """RFC 9110 If-Match: "*" or a strong match of one of the listed tags (weak never match)."""
    tags = parse_etags(header)
    return "*" in tags or current_etag in tags


def claim(model: type[models.Model], pk: Any, opened_version: int) -> bool:
    """Lock the row if it is still at `opened_version`; call inside the saving transaction."""
    rows = model._base_manager.filter(pk=pk, version=opened_version)
    return rows.update(version=opened_version) == 1


def last_change(instance: models.Model) -> tuple[str, datetime | None]:
    """Who saved the object last and when: its history (django-simple-history) if it has one."""
    history = getattr(instance, "history", None)
    if history is None:
        return "someone else", getattr(instance, "updated", None)
    record = history.select_related("history_user").order_by("-history_date").first()
    if record is None:
        return "someone else", None
    user = record.history_user
    return (user.get_username() if user else "system"), record.history_date


def _is_versioned(instance: models.Model) -> bool:
    return any(field.name == "version" for field in instance._meta.concrete_fields)


class ConditionalUpdateMixin:
    """ETag on GET/PUT/PATCH of one object of a ModelViewSet; If-Match checked on updates."""

    def _etag(self, instance, data=None) -> str:
        if data is None:
            data = self.get_serializer(instance).data
        return representation_etag(data, getattr(instance, "version", ""))

    def retrieve(self, request, *args, **kwargs):
        instance = self.get_object()
        data = self.get_serializer(instance).data
        return Response(data, headers={"ETag": self._etag(instance, data)})

    def update(self, request, *args, **kwargs):
        partial = kwargs.pop("partial", False)
        with transaction.atomic():
            instance = self.checked_for_update(self.get_object())
            if isinstance(instance, Response):
                return instance
            serializer = self.get_serializer(instance, data=request.data, partial=partial)
            serializer.is_valid(raise_exception=True)
            self.perform_update(serializer)
        if getattr(instance, "_prefetched_objects_cache", None):
            instance._prefetched_objects_cache = {}
        data = self.get_serializer(instance).data
        return Response(data, headers={"ETag": self._etag(instance, data)})

    def checked_for_update(self, instance):
        """The object to update, locked, when If-Match is absent or holds; else the 412.

        Call inside the updating transaction: the lock lasts until it ends.
        """
        if_match = self.request.headers.get("If-Match")
        if if_match is None:
            return instance
        model = type(instance)
        if _is_versioned(instance):
            holds = if_match_holds(if_match, self._etag(instance))
            if holds and claim(model, instance.pk, instance.version):
                return instance
            return self._precondition_failed()
        # No ordering: a Meta.ordering across a relation would join, and FOR UPDATE refuses.
        rows = model._base_manager.select_for_update(of=("self",)).filter(pk=instance.pk)
        list(rows.order_by().values_list("pk"))
        instance = self.get_object()  # read again under the lock
        if if_match_holds(if_match, self._etag(instance)):
            return instance
        return self._precondition_failed()

    def _precondition_failed(self) -> Response:
        fresh = self.get_object()
        user, when = last_change(fresh)
        at = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if when else "an unknown time"
        name = type(fresh)._meta.verbose_name
        detail = (
            f"The {name} “{fresh}” was changed by {user} at {at} since your copy: If-Match "
            "does not match its current ETag. Read it again (GET), reapply your change and retry."
        )
        headers = {"ETag": self._etag(fresh)}
        return Response(
            {"detail": detail}, status=status.HTTP_412_PRECONDITION_FAILED, headers=headers
        )
