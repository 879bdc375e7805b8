"""Capacity planner API: plan inputs and outputs (the training estimate: training_serializers).

Serializers check the shape and ranges of each field (400 naming it); checks against the
inventory and the engine (unknown site, a column the engine refuses) are in planner.plans.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.bounds import bounded_float, bounded_int
from core.strict import StrictFieldsMixin
from core.text import validate_name
from engine.capacity import K_ERROR
from engine.defaults import COOLING_TYPES, INTERVAL_RULES, SOFTWARE_STACKS
from engine.limits import limit, range_error
from engine.memory import ACTIVATION_RECOMPUTE_MODES
from engine.reliability import RELIABILITY_PRESETS
from engine.training_precision import TRAINING_PRECISIONS
from inventory.models import CoolingType
from planner.api.shape_serializers import (
    TrainingModelSerializer,
    fp4_bf16_layer_share_field,
    gradient_precision_field,
    optimizer_state_precision_field,
)
from planner.models import Plan
from planner.plans import MAX_COMPARED_PLANS, can_edit, stale_rate_reasons

MAX_LIST_ITEMS = 200  # card counts or deadlines in one plan
MAX_CHOICES = 50  # card models, sites or pools in one plan
MAX_LEVERS = 10
K_MESSAGE = f"Must be 6 or 8 ({K_ERROR})."


def share_float(**kwargs) -> serializers.FloatField:
    return bounded_float("share", **kwargs)


def number_schema(name: str) -> dict:
    return {"type": "number", "minimum": limit(name).low, "maximum": limit(name).high}


def either_or(attrs: dict, first: str, second: str) -> None:
    if attrs.get(first) is not None and attrs.get(second) is not None:
        raise serializers.ValidationError({first: f"Give {first} or {second}, not both."})


# --------------------------------------------------------------------------------------------
# Plan inputs
# --------------------------------------------------------------------------------------------

STACK_HELP = (
    "The training stack the per-card model assumes: megatron (Megatron-LM/Core, NeMo: fused "
    "kernels; the default), megatron_2024 (the same of 2024 on Hopper, before "
    "FlashAttention-3: slower attention, which long sequences feel) or plain_pytorch (an "
    "eager loop under bf16 autocast)."
)


class WorkloadSerializer(TrainingModelSerializer):
    """The training goal (TrainingWorkload inputs; docs/capacity-planning.md §1): N or the
    model's shape, the fixed degrees (TrainingModelSerializer), the data and the batch."""

    tokens = bounded_float(
        "tokens", required=False, allow_null=True, help_text="Training tokens D."
    )
    total_flops = bounded_float(
        "total_flops", required=False, allow_null=True, help_text="Instead of tokens."
    )
    flops_per_param_token = serializers.ChoiceField(
        choices=[6, 8], default=6, error_messages={"invalid_choice": K_MESSAGE}
    )
    precision = serializers.ChoiceField(choices=list(TRAINING_PRECISIONS), default="bf16")
    fp4_bf16_layer_share = fp4_bf16_layer_share_field()
    gradient_precision = gradient_precision_field()
    optimizer_state_precision = optimizer_state_precision_field()
    seq_len = bounded_int("seq_len", default=2048)
    global_batch_sequences = bounded_int("global_batch_sequences", default=1536)
    global_batch_tokens = bounded_float(
        "global_batch_tokens",
        required=False,
        allow_null=True,
        help_text="The batch in tokens instead of sequences (wins over global_batch_sequences).",
    )
    max_batch_tokens = bounded_float(
        "global_batch_tokens",
        required=False,
        allow_null=True,
        help_text="Let the batch grow with data parallelism up to this many tokens.",
    )
    micro_batch = bounded_int("micro_batch", default=1)
    zero_stage = serializers.ChoiceField(choices=[0, 1, 2, 3], default=1)
    software_stack = serializers.ChoiceField(
        choices=SOFTWARE_STACKS, default=SOFTWARE_STACKS[0], help_text=STACK_HELP
    )
    recompute = serializers.ChoiceField(
        choices=list(ACTIVATION_RECOMPUTE_MODES), required=False, allow_null=True
    )
    sequence_parallel = serializers.BooleanField(default=True)
    usable_memory_share = share_float(default=0.9)

    def validate(self, attrs):
        if attrs.get("tokens") is None and attrs.get("total_flops") is None:
            raise serializers.ValidationError({"tokens": "Give tokens or total_flops."})
        batch, cap = attrs.get("global_batch_tokens"), attrs.get("max_batch_tokens")
        if batch is not None and cap is not None and cap < batch:
            raise serializers.ValidationError(
                {"max_batch_tokens": "Must be at least global_batch_tokens."}
            )
        if attrs["micro_batch"] > attrs["global_batch_sequences"]:
            raise serializers.ValidationError(
                {"micro_batch": "Must not exceed global_batch_sequences."}
            )
        self.check_model(attrs)
        return attrs


