"""ETag and If-Match on API reads and updates, so a client cannot overwrite a change it never saw.

The ETag is a strong validator of the object's representation (a hash of its serialized data
and version). A PUT or PATCH with an ``If-Match`` that does not match gets 412 naming who
changed the object and when; without ``If-Match`` the update is applied as before (existing
clients keep working; docs/export.md). The check and the save share one transaction and the
row is claimed at its version (`inventory.versioning.claim`), so two concurrent updates with
the same ETag cannot both succeed.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils.http import parse_etags, quote_etag
from rest_framework import status
from rest_framework.response import Response

from inventory.versioning import claim, last_change


def representation_etag(data, version) -> str:
    """A strong ETag of one object's serialized data and version."""
    text = json.dumps(data, sort_keys=True, cls=DjangoJSONEncoder)
    digest = hashlib.sha256(f"{version}|{text}".encode()).hexdigest()[:32]
    return quote_etag(digest)


def if_match_holds(header: str, current_etag: str) -> bool:
    """RFC 9110 If-Match: "*" or a strong match of one of the listed tags (weak never match)."""
    tags = parse_etags(header)
    return "*" in tags or current_etag in tags


class ConditionalUpdateMixin:
    """For a ModelViewSet whose model is an `inventory.models.VersionedModel`."""

    def _etag(self, instance, data=None) -> str:
        if data is None:
            data = self.get_serializer(instance).data
        return representation_etag(data, instance.version)

    def retrieve(self, request, *args, **kwargs):
        instance = self.get_object()
        data = self.get_serializer(instance).data
        return Response(data, headers={"ETag": self._etag(instance, data)})

    def update(self, request, *args, **kwargs):
        partial = kwargs.pop("partial", False)
        if_match = request.headers.get("If-Match")
        with transaction.atomic():
            instance = self.get_object()
            if if_match is not None:
                current = self._etag(instance)
                if not if_match_holds(if_match, current) or not claim(
                    type(instance), instance.pk, instance.version
                ):
                    return self._precondition_failed()
            serializer = self.get_serializer(instance, data=request.data, partial=partial)
            serializer.is_valid(raise_exception=True)
            self.perform_update(serializer)
        if getattr(instance, "_prefetched_objects_cache", None):
            instance._prefetched_objects_cache = {}
        data = self.get_serializer(instance).data
        return Response(data, headers={"ETag": self._etag(instance, data)})

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
