"""Serving loads of inference pools (GET/POST /api/v1/serving-loads/): measured output
tokens/s over a period and the model served. Analyses compare them with the cards' modeled
capacity as the pool's utilization (docs/efficiency-model.md, "Serving pools").

Reads need the viewer role, writes the planner role (access.permissions.RolePermission), as
for the other accounting tables; pools carry no team, so rows are not team-scoped.
"""

from __future__ import annotations

from rest_framework import serializers, viewsets

from accounting.filtersets import ServingLoadFilterSet
from accounting.models import ServingLoad, serving_load_errors
from accounting.served_models import PARAMS_TOLERANCE
from core.bounds import WithinDates, bounded_float, bounded_int
from core.concurrency import ConditionalUpdateMixin
from core.tabular.exporting import TabularListMixin
from inventory.models import PoolPurpose


class ServingLoadSerializer(serializers.ModelSerializer):
    pool_name = serializers.CharField(source="pool.name", read_only=True)
    period_start = serializers.DateTimeField(validators=[WithinDates()])
    period_end = serializers.DateTimeField(validators=[WithinDates()], help_text="Exclusive.")
    served_tokens_per_s = bounded_float(
        "serving_tokens_per_s", help_text="Output tokens/s served, mean over the period."
    )
    model_name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Optional: the served model's model-catalog name (e.g. Qwen3-235B-A22B); "
        "fills model_params with the catalog's total, and analyses use its active parameters "
        "(a mixture of experts) for FLOPs and the experts a step reads for MBU. An unknown "
        "name is a 400 listing the catalog's names.",
    )
    model_params = bounded_float(
        "model_params",
        required=False,
        allow_null=True,
        help_text="Parameters N of the served model (every expert's); may be left out with "
        f"model_name, and must then agree with the catalog's total (within "
        f"{PARAMS_TOLERANCE:.0%}).",
    )
    input_tokens = bounded_int("seq_len", help_text="Mean prompt tokens per request.")
    output_tokens = bounded_int("seq_len", help_text="Mean generated tokens per request.")

    class Meta:
        model = ServingLoad
        fields = ["id", "pool", "pool_name", *ServingLoad.EDITABLE_FIELDS, "created", "updated"]
        read_only_fields = ["created", "updated"]

    def validate(self, attrs):
        current = self._current()
        merged = {**current, **attrs}
        renamed = attrs.get("model_name") and attrs["model_name"] != current.get("model_name")
        if renamed and "model_params" not in attrs:
            merged["model_params"] = None  # a newly named model brings its own count
        load = ServingLoad(**merged)
        errors = serving_load_errors(load)  # fills model_params from a named catalog model
        pool = merged.get("pool")
        if pool is not None and pool.purpose != PoolPurpose.INFERENCE:
            errors["pool"] = "Serving loads are for inference pools (purpose 'inference')."
        if errors:
            raise serializers.ValidationError(errors)
        return {**attrs, "model_name": load.model_name, "model_params": load.model_params}

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        names = [
            f for f in self.Meta.fields if f not in ("id", "pool_name", *self.Meta.read_only_fields)
        ]
        return {name: getattr(self.instance, name) for name in names}


class ServingLoadViewSet(ConditionalUpdateMixin, TabularListMixin, viewsets.ModelViewSet):
    """Measured serving load per inference pool; list exports as CSV/XLSX like the others."""

    queryset = ServingLoad.objects.select_related("pool")
    serializer_class = ServingLoadSerializer
    filterset_class = ServingLoadFilterSet
    ordering_fields = ["period_start", "period_end", "served_tokens_per_s", "pool"]
