"""The inference estimate's inputs, checked: one serializer for the API
(POST /api/v1/estimates/inference/), the inference page and stored inference plans.

Every number is bounded by the one limits table (engine.limits); an out-of-range or
missing value is a 400 naming the field. docs/inference.md describes each field.
"""

from __future__ import annotations

from rest_framework import serializers

from core.bounds import bounded_float, bounded_int
from core.strict import StrictFieldsMixin
from engine.inference.memory import KV_PRECISIONS, WEIGHT_PRECISIONS
from inventory.api.serializers import AcceleratorField
from inventory.models import AcceleratorModel

MAX_ACCELERATORS = 50  # card models compared in one estimate
SHAPE_FIELDS = ("layers", "hidden", "kv_heads", "head_dim")
TARGET_FIELDS = ("requests_per_s", "tokens_per_s", "cards")
SETTING_FIELDS = (
    "bandwidth_efficiency",
    "compute_efficiency",
    "usable_memory_share",
    "power_share_of_tdp",
    "pue",
    "amortization_years",
)


class AcceleratorsField(serializers.ListField):
    """One card model (name or id) or a list of them to compare; absent: the whole catalog."""

    def __init__(self, **kwargs):
        child = AcceleratorField(queryset=AcceleratorModel.objects.all())
        super().__init__(child=child, max_length=MAX_ACCELERATORS, min_length=1, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, (str, int)):
            data = [data]
        return super().to_internal_value(data)


def _float(name: str, **kwargs) -> serializers.FloatField:
    return bounded_float(name, required=False, allow_null=True, **kwargs)


def _int(name: str, **kwargs) -> serializers.IntegerField:
    return bounded_int(name, required=False, allow_null=True, **kwargs)


class InferenceEstimateInputSerializer(StrictFieldsMixin, serializers.Serializer):
    model_params = _float("model_params", help_text="Parameters N.")
    layers = _int("layers")
    hidden = _int("hidden_size", help_text="Model width (d_model).")
    attention_heads = _int("attention_heads", help_text="Query heads.")
    kv_heads = _int("attention_heads", help_text="KV heads (GQA).")
    head_dim = _int("head_dim")
    weight_precision = serializers.ChoiceField(choices=list(WEIGHT_PRECISIONS), default="bf16")
    kv_precision = serializers.ChoiceField(choices=list(KV_PRECISIONS), default="bf16")
    accelerator = AcceleratorsField(required=False)
    input_tokens = bounded_int("seq_len", help_text="Prompt tokens per request.")
    output_tokens = bounded_int("seq_len", help_text="Generated tokens per request.")
    context_tokens = _int("seq_len", help_text="KV reserved per sequence.")
    requests_per_s = _float("requests_per_s")
    tokens_per_s = _float("serving_tokens_per_s", help_text="Output tokens/s.")
    cards = _int("cards", help_text="Instead of a target: cards to fill.")
    tp = _int("tp_degree", help_text="Fix the tensor-parallel degree.")
    batch = _int("micro_batch", help_text="Cap concurrent sequences/replica.")
    ttft_ms = _float("latency_ms", help_text="Bound on time to first token.")
    tpot_ms = _float("latency_ms", help_text="Bound on time per output token.")
    ttft_p95_ms = _float("latency_ms", help_text="Bound on the 95th-percentile TTFT.")
    tpot_p95_ms = _float("latency_ms", help_text="Bound on the 95th-percentile TPOT.")
    tariff_per_kwh = _float("tariff_per_kwh")
    price_per_card_hour = _float("price_per_card_hour")
    bandwidth_efficiency = _float("share")
    compute_efficiency = _float("share")
    usable_memory_share = _float("share")
    power_share_of_tdp = _float("share")
    pue = _float("pue")
    amortization_years = _float("amortization_years")

    def validate(self, attrs):
        shape = [attrs.get(key) for key in SHAPE_FIELDS]
        if any(value is not None for value in shape) and not all(shape):
            missing = [key for key, value in zip(SHAPE_FIELDS, shape, strict=True) if not value]
            raise serializers.ValidationError(
                {missing[0]: "Give all of " + ", ".join(SHAPE_FIELDS)}
            )
        if attrs.get("model_params") is None and not all(shape):
            raise serializers.ValidationError(
                {"model_params": "Give model_params, or layers, hidden, kv_heads and head_dim."}
            )
        given = [key for key in TARGET_FIELDS if attrs.get(key) is not None]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"requests_per_s": "Give exactly one of requests_per_s, tokens_per_s or cards."}
            )
        return attrs