def _object_id(data: int | str) -> int:
    """A database key from an int or a string of digits, inside the id range."""
    message = limit("object_id").message
    if len(str(data)) > len(str(int(limit("object_id").high))):  # before int() of 5,000 digits
        raise serializers.ValidationError(message)
    if range_error("object_id", int(data)):
        raise serializers.ValidationError(message)
    return int(data)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]})
class CatalogKeyField(serializers.Field):
    """A card model by its catalog name or id (resolved in one query by the service)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (str, int)):
            raise serializers.ValidationError("Give a catalog name or id.")
        if isinstance(data, int) or data.isdecimal():
            return _object_id(data)
        if not data.strip():
            raise serializers.ValidationError("Give a catalog name or id.")
        return data.strip()

    def to_representation(self, value):
        return value


class ExplicitSiteSerializer(StrictFieldsMixin, serializers.Serializer):
    """A site that is not in the inventory: its energy figures entered directly."""

    name = serializers.CharField(max_length=100, validators=[validate_name])
    cooling_type = serializers.ChoiceField(choices=CoolingType.choices, required=False)
    pue = bounded_float("pue", required=False, allow_null=True, help_text="Default: the cooling's.")
    tariff_per_kwh = bounded_float("tariff_per_kwh", default=0.0)
    grid_carbon_g_per_kwh = bounded_float("grid_carbon_g_per_kwh", default=0.0)
    currency = serializers.RegexField(r"^[A-Z]{3}$", default="USD")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "description": "Inventory site id."},
            {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "cooling_type": {"type": "string", "enum": list(COOLING_TYPES)},
                    "pue": number_schema("pue"),
                    "tariff_per_kwh": number_schema("tariff_per_kwh"),
                    "grid_carbon_g_per_kwh": number_schema("grid_carbon_g_per_kwh"),
                    "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                },
            },
        ]
    }
)
class SiteEntryField(serializers.Field):
    """A site by inventory id, or an explicit {name, pue, tariff_per_kwh, ...} object."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            site = ExplicitSiteSerializer(data=data)
            site.is_valid(raise_exception=True)
            return dict(site.validated_data)
        if isinstance(data, bool) or not isinstance(data, (int, str)) or not str(data).isdecimal():
            raise serializers.ValidationError("Give a site id or an object with the site figures.")
        return _object_id(data)

    def to_representation(self, value):
        return value


def _unique(values: list) -> list:
    seen: list = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


