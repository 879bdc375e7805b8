"""Capacity planner API: stored plans (computed by workers) and the training estimate.

Every signed-in role reads every plan; planners create and clone plans; only a plan's owner
or an administrator changes, recomputes or deletes it.
"""

from __future__ import annotations

import django_filters
from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.response import Response

from access.permissions import RolePermission
from core.concurrency import ConditionalUpdateMixin
from core.tabular.exporting import TabularListMixin
from planner import plans
from planner.api.plan_serializers import (
    PlanCloneSerializer,
    PlanCompareQuerySerializer,
    PlanInputSerializer,
    PlanListSerializer,
    PlanSerializer,
)
from planner.api.training_serializers import (
    TrainingEstimateInputSerializer,
    TrainingEstimateOutputSerializer,
)
from planner.api.views import CalculatorView
from planner.models import Plan

# An options table: one object per option (the columns differ with the plan's inputs).
OPTION_ROWS_SCHEMA = {"type": "array", "items": {"type": "object", "additionalProperties": {}}}


class PlanOwnerOrAdmin(BasePermission):
    """Object level: reads and clones for every role; changes for the owner or an admin."""

    message = "Only the plan's owner or an administrator may change it."

    def has_object_permission(self, request, view, obj) -> bool:
        if request.method in SAFE_METHODS or getattr(view, "action", None) == "clone":
            return True
        return plans.can_edit(request.user, obj)


class PlanFilterSet(django_filters.FilterSet):
    owner_name = django_filters.CharFilter(field_name="owner__username")

    class Meta:
        model = Plan
        fields = ["owner", "status", "stale"]


def _input_errors(exc: plans.PlanInputError) -> ValidationError:
    return ValidationError(exc.errors)


class PlanViewSet(ConditionalUpdateMixin, TabularListMixin, viewsets.ModelViewSet):
    permission_classes = [RolePermission, PlanOwnerOrAdmin]
    filterset_class = PlanFilterSet
    ordering_fields = ["created", "updated", "name", "status"]
    search_fields = ["name"]

    def get_queryset(self):
        if self.action == "list":
            return plans.plans_for_list()
        return Plan.objects.select_related("owner")

    def get_serializer_class(self):
        return PlanListSerializer if self.action == "list" else PlanSerializer

    def _detail(self, plan: Plan, status_code: int) -> Response:
        return Response(self.get_serializer(plan).data, status=status_code)

    @extend_schema(request=PlanInputSerializer, responses={202: PlanSerializer})
    def create(self, request):
        """Queue a plan; poll it for progress. Inputs are checked against the inventory first."""
        payload = PlanInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            plan = plans.create_plan(owner=request.user, **payload.validated_data)
        except plans.PlanInputError as exc:
            raise _input_errors(exc) from exc
        return self._detail(plan, status.HTTP_202_ACCEPTED)

    @extend_schema(request=PlanInputSerializer, responses=PlanSerializer)
    def update(self, request, pk=None, partial=False):
        """Change a plan; changed inputs queue a new run and the last result stays until then.

        A PATCH replaces whole sections (workload, options_spec, overrides, levers).
        """
        with transaction.atomic():
            plan = self.checked_for_update(self.get_object())  # If-Match: 412 when stale
            if isinstance(plan, Response):
                return plan
            current = {key: getattr(plan, key) for key in ("name", *plans.INPUT_FIELDS)}
            merged = {**current, **request.data} if partial else request.data
            payload = PlanInputSerializer(data=merged)
            payload.is_valid(raise_exception=True)
            try:
                plan = plans.update_plan(plan, **payload.validated_data)
            except plans.PlanInputError as exc:
                raise _input_errors(exc) from exc
        data = self.get_serializer(plan).data
        return Response(data, headers={"ETag": self._etag(plan, data)})

    @extend_schema(request=PlanInputSerializer, responses=PlanSerializer)
    def partial_update(self, request, pk=None):
        return self.update(request, pk=pk, partial=True)

    @extend_schema(request=None, responses={202: PlanSerializer})
    @action(detail=True, methods=["post"])
    def recompute(self, request, pk=None):
        """Run the plan again with the current inventory; the last result stays until then."""
        plan = plans.recompute_plan(self.get_object())
        return self._detail(plan, status.HTTP_202_ACCEPTED)

    @extend_schema(request=PlanCloneSerializer, responses={201: PlanSerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        """Copy a plan (any plan you can read) into one you own; it is recomputed."""
        payload = PlanCloneSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        plan = plans.clone_plan(
            self.get_object(), owner=request.user, name=payload.validated_data.get("name")
        )
        return self._detail(plan, status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=["json", "csv", "xlsx"]),
            OpenApiParameter("feasible", bool, description="Only (in)feasible options."),
            OpenApiParameter("pareto", bool, description="Only options on the Pareto front."),
        ],
        responses={200: OPTION_ROWS_SCHEMA, 409: dict},
    )
    @action(detail=True, methods=["get"])
    def options(self, request, pk=None):
        """One row per option, flat columns with units in their names; CSV or XLSX export."""
        plan = self.get_object()
        self.export_columns = plans.OPTION_COLUMN_NAMES
        self.export_filename = f"plan-{plan.pk}-options"
        self.export_sheet_title = "Options"
        if not plan.results:
            return Response(
                {"detail": f"The plan has no results yet (status: {plan.status})."},
                status=status.HTTP_409_CONFLICT,
            )
        flags = {}
        for name in ("feasible", "pareto"):
            wanted = request.query_params.get(name)
            if wanted is not None:
                flags[name] = wanted.lower() in ("1", "true", "yes")
        rows = plans.option_table(plan, **flags)
        return Response(rows)

    @extend_schema(parameters=[PlanCompareQuerySerializer], responses=dict)
    @action(detail=False, methods=["get"])
    def compare(self, request):
        """Plans side by side: headline options, Pareto fronts, one row per metric."""
        query = PlanCompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            compared = plans.plans_to_compare(query.validated_data["ids"])
        except plans.PlanInputError as exc:
            raise _input_errors(exc) from exc
        return Response(plans.comparison(compared))


class TrainingEstimateView(CalculatorView):
    input_serializer = TrainingEstimateInputSerializer
    output_serializer = TrainingEstimateOutputSerializer
    calculate = staticmethod(plans.estimate_training_for)

    @extend_schema(
        request=TrainingEstimateInputSerializer, responses=TrainingEstimateOutputSerializer
    )
    def post(self, request):
        """Days (or cards for a deadline), memory, energy and cost of one training run.

        An option that does not fit in memory (or misses its deadline) answers 200 with
        feasible=false and the reason; malformed input answers 400 naming the field.
        """
        return super().post(request)
