"""Training estimate API: the stateless estimate's input (with "modeled" factors) and output.

Serializers check the shape and ranges of each field (400 naming it); the engine computes.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.bounds import bounded_float, bounded_int
from engine.defaults import FABRICS, SOFTWARE_STACKS
from engine.limits import range_error
from engine.reliability import SITE_KINDS
from engine.training_precision import FP4_PEAK_COLUMN, TRAINING_PRECISIONS, missing_fp4_message
from inventory.api.serializers import AcceleratorField
from inventory.models import AcceleratorModel, CoolingType
from planner.api.plan_serializers import (
    K_MESSAGE,
    STACK_HELP,
    either_or,
    number_schema,
    share_float,
)
from planner.api.shape_serializers import (
    TrainingModelSerializer,
    fp4_bf16_layer_share_field,
    gradient_precision_field,
    optimizer_state_precision_field,
)

_SHARE_ABOVE_ZERO = {**number_schema("share"), "minimum": 0, "exclusiveMinimum": True}


@extend_schema_field({"oneOf": [_SHARE_ABOVE_ZERO, {"enum": ["modeled"]}]})
class ShareOrModeledField(serializers.Field):
    """A factor in (0, 1], or "modeled": the planner models it (numbers still override)."""

    def to_internal_value(self, data):
        if data == "modeled":
            return data
        if isinstance(data, bool):
            raise serializers.ValidationError('Must be a number in (0, 1] or "modeled".')
        try:
            value = float(data)
        except (TypeError, ValueError):
            raise serializers.ValidationError('Must be a number in (0, 1] or "modeled".') from None
        if message := range_error("share", value):
            raise serializers.ValidationError(message)
        return value

    def to_representation(self, value):
        return value


class TrainingEstimateInputSerializer(TrainingModelSerializer):
    """One option: a model on a card model from the catalog (docs/capacity-planning.md §10).

    N or the model's shape and the fixed degrees: TrainingModelSerializer."""

    tokens = bounded_float("tokens", required=False, allow_null=True)
    total_flops = bounded_float("total_flops", required=False, allow_null=True)
    flops_per_param_token = serializers.ChoiceField(
        choices=[6, 8], default=6, error_messages={"invalid_choice": K_MESSAGE}
    )
    precision = serializers.ChoiceField(
        choices=list(TRAINING_PRECISIONS),
        default="bf16",
        help_text="fp4: NVFP4 (NVIDIA Blackwell) or MXFP4 GEMMs at the card's dense FP4 peak, "
        "with the NVFP4 recipe's bf16 layers and quantisation (docs/capacity-planning.md).",
    )
    fp4_bf16_layer_share = fp4_bf16_layer_share_field()
    gradient_precision = gradient_precision_field()
    optimizer_state_precision = optimizer_state_precision_field()
    accelerator = AcceleratorField(
        queryset=AcceleratorModel.objects.all(), help_text="Catalog name or id."
    )
    cards = bounded_int("cards", required=False, allow_null=True)
    deadline_days = bounded_float("deadline_days", required=False, allow_null=True)
    mfu = share_float(required=False, allow_null=True)
    achieved_tflops_per_card = bounded_float(
        "achieved_tflops_per_card", required=False, allow_null=True
    )
    scaling = ShareOrModeledField(
        required=False, allow_null=True, help_text='Default 1; "modeled": the split search.'
    )
    effective_time = ShareOrModeledField(
        required=False,
        allow_null=True,
        help_text='Default 1; "modeled": failures, checkpoints and restarts at this size.',
    )
    utilization = share_float(required=False, allow_null=True, help_text="Default 1.")
    pue = bounded_float("pue", required=False, allow_null=True)
    cooling_type = serializers.ChoiceField(choices=CoolingType.choices, required=False)
    tariff_per_kwh = bounded_float("tariff_per_kwh", required=False, allow_null=True)
    grid_carbon_g_per_kwh = bounded_float("grid_carbon_g_per_kwh", required=False, allow_null=True)
    price_per_card_hour = bounded_float(
        "price_per_card_hour",
        required=False,
        allow_null=True,
        help_text="Default: the catalog's rental price.",
    )
    capital_cost_per_card = bounded_float("money", required=False, allow_null=True)
    amortization_years = bounded_float("amortization_years", required=False, allow_null=True)
    zero_stage = serializers.ChoiceField(choices=[0, 1, 2, 3], default=1)
    software_stack = serializers.ChoiceField(
        choices=SOFTWARE_STACKS, default=SOFTWARE_STACKS[0], help_text=STACK_HELP
    )
    micro_batch = bounded_int(
        "micro_batch",
        required=False,
        allow_null=True,
        help_text="Fix the sequences per micro-batch; default: the search tries 1, 2 and 4.",
    )
    seq_len = bounded_int("seq_len", required=False)
    global_batch_sequences = bounded_int("global_batch_sequences", required=False)
    global_batch_tokens = bounded_float("global_batch_tokens", required=False, allow_null=True)
    max_batch_tokens = bounded_float(
        "global_batch_tokens",
        required=False,
        allow_null=True,
        help_text="Let the batch grow with data parallelism up to this many tokens.",
    )
    fabric = serializers.ChoiceField(choices=FABRICS, required=False)
    inter_node_bandwidth_gbps_per_card = bounded_float(
        "interconnect_gbits", required=False, allow_null=True
    )
    site_kind = serializers.ChoiceField(
        choices=SITE_KINDS,
        required=False,
        help_text="Effective-time preset: production (the default; unknown = not declared, "
        "production practice) or research (Meta's research-cluster MTBF and restart).",
    )
    mtbf_card_hours = bounded_float("mtbf_card_hours", required=False, allow_null=True)
    checkpoint_save_minutes = bounded_float(
        "checkpoint_minutes",
        required=False,
        allow_null=True,
        help_text="Minutes one save blocks training (default: 10 s, an asynchronous save).",
    )
    restart_minutes = bounded_float("checkpoint_minutes", required=False, allow_null=True)
    checkpoint_interval_minutes = bounded_float(
        "checkpoint_interval_minutes", required=False, allow_null=True
    )
    checkpoint_async = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The checkpoint_save_minutes given is a whole synchronous save, but saves run "
        "asynchronously: only the copy to host memory blocks. Without checkpoint_save_minutes "
        "it changes nothing (the default already is an asynchronous save).",
    )

    def validate(self, attrs):
        if attrs.get("tokens") is None and attrs.get("total_flops") is None:
            raise serializers.ValidationError({"tokens": "Give tokens or total_flops."})
        if attrs.get("cards") is None and attrs.get("deadline_days") is None:
            raise serializers.ValidationError({"cards": "Give cards or deadline_days."})
        either_or(attrs, "cards", "deadline_days")
        either_or(attrs, "mfu", "achieved_tflops_per_card")
        either_or(attrs, "price_per_card_hour", "capital_cost_per_card")
        either_or(attrs, "global_batch_tokens", "global_batch_sequences")
        check_precision_peak(attrs)
        if attrs.get("capital_cost_per_card") is not None and not attrs.get("amortization_years"):
            raise serializers.ValidationError(
                {"amortization_years": "Required with capital_cost_per_card."}
            )
        cards, dp = attrs.get("cards"), attrs.get("dp_degree")
        if cards and dp and cards % dp:
            raise serializers.ValidationError({"dp_degree": f"Must divide cards ({cards})."})
        micro_batch, batch = attrs.get("micro_batch"), attrs.get("global_batch_sequences")
        if micro_batch is not None and batch is not None and micro_batch > batch:
            raise serializers.ValidationError(
                {"micro_batch": "Must not exceed global_batch_sequences."}
            )
        self.check_model(attrs)
        return attrs