class OptionsSpecSerializer(StrictFieldsMixin, serializers.Serializer):
    """Which options to evaluate. For example::

        {"accelerators": ["H100 SXM5 80GB", 4], "cards": [512, 1024],
         "sites": [2, {"name": "Cloud EU", "pue": 1.3, "tariff_per_kwh": 0.2}],
         "pools": [7], "cost_basis": "rental"}

    New cards: every card model × card count (or deadline) × site, priced by the catalog's
    rental price (or, with cost_basis "purchase", its list price amortized). Sites by id bring
    their measured PUE (else the cooling default), tariff, carbon and assumptions. Each
    existing pool adds one option per card model in it, at the pool's own size, with its
    site's figures, its cluster's fabric and ownership terms, and the factors measured from
    its usage records over the last `history_days` (else modeled from the inventory).
    """

    accelerators = serializers.ListField(
        child=CatalogKeyField(), required=False, max_length=MAX_CHOICES, help_text="New cards."
    )
    cards = serializers.ListField(
        child=bounded_int("cards"),
        required=False,
        allow_empty=False,
        max_length=MAX_LIST_ITEMS,
    )
    deadline_days = serializers.ListField(
        child=bounded_float("deadline_days"),
        required=False,
        allow_empty=False,
        max_length=MAX_LIST_ITEMS,
    )
    sites = serializers.ListField(child=SiteEntryField(), required=False, max_length=MAX_CHOICES)
    pools = serializers.ListField(
        child=bounded_int("object_id"),
        required=False,
        max_length=MAX_CHOICES,
        help_text="Existing pools, evaluated at their own size with their cluster's terms.",
    )
    cost_basis = serializers.ChoiceField(choices=["rental", "purchase"], default="rental")
    capital_cost_per_card = bounded_float("money", required=False, allow_null=True)
    amortization_years = bounded_float("amortization_years", required=False, allow_null=True)
    yearly_opex_per_card = bounded_float("money", required=False, allow_null=True)
    card_granularity = bounded_int("card_granularity", default=1)
    cards_per_node = bounded_int("cards_per_node", required=False)
    history_days = bounded_int(
        "history_days",
        required=False,
        help_text="Existing pools use accounting's measured utilization, effective time and "
        "MFU over this many days before the plan is computed (default 90; 0: modeled only).",
    )
    # Plain text, not a choice field: the schema already names the site_kind choice set.
    site_kind = serializers.CharField(
        required=False,
        help_text="Effective-time preset of every option: production (default: asynchronous "
        "checkpoints, automated restarts, MTBF of the card generation's production fleets) or "
        "research (Meta's research-cluster MTBF and restart).",
    )

    def validate_site_kind(self, value):
        if value not in RELIABILITY_PRESETS:
            raise serializers.ValidationError(
                f'"{value}" is not a preset: one of {", ".join(RELIABILITY_PRESETS)}.'
            )
        return value

    def validate(self, attrs):
        for key in ("accelerators", "cards", "deadline_days", "sites", "pools"):
            if key in attrs:
                attrs[key] = _unique(attrs[key])
        either_or(attrs, "cards", "deadline_days")
        if attrs.get("accelerators") and not (attrs.get("cards") or attrs.get("deadline_days")):
            raise serializers.ValidationError(
                {"cards": "Give card counts (cards) or deadlines (deadline_days)."}
            )
        if not attrs.get("accelerators") and not attrs.get("pools"):
            raise serializers.ValidationError(
                {"accelerators": "Give card models (with cards or deadline_days) or pools."}
            )
        return attrs


class OverridesSerializer(StrictFieldsMixin, serializers.Serializer):
    """Entered for every option; they win over catalog and inventory figures."""

    mfu = share_float(required=False, allow_null=True)
    achieved_tflops_per_card = bounded_float(
        "achieved_tflops_per_card", required=False, allow_null=True
    )
    scaling = share_float(required=False, allow_null=True)
    effective_time = share_float(required=False, allow_null=True)
    utilization = share_float(required=False, allow_null=True)
    pue = bounded_float("pue", required=False, allow_null=True)
    mtbf_card_hours = bounded_float("mtbf_card_hours", required=False, allow_null=True)
    checkpoint_save_hours = bounded_float("checkpoint_hours", required=False, allow_null=True)
    restart_hours = bounded_float("checkpoint_hours", required=False, allow_null=True)
    checkpoint_interval_hours = bounded_float(
        "checkpoint_interval_hours", required=False, allow_null=True
    )
    # Plain text, not a choice field: the schema already names this choice set interval_rule.
    checkpoint_interval_rule = serializers.CharField(
        required=False, allow_null=True, help_text=f"One of {', '.join(INTERVAL_RULES)}."
    )
    comm_overlap_share = bounded_float("share_or_zero", required=False, allow_null=True)
    busy_load_share = share_float(required=False, allow_null=True)
    idle_power_share = bounded_float("share_or_zero", required=False, allow_null=True)
    node_overhead_w = bounded_float("power_w", required=False, allow_null=True)
    max_cards = bounded_int("cards", required=False, allow_null=True)

    def validate_checkpoint_interval_rule(self, value):
        if value is not None and value not in INTERVAL_RULES:
            raise serializers.ValidationError(f"Must be one of {', '.join(INTERVAL_RULES)}.")
        return value

    def validate(self, attrs):
        either_or(attrs, "mfu", "achieved_tflops_per_card")
        return {key: value for key, value in attrs.items() if value is not None}


