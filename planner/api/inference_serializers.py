"""The inference estimate's output and stored inference plans in the API
(POST /api/v1/estimates/inference/, /api/v1/inference-plans/). The input is
planner.inference_inputs (shared with the page and the plans)."""

from __future__ import annotations

from rest_framework import serializers

from core.strict import StrictFieldsMixin
from core.text import validate_name


def _band_end() -> serializers.FloatField:
    return serializers.FloatField(
        allow_null=True,
        default=None,
        help_text="An end of the band the true figure lies in 8 times in 10 or more "
        "(null: a plan stored before the band was kept).",
    )


class InferenceOptionSerializer(serializers.Serializer):
    accelerator = serializers.CharField()
    engine = serializers.CharField(
        allow_null=True,
        default=None,
        help_text="The serving engine whose preset the estimate used (null: stored before).",
    )
    feasible = serializers.BooleanField()
    reason = serializers.CharField()
    cards = serializers.IntegerField()
    tp = serializers.IntegerField()
    replicas = serializers.IntegerField()
    max_batch = serializers.IntegerField()
    batch = serializers.IntegerField()
    kv_bytes_per_token = serializers.FloatField()
    weight_gb_per_card = serializers.FloatField()
    ttft_ms = serializers.FloatField(allow_null=True)
    tpot_ms = serializers.FloatField(allow_null=True)
    ttft_p95_ms = serializers.FloatField(
        allow_null=True, help_text="Null when the queue does not settle (full load)."
    )
    tpot_p95_ms = serializers.FloatField(allow_null=True)
    utilization = serializers.FloatField(allow_null=True, help_text="Served / capacity.")
    decode_step_ms = serializers.FloatField(allow_null=True)
    decode_bound = serializers.CharField()
    tokens_per_s = serializers.FloatField()
    requests_per_s = serializers.FloatField()
    capacity_tokens_per_s = serializers.FloatField()
    mbu = serializers.FloatField(allow_null=True)
    compute_precision = serializers.CharField()
    energy_kwh_per_million_tokens = serializers.FloatField(allow_null=True)
    cost_per_million_tokens = serializers.FloatField(
        allow_null=True, help_text="In `currency`; null when unknown (no price), not zero."
    )
    card_hour_price = serializers.FloatField(allow_null=True)
    price_basis = serializers.CharField()
    currency = serializers.CharField(
        allow_null=True, help_text="ISO 4217 code of this option's money (null: stored before)."
    )
    pareto = serializers.BooleanField()
    cheapest = serializers.BooleanField()
    # The calibrated band (band.py; docs/inference.md section 6).
    capacity_tokens_per_s_low = _band_end()
    capacity_tokens_per_s_high = _band_end()
    replica_tokens_per_s_low = _band_end()
    replica_tokens_per_s_high = _band_end()
    tpot_ms_low = _band_end()
    tpot_ms_high = _band_end()
    ttft_ms_low = _band_end()
    ttft_ms_high = _band_end()


class InferenceEstimateOutputSerializer(InferenceOptionSerializer):
    """The recommended option (cheapest feasible, else fewest cards) and every card model's best."""

    options = InferenceOptionSerializer(many=True)
    engine_label = serializers.CharField(allow_null=True, default=None)
    model = serializers.CharField(allow_null=True, help_text="The model catalog's name, if any.")
    model_params = serializers.FloatField(help_text="Total parameters (every expert's).")
    active_params = serializers.FloatField(
        help_text="Parameters one token uses (a mixture of experts' top-k and shared experts; "
        "all of a dense model's)."
    )
    moe = serializers.JSONField(
        allow_null=True,
        help_text="A mixture of experts' fields (experts, experts_per_token, shared_experts, "
        "expert_ffn_hidden_size, dense_layers, attention, …); null for a dense model.",
    )
    shape = serializers.DictField(
        child=serializers.IntegerField(allow_null=True),
        help_text="layers, hidden_size, attention_heads, kv_heads, head_dim, ffn_hidden_size, "
        "vocab_size used (null: not given and not needed).",
    )
    shape_source = serializers.CharField(
        allow_null=True, help_text="catalog, entered or inferred (from model_params)."
    )
    settings = serializers.DictField(child=serializers.FloatField())
    provenance = serializers.DictField(child=serializers.CharField())


class InferencePlanInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """A stored inference plan: a name and the estimate's input (checked as the estimate's)."""

    name = serializers.CharField(max_length=200, validators=[validate_name])
    inputs = serializers.DictField(
        help_text="The body of POST /api/v1/estimates/inference/ (docs/inference.md)."
    )


class InferencePlanSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.username", default=None)
    inputs = serializers.DictField()
    results = InferenceEstimateOutputSerializer()
    computed_at = serializers.DateTimeField()
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()


class InferencePlanListSerializer(serializers.Serializer):
    """One row per plan for lists and exports: the recommended option's headline."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.username", default=None)
    accelerator = serializers.CharField(source="results.accelerator")
    engine = serializers.CharField(source="results.engine", default=None, allow_null=True)
    feasible = serializers.BooleanField(source="results.feasible")
    cards = serializers.IntegerField(source="results.cards")
    tpot_ms = serializers.FloatField(source="results.tpot_ms", allow_null=True)
    cost_per_million_tokens = serializers.FloatField(
        source="results.cost_per_million_tokens", allow_null=True
    )
    currency = serializers.CharField(source="results.currency", allow_null=True)
    computed_at = serializers.DateTimeField()