def check_precision_peak(attrs) -> None:
    """A precision the card has no dense peak for is a 400; fp4's names the catalog cards
    that have one."""
    accelerator, precision = attrs.get("accelerator"), attrs.get("precision")
    if precision == "fp8" and getattr(accelerator, "dense_fp8_tflops", 0) is None:
        raise serializers.ValidationError(
            {"precision": f"fp8 requested but {accelerator} has no dense FP8 peak."}
        )
    if precision == "fp4" and getattr(accelerator, FP4_PEAK_COLUMN, 0) is None:
        with_fp4 = AcceleratorModel.objects.filter(dense_fp4_tflops__isnull=False)
        names = with_fp4.values_list("name", flat=True)
        raise serializers.ValidationError(
            {"precision": missing_fp4_message(str(accelerator), names)}
        )


class ParallelismOutputSerializer(serializers.Serializer):
    tp = serializers.IntegerField(allow_null=True)
    pp = serializers.IntegerField(allow_null=True)
    virtual_stages = serializers.IntegerField(allow_null=True)
    cp = serializers.IntegerField(allow_null=True)
    dp = serializers.IntegerField(allow_null=True)
    ep = serializers.IntegerField(
        allow_null=True, help_text="Expert parallelism (inside dp; 1 for a dense model)."
    )
    micro_batch = serializers.IntegerField(allow_null=True, help_text="Sequences.")
    micro_batches = serializers.IntegerField(allow_null=True, help_text="Per step and replica.")
    global_batch_sequences = serializers.IntegerField(allow_null=True)
    step_shares = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="Share of a step lost to the bubble and to exposed communication.",
    )
    why = serializers.CharField(help_text="Why this split.")


