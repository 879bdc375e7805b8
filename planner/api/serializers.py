"""Planner API serializers: stored analyses and the stateless calculators' inputs."""

from __future__ import annotations

from rest_framework import serializers

from core.bounds import WithinDates, bounded_float, bounded_int
from core.strict import StrictFieldsMixin
from engine.defaults import COOLING_TYPES, INTERVAL_RULES
from engine.reliability import SITE_KINDS
from inventory.api.serializers import AcceleratorField
from inventory.models import AcceleratorModel
from planner.models import ANALYSIS_SCOPES, Analysis


class AnalysisSerializer(serializers.ModelSerializer):
    class Meta:
        model = Analysis
        fields = [
            "id",
            "scope",
            "object_id",
            "scope_label",
            "period_start",
            "period_end",
            "status",
            "progress",
            "stale",
            "stale_reason",
            "error",
            "results",
            "queued_at",
            "started_at",
            "finished_at",
            "succeeded_at",
            "duration_s",
            "created",
        ]
        read_only_fields = fields


class AnalysisRowSerializer(serializers.Serializer):
    """One factor row of an analysis (a pool, cluster or site), columns as the engine names them:
    ids and labels, the five factors with provenance, their product, costs (docs/)."""

    def to_representation(self, instance):
        return dict(instance)


class AnalysisCreateSerializer(StrictFieldsMixin, serializers.Serializer):
    scope = serializers.ChoiceField(choices=ANALYSIS_SCOPES)
    object_id = bounded_int("object_id", required=False, allow_null=True)
    period_start = serializers.DateTimeField(required=False, validators=[WithinDates()])
    period_end = serializers.DateTimeField(required=False, validators=[WithinDates()])


class EffectiveTimeInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """One job; what is not given takes the preset's defaults (docs/capacity-planning.md §4b)."""

    cards = bounded_int("cards")
    site_kind = serializers.ChoiceField(
        choices=SITE_KINDS,
        default="unknown",
        help_text="Effective-time preset: production (the default; unknown = not declared, "
        "production practice) or research (Meta's research-cluster figures).",
    )
    accelerator = AcceleratorField(
        queryset=AcceleratorModel.objects.all(),
        required=False,
        help_text="Catalog name or id: the MTBF default of its card generation.",
    )
    mtbf_card_hours = bounded_float("mtbf_card_hours", required=False)
    checkpoint_save_minutes = bounded_float(
        "checkpoint_minutes", required=False, help_text="Minutes one save blocks training."
    )
    restart_minutes = bounded_float("checkpoint_minutes", required=False)
    checkpoint_interval_minutes = bounded_float("checkpoint_interval_minutes", required=False)
    cooling = serializers.ChoiceField(choices=COOLING_TYPES, required=False)
    interval_rule = serializers.ChoiceField(choices=INTERVAL_RULES, default="young")


class EffectiveTimeOutputSerializer(serializers.Serializer):
    site_kind = serializers.CharField()
    mtbf_card_hours = serializers.FloatField()
    mtbf_basis = serializers.CharField()
    mtbf_job_hours = serializers.FloatField()
    checkpoint_save_minutes = serializers.FloatField()
    restart_minutes = serializers.FloatField()
    young_interval_minutes = serializers.FloatField()
    daly_interval_minutes = serializers.FloatField()
    checkpoint_interval_minutes = serializers.FloatField()
    interval_rule = serializers.CharField()
    effective_time = serializers.FloatField()
    ettr = serializers.FloatField(help_text="Meta's effective training time ratio: the same.")
    runtime_goodput = serializers.FloatField(help_text="Google's runtime goodput: the same.")
    stalled = serializers.BooleanField()
    lost_share = serializers.DictField(child=serializers.FloatField())
    provenance = serializers.DictField(child=serializers.CharField())


class PoolMemberSerializer(StrictFieldsMixin, serializers.Serializer):
    accelerator = AcceleratorField(queryset=AcceleratorModel.objects.all())
    cards = bounded_int("cards")
    mfu = bounded_float("share", required=False)


class PoolEstimateInputSerializer(StrictFieldsMixin, serializers.Serializer):
    members = PoolMemberSerializer(many=True, allow_empty=False)
    mixing_penalty = bounded_float("mixing_penalty", required=False)
    global_batch_microbatches = bounded_int("microbatches", required=False)


class StrategyOutputSerializer(serializers.Serializer):
    throughput_pflops = serializers.FloatField()
    heterogeneity_factor = serializers.FloatField()


class PoolEstimateOutputSerializer(serializers.Serializer):
    strategies = serializers.DictField(child=StrategyOutputSerializer())
    recommended = serializers.CharField()
    why = serializers.CharField()
    slowest_card = serializers.CharField()
    ideal_pflops = serializers.FloatField()
    total_cards = serializers.IntegerField()
    mixing_penalty = serializers.FloatField()
    microbatches = serializers.IntegerField()


def _share_field(**kwargs) -> serializers.FloatField:
    return bounded_float("share", required=False, **kwargs)


class UtilizationInputSerializer(StrictFieldsMixin, serializers.Serializer):
    pue = bounded_float("pue", required=False)
    energy = _share_field(help_text="1/PUE; give this or pue.")
    mfu = _share_field()
    scaling = _share_field()
    effective_time = _share_field()
    utilization = _share_field()
    accelerator = AcceleratorField(
        queryset=AcceleratorModel.objects.all(),
        required=False,
        help_text="Catalog name or id; with cards, models the factors left out.",
    )
    cards = bounded_int("cards", required=False)
    cooling = serializers.ChoiceField(choices=COOLING_TYPES, required=False)

    def validate(self, attrs):
        if attrs.get("pue") is not None and attrs.get("energy") is not None:
            raise serializers.ValidationError({"energy": "Give pue or energy, not both."})
        return attrs


class FactorValueSerializer(serializers.Serializer):
    value = serializers.FloatField()
    provenance = serializers.CharField()
    basis = serializers.CharField()


class UtilizationOutputSerializer(serializers.Serializer):
    factors = serializers.DictField(child=FactorValueSerializer())
    effective_utilization = serializers.FloatField()
    lost_share = serializers.FloatField()
    waste_share = serializers.DictField(child=serializers.FloatField())
