"""What the API of every live source (core.live_sources) shares: a write-only token stored
encrypted, settings saved field by field beside a running read, credentials never shown back,
and "read now" (accounting.api.slurmrestd, telemetry.api.kubernetes)."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers, status
from rest_framework.response import Response

from accounting.live_source_runs import queue_run
from core.jobs.status import JobStatus
from core.logredact import redact
from core.outbound import without_credentials

# The fields of a read and of the source's health, in the order the API shows them.
RUN_STATUS = (
    "has_token", "status", "progress", "error", "queued_at", "started_at", "finished_at",
    "window_start", "window_end", "last_success_at", "last_failure_at", "last_error",
    "consecutive_failures", "next_attempt_at",
)  # fmt: skip


class LiveSourceSerializer(serializers.ModelSerializer):
    """A subclass declares ``token`` (with its own pattern) and its Meta."""

    # Settings whose change ends a back-off: the next minute's schedule tries them.
    RECONNECT: ClassVar[frozenset[str]] = frozenset()

    has_token = serializers.BooleanField(read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["url"] = without_credentials(data["url"])  # never shown, however it was stored
        data["error"] = redact(data["error"] or "")
        data["last_error"] = redact(data["last_error"] or "")
        return data

    def create(self, validated_data: dict[str, Any]) -> Any:
        token = validated_data.pop("token", None)
        source = self.Meta.model(**validated_data)
        source.set_token(token)
        source.save()
        return source

    def update(self, instance: Any, validated_data: dict[str, Any]) -> Any:
        """Only the fields sent are saved: a read may be writing its own fields meanwhile."""
        token = validated_data.pop("token", None)
        for name, value in validated_data.items():
            setattr(instance, name, value)
        changed = [*validated_data, "updated"]
        if token is not None:
            instance.set_token(token)
            changed.append("token_encrypted")
        if token is not None or set(validated_data) & self.RECONNECT:
            instance.next_attempt_at = None  # new credentials or address: no back-off wait
            changed.append("next_attempt_at")
        instance.save(update_fields=changed)
        return instance


def read_now(viewset: Any, what: str) -> Response:
    """Queue a read whatever the schedule or back-off says; 409 while one runs."""
    source = viewset.get_object()
    if source.status == JobStatus.RUNNING:
        return Response({"detail": f"A {what} is running."}, status=status.HTTP_409_CONFLICT)
    queue_run(source)
    source.refresh_from_db()
    return Response(viewset.get_serializer(source).data, status=status.HTTP_202_ACCEPTED)
