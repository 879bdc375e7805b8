"""Inference plans: a serving estimate stored with its inputs, recomputed when they change.

The inputs are the inference estimate's (planner.inference_inputs), checked by the
same serializer and the same limits; the card models are stored by catalog name and looked
up again on every computation, so a recompute uses the catalog as it is now. Computing takes
milliseconds, so it happens in the request (no worker).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from engine.limits import EngineInputError
from inventory.models import AcceleratorModel
from planner.inference_estimate import estimate_inference
from planner.inference_inputs import InferenceEstimateInputSerializer
from planner.models import InferencePlan

# The export: one row per card model compared, units in the column names.
OPTION_COLUMNS: tuple[str, ...] = (
    "accelerator",
    "engine",
    "feasible",
    "reason",
    "cheapest",
    "pareto",
    "cards",
    "tp",
    "replicas",
    "batch",
    "max_batch",
    "ttft_ms",
    "ttft_p95_ms",
    "tpot_ms",
    "tpot_p95_ms",
    "tokens_per_s",
    "requests_per_s",
    "capacity_tokens_per_s",
    "utilization",
    "mbu",
    "kv_bytes_per_token",
    "weight_gb_per_card",
    "compute_precision",
    "energy_kwh_per_million_tokens",
    "cost_per_million_tokens",
    "card_hour_price",
    "price_basis",
    "currency",
)


class InferencePlanInputError(ValueError):
    """Inputs the estimate refuses; `errors` maps each field to its message."""

    def __init__(self, errors: dict[str, Any]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {value}" for key, value in errors.items()))


def _validated(data: dict[str, Any]) -> dict[str, Any]:
    payload = InferenceEstimateInputSerializer(data=data)
    if not payload.is_valid():
        raise InferencePlanInputError(
            {key: " ".join(map(str, messages)) for key, messages in payload.errors.items()}
        )
    return payload.validated_data


def checked_inputs(data: dict[str, Any]) -> dict[str, Any]:
    """The inputs as stored (JSON, card models by name, no empty values), or the errors."""
    stored = {key: value for key, value in _validated(data).items() if value is not None}
    if "accelerator" in stored:
        stored["accelerator"] = [card.name for card in stored["accelerator"]]
    return stored


def estimate(inputs: dict[str, Any]) -> dict[str, Any]:
    """The estimate for stored inputs, with the catalog as it is now."""
    validated = _validated(inputs)  # refuses e.g. a card model since removed from the catalog
    try:
        return estimate_inference(validated)
    except EngineInputError as exc:
        raise InferencePlanInputError(dict(exc.errors)) from exc


def create_inference_plan(*, owner, name: str, inputs: dict[str, Any]) -> InferencePlan:
    stored = checked_inputs(inputs)
    return InferencePlan.objects.create(
        owner=owner, name=name, inputs=stored, results=estimate(stored), computed_at=timezone.now()
    )


@transaction.atomic
def update_inference_plan(
    plan: InferencePlan, *, name: str | None = None, inputs: dict[str, Any] | None = None
) -> InferencePlan:
    """Rename and/or change the inputs; changed inputs are recomputed at once."""
    plan = InferencePlan.objects.select_for_update().get(pk=plan.pk)
    if name is not None:
        plan.name = name
    if inputs is not None:
        stored = checked_inputs(inputs)
        if stored != plan.inputs:
            plan.inputs, plan.results = stored, estimate(stored)
            plan.computed_at = timezone.now()
    plan.save()
    return plan


def recompute_inference_plan(plan: InferencePlan) -> InferencePlan:
    """The same inputs against the current catalog."""
    plan.results, plan.computed_at = estimate(plan.inputs), timezone.now()
    plan.save(update_fields=["results", "computed_at", "updated"])
    return plan


def option_rows(plan: InferencePlan) -> list[dict[str, Any]]:
    """One row per card model compared (the export), in the estimate's order."""
    return [{key: option.get(key) for key in OPTION_COLUMNS} for option in plan.results["options"]]


def catalog_changes_since(plan: InferencePlan) -> list[str]:
    """Card models the plan compares (all, when it names none) edited after it was computed:
    a recompute would use their new figures (the catalog keeps every edit in its history)."""
    edits = AcceleratorModel.history.filter(history_date__gt=plan.computed_at)
    if names := plan.inputs.get("accelerator"):
        edits = edits.filter(name__in=names)
    return sorted(set(edits.values_list("name", flat=True)))


def query_string_inputs(plan: InferencePlan) -> list[tuple[str, str]]:
    """The inputs as the Inference tab's query (to open a plan there and change it)."""
    pairs = []
    for key, value in plan.inputs.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append((key, str(item)))
    return pairs
