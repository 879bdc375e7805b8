"""Stored inference plans (/api/v1/inference-plans/): save a serving estimate, list, export.

Every signed-in role reads every plan; planners create; only a plan's owner or an
administrator changes, recomputes or deletes it (as training plans, planner.api.plan_views).
Changed inputs are recomputed in the request: the estimate takes milliseconds.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from access.permissions import RolePermission
from core.tabular.exporting import TabularListMixin
from planner import inference_plans
from planner.api.inference_serializers import (
    InferencePlanInputSerializer,
    InferencePlanListSerializer,
    InferencePlanSerializer,
)
from planner.api.plan_views import OPTION_ROWS_SCHEMA, PlanOwnerOrAdmin
from planner.models import InferencePlan


def _refused(exc: inference_plans.InferencePlanInputError) -> ValidationError:
    return ValidationError({"inputs": exc.errors})


class InferencePlanViewSet(
    TabularListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = [RolePermission, PlanOwnerOrAdmin]
    queryset = InferencePlan.objects.select_related("owner")
    ordering_fields = ["created", "updated", "name"]
    search_fields = ["name"]
    export_filename = "inference-plans"

    def get_serializer_class(self):
        return InferencePlanListSerializer if self.action == "list" else InferencePlanSerializer

    @extend_schema(request=InferencePlanInputSerializer, responses={201: InferencePlanSerializer})
    def create(self, request):
        """Save an estimate as a plan: the inputs are checked and computed at once."""
        payload = InferencePlanInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            plan = inference_plans.create_inference_plan(
                owner=request.user, **payload.validated_data
            )
        except inference_plans.InferencePlanInputError as exc:
            raise _refused(exc) from exc
        return Response(InferencePlanSerializer(plan).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=InferencePlanInputSerializer, responses=InferencePlanSerializer)
    def partial_update(self, request, pk=None):
        """Rename or change the inputs; changed inputs are recomputed at once."""
        plan = self.get_object()
        payload = InferencePlanInputSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        try:
            plan = inference_plans.update_inference_plan(plan, **payload.validated_data)
        except inference_plans.InferencePlanInputError as exc:
            raise _refused(exc) from exc
        return Response(InferencePlanSerializer(plan).data)

    @extend_schema(request=None, responses=InferencePlanSerializer)
    @action(detail=True, methods=["post"])
    def recompute(self, request, pk=None):
        """The same inputs against the current card catalog."""
        try:
            plan = inference_plans.recompute_inference_plan(self.get_object())
        except inference_plans.InferencePlanInputError as exc:
            raise _refused(exc) from exc
        return Response(InferencePlanSerializer(plan).data)

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["json", "csv", "xlsx"])],
        responses={200: OPTION_ROWS_SCHEMA},
    )
    @action(detail=True, methods=["get"])
    def options(self, request, pk=None):
        """One row per card model compared, units in the column names; CSV or XLSX export."""
        plan = self.get_object()
        self.export_columns = inference_plans.OPTION_COLUMNS
        self.export_filename = f"inference-plan-{plan.pk}-options"
        self.export_sheet_title = "Options"
        return Response(inference_plans.option_rows(plan))