class RangeOutputSerializer(serializers.Serializer):
    low = serializers.FloatField(allow_null=True, help_text="10th percentile.")
    high = serializers.FloatField(allow_null=True, help_text="90th percentile; null: unbounded.")
    note = serializers.CharField(allow_blank=True)
    uncertainties = serializers.ListField(
        child=serializers.DictField(), help_text="Tornado: days low/high per uncertainty."
    )


class GoodputOutputSerializer(serializers.Serializer):
    scheduling = serializers.FloatField(allow_null=True, help_text="= utilization")
    runtime = serializers.FloatField(allow_null=True, help_text="= effective time")
    program = serializers.FloatField(allow_null=True, help_text="= MFU × scaling")
    ettr = serializers.FloatField(allow_null=True, help_text="Meta's ETTR = effective time")


class MemoryOutputSerializer(serializers.Serializer):
    state_bytes = serializers.FloatField(allow_null=True)
    per_card_bytes = serializers.FloatField(allow_null=True)
    state_per_card_bytes = serializers.FloatField(allow_null=True)
    activation_per_card_bytes = serializers.FloatField(allow_null=True)
    usable_per_card_bytes = serializers.FloatField(allow_null=True)
    min_cards = serializers.IntegerField(allow_null=True)


class EnergyOutputSerializer(serializers.Serializer):
    it = serializers.FloatField(allow_null=True, help_text="MWh")
    facility = serializers.FloatField(allow_null=True, help_text="MWh")


class CostOutputSerializer(serializers.Serializer):
    basis = serializers.CharField(allow_null=True)
    price_source = serializers.CharField(allow_null=True, help_text="entered, catalog or null")
    unpriced_reason = serializers.CharField(
        allow_null=True, help_text="why the money is null: no price entered nor in the catalog"
    )
    currency = serializers.CharField()
    compute = serializers.FloatField(allow_null=True)
    energy = serializers.FloatField(allow_null=True)
    energy_overhead = serializers.FloatField(allow_null=True)
    idle = serializers.FloatField(allow_null=True)
    total = serializers.FloatField(allow_null=True)
    per_effective_pflop_day = serializers.FloatField(allow_null=True)


class FactorsOutputSerializer(serializers.Serializer):
    energy = serializers.FloatField(allow_null=True)
    mfu = serializers.FloatField(allow_null=True)
    scaling = serializers.FloatField(allow_null=True)
    effective_time = serializers.FloatField(allow_null=True)
    utilization = serializers.FloatField(allow_null=True)
    pue = serializers.FloatField(allow_null=True)
    effective_utilization = serializers.FloatField(allow_null=True)
    provenance = serializers.DictField(child=serializers.CharField())


class AcceleratorRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class TrainedModelOutputSerializer(serializers.Serializer):
    name = serializers.CharField(allow_null=True, help_text="The catalog name; null: entered.")
    total_params = serializers.FloatField(help_text="Every weight (memory holds them all).")
    active_params = serializers.FloatField(
        help_text="Weights one token uses (the FLOPs' N); = total_params for a dense model."
    )
    mixture_of_experts = serializers.BooleanField()
    experts = serializers.IntegerField(allow_null=True)
    experts_per_token = serializers.IntegerField(allow_null=True)
    shared_experts = serializers.IntegerField(allow_null=True)
    attention = serializers.CharField()


class TrainingEstimateOutputSerializer(serializers.Serializer):
    feasible = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True, help_text="Why not feasible; empty if it is.")
    model = TrainedModelOutputSerializer()
    accelerator = AcceleratorRefSerializer()
    total_flops = serializers.FloatField()
    days = serializers.FloatField(allow_null=True)
    cards = serializers.IntegerField(allow_null=True)
    card_hours = serializers.FloatField(allow_null=True)
    parallelism = ParallelismOutputSerializer()
    memory = MemoryOutputSerializer()
    energy_mwh = EnergyOutputSerializer()
    co2_tonnes = serializers.FloatField(allow_null=True)
    cost = CostOutputSerializer()
    factors = FactorsOutputSerializer()
    days_range = RangeOutputSerializer()
    cost_range = RangeOutputSerializer()
    goodput = GoodputOutputSerializer()
