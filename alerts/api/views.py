"""Alerts API: /api/v1/alert-rules/ (planners write) and /api/v1/alert-events/ (read,
acknowledge). A team-scoped user sees only its teams' team rules and their events."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from access.roles import PLANNER, VIEWER
from alerts import selectors, services
from alerts.api.serializers import AlertEventSerializer, AlertRuleSerializer
from alerts.models import AlertEvent, AlertRule
from core.tabular.exporting import TabularListMixin


class AlertRuleViewSet(TabularListMixin, viewsets.ModelViewSet):
    queryset = AlertRule.objects.none()
    serializer_class = AlertRuleSerializer
    filterset_fields = ["metric", "scope", "state", "enabled", "team"]
    ordering_fields = ["name", "created", "last_evaluated_at"]
    ordering = ["name"]
    read_role = VIEWER
    write_role = PLANNER

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AlertRule.objects.none()
        return selectors.rules_for(self.request.user)

    def perform_create(self, serializer) -> None:
        serializer.save(created_by=self.request.user)


class AlertEventViewSet(
    TabularListMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = AlertEvent.objects.none()
    serializer_class = AlertEventSerializer
    filterset_fields = ["rule"]
    ordering_fields = ["fired_at"]
    ordering = ["-fired_at"]
    read_role = VIEWER
    write_role = PLANNER

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AlertEvent.objects.none()
        events = selectors.events_for(self.request.user)
        active = self.request.query_params.get("active")
        if active in ("true", "false"):
            events = events.filter(cleared_at__isnull=active == "true")
        return events

    @extend_schema(request=None, responses={200: AlertEventSerializer})
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        """Mark the event seen (idempotent)."""
        event = self.get_object()
        services.acknowledge(event, request.user)
        event.refresh_from_db()
        return Response(self.get_serializer(event).data, status=status.HTTP_200_OK)
