"""Planner API: stored analyses (run by workers) and the stateless estimate calculators."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.tabular.exporting import RowsView, TabularListMixin
from planner import analysis_rows, estimates, services
from planner.api.serializers import (
    AnalysisCreateSerializer,
    AnalysisRowSerializer,
    AnalysisSerializer,
    EffectiveTimeInputSerializer,
    EffectiveTimeOutputSerializer,
    PoolEstimateInputSerializer,
    PoolEstimateOutputSerializer,
    UtilizationInputSerializer,
    UtilizationOutputSerializer,
)
from planner.filtersets import AnalysisFilterSet
from planner.models import Analysis


class AnalysisViewSet(
    TabularListMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = Analysis.objects.all()
    serializer_class = AnalysisSerializer
    filterset_class = AnalysisFilterSet
    ordering_fields = ["created", "finished_at", "scope", "status"]

    @extend_schema(request=AnalysisCreateSerializer, responses={202: AnalysisSerializer})
    def create(self, request):
        """Queue an analysis of a pool, cluster, site or the fleet; poll it for progress."""
        payload = AnalysisCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            analysis = services.start_analysis(user=request.user, **payload.validated_data)
        except services.AnalysisInputError as exc:
            raise ValidationError(exc.errors) from exc
        return Response(AnalysisSerializer(analysis).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: AnalysisSerializer})
    @action(detail=True, methods=["post"])
    def recompute(self, request, pk=None):
        """Run the analysis again with the current inventory; the last result stays until then."""
        analysis = services.recompute(self.get_object())
        return Response(AnalysisSerializer(analysis).data, status=status.HTTP_202_ACCEPTED)


class AnalysisRowsView(RowsView):
    """An analysis's factor rows: one per pool, cluster or site (``?scope=``), flat columns."""

    serializer_class = AnalysisRowSerializer
    queryset = Analysis.objects.all()

    def get_export_columns(self):
        return []  # rows carry the engine's columns; their names are documented in docs/

    def export_filename(self) -> str:
        scope = self.request.query_params.get("scope", "pool")
        return f"analysis-{self.kwargs['pk']}-{scope}-rows"

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", str, enum=list(analysis_rows.ROW_SCOPES), default="pool")
        ],
        responses={200: AnalysisRowSerializer(many=True), 409: dict},
    )
    def get(self, request, pk: int):
        return super().get(request, pk=pk)

    def get_rows(self, request, *args, **kwargs) -> list[dict]:
        scope = request.query_params.get("scope", "pool")
        if scope not in analysis_rows.ROW_SCOPES:
            raise ValidationError({"scope": [f"One of {', '.join(analysis_rows.ROW_SCOPES)}."]})
        analysis = self.get_object()
        if not analysis.results:
            raise AnalysisNotReady(analysis.status)
        return analysis_rows.factor_rows(analysis, scope)


class AnalysisNotReady(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "not_ready"

    def __init__(self, state: str):
        super().__init__(f"The analysis has no results yet (status: {state}).")


class CalculatorView(APIView):
    """A POST-only calculator: validate, compute, answer; any signed-in role may use it."""

    input_serializer: type[serializers.Serializer]
    output_serializer: type[serializers.Serializer]
    read_role = "viewer"
    write_role = "viewer"  # computing an estimate changes nothing

    @staticmethod
    def calculate(data: dict) -> dict:
        raise NotImplementedError

    def post(self, request):
        payload = self.input_serializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            result = self.calculate(payload.validated_data)
        except estimates.EstimateInputError as exc:
            raise ValidationError(exc.errors) from exc
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from exc
        return Response(self.output_serializer(result).data)


def calculator_view(name, input_serializer, output_serializer, calculate, summary: str):
    """A CalculatorView subclass with its OpenAPI request/response documented."""
    view = type(
        name,
        (CalculatorView,),
        {
            "input_serializer": input_serializer,
            "output_serializer": output_serializer,
            "calculate": staticmethod(calculate),
            "__doc__": summary,
        },
    )
    schema = extend_schema(
        request=input_serializer, responses=output_serializer, description=summary
    )
    return extend_schema_view(post=schema)(view)


EffectiveTimeEstimateView = calculator_view(
    "EffectiveTimeEstimateView",
    EffectiveTimeInputSerializer,
    EffectiveTimeOutputSerializer,
    estimates.estimate_effective_time,
    "Effective training time of a job from its size, MTBF and checkpoint costs.",
)
PoolEstimateView = calculator_view(
    "PoolEstimateView",
    PoolEstimateInputSerializer,
    PoolEstimateOutputSerializer,
    estimates.estimate_pool,
    "Throughput of a (mixed) pool under the four strategies, and the best one.",
)
UtilizationEstimateView = calculator_view(
    "UtilizationEstimateView",
    UtilizationInputSerializer,
    UtilizationOutputSerializer,
    estimates.estimate_utilization,
    "The five-factor product and each factor's share of the loss.",
)
