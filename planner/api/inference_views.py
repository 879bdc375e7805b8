"""POST /api/v1/estimates/inference/: cards, latency, energy and cost to serve a model.

The computation is planner.inference_estimate; any signed-in role may ask (an estimate
changes nothing).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from engine.limits import EngineInputError
from planner.api.inference_serializers import InferenceEstimateOutputSerializer
from planner.api.views import CalculatorView
from planner.inference_estimate import API_NAMES, estimate_inference
from planner.inference_inputs import InferenceEstimateInputSerializer


class InferenceEstimateView(CalculatorView):
    input_serializer = InferenceEstimateInputSerializer
    output_serializer = InferenceEstimateOutputSerializer
    calculate = staticmethod(estimate_inference)

    @extend_schema(
        request=InferenceEstimateInputSerializer, responses=InferenceEstimateOutputSerializer
    )
    def post(self, request):
        """Cards (replicas × tensor parallel), TTFT, TPOT, throughput, MBU, energy and cost per
        million tokens to serve a model at a target, or what given cards deliver.

        A card model that cannot serve (weights too big, bounds unmet) answers feasible=false
        with the reason; malformed input answers 400 naming the field.
        """
        payload = self.input_serializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            result = estimate_inference(payload.validated_data)
        except EngineInputError as exc:
            errors = {API_NAMES.get(key, key): message for key, message in exc.errors.items()}
            raise ValidationError(errors) from exc
        return Response(self.output_serializer(result).data)