LEVER_NEEDS = {
    "liquid_cooling": (),
    "faster_checkpoints": ("checkpoint_save_hours", "restart_hours"),
    "mfu_upgrade": ("mfu",),
    "colocation": (),
}


class LeverSerializer(StrictFieldsMixin, serializers.Serializer):
    """An improvement and its one-off cost (docs/capacity-planning.md §9)."""

    name = serializers.ChoiceField(choices=list(LEVER_NEEDS))
    one_off_cost = bounded_float("money")
    pue = bounded_float("pue", required=False, allow_null=True)
    checkpoint_save_hours = bounded_float("checkpoint_hours", required=False, allow_null=True)
    restart_hours = bounded_float("checkpoint_hours", required=False, allow_null=True)
    mfu = share_float(required=False, allow_null=True)
    utilization = share_float(required=False, allow_null=True)

    def validate(self, attrs):
        missing = {
            k: "Required for this lever."
            for k in LEVER_NEEDS[attrs["name"]]
            if attrs.get(k) is None
        }
        if missing:
            raise serializers.ValidationError(missing)
        return {key: value for key, value in attrs.items() if value is not None}


class PlanInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """What a planner sends to create (or, merged with the stored plan, change) a plan."""

    name = serializers.CharField(max_length=200, validators=[validate_name])
    workload = WorkloadSerializer()
    options_spec = OptionsSpecSerializer()
    overrides = OverridesSerializer(required=False, default=dict)
    levers = LeverSerializer(many=True, required=False, default=list, max_length=MAX_LEVERS)


class PlanCloneSerializer(StrictFieldsMixin, serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, validators=[validate_name])


class PlanCompareQuerySerializer(StrictFieldsMixin, serializers.Serializer):
    ignored_fields = ("format",)  # the renderer's query parameter

    ids = serializers.CharField(
        help_text=f"Comma-separated plan ids, e.g. 1,2 (at most {MAX_COMPARED_PLANS})."
    )

    def validate_ids(self, value: str) -> list[int]:
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts or not all(part.isdecimal() for part in parts):
            raise serializers.ValidationError("Give plan ids separated by commas, e.g. 1,2.")
        ids = _unique([_object_id(part) for part in parts])
        if len(ids) > MAX_COMPARED_PLANS:
            raise serializers.ValidationError(f"Compare at most {MAX_COMPARED_PLANS} plans.")
        return ids


# --------------------------------------------------------------------------------------------
# Plan outputs
# --------------------------------------------------------------------------------------------

PLAN_LIST_FIELDS = [
    "id",
    "name",
    "owner",
    "owner_name",
    "can_edit",
    "workload",
    "options_spec",
    "overrides",
    "levers",
    "status",
    "progress",
    "stale",
    "inventory_changed_at",
    "error",
    "summary",
    "cloned_from",
    "queued_at",
    "started_at",
    "finished_at",
    "succeeded_at",
    "duration_s",
    "created",
    "updated",
]


class PlanListSerializer(serializers.ModelSerializer):
    """A plan without its results (lists stay light); `summary` has the headline."""

    owner_name = serializers.SerializerMethodField()
    can_edit = serializers.SerializerMethodField()

    class Meta:
        model = Plan
        fields = PLAN_LIST_FIELDS
        read_only_fields = fields

    def get_owner_name(self, plan: Plan) -> str | None:
        return plan.owner.get_username() if plan.owner else None

    def get_can_edit(self, plan: Plan) -> bool:
        request = self.context.get("request")
        return can_edit(getattr(request, "user", None), plan)


class PlanSerializer(PlanListSerializer):
    """A plan with its last successful results."""

    stale_reasons = serializers.SerializerMethodField(
        help_text="Why a stale plan's money is out of date because of exchange rates: one "
        "sentence per rate a recompute would replace (empty when none)."
    )

    class Meta(PlanListSerializer.Meta):
        fields = [*PLAN_LIST_FIELDS, "stale_reasons", "results"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_stale_reasons(self, plan: Plan) -> list[str]:
        return stale_rate_reasons(plan) if plan.stale else []


# --------------------------------------------------------------------------------------------
# POST /api/v1/estimates/training/
# --------------------------------------------------------------------------------------------


# OpenAPI 3.0: an exclusive bound is "exclusiveMinimum: true" beside "minimum".
