"""Plan constants (option columns with their units, limits) and the workload a plan trains."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from engine.capacity import (
    PlannerInputError,
    TrainingWorkload,
)
from engine.capacity.workload import (
    SHAPE_REQUIRED_FIELDS,
    moe_spec_errors,
    shape_from_spec,
    workload_from_spec,
)
from engine.limits import range_error
from engine.memory import shape_params_error
from engine.reliability import MIN_FAILURE_EXPOSURE_CARD_HOURS  # noqa: F401 (the rule)

MAX_OPTIONS = 5_000  # a bigger grid is rarely a question anyone asks, and the JSON grows fast
MIN_OPTIONS_PER_CHUNK = 64  # below this, progress reporting costs more than it tells
MAX_CHUNKS = 10
SHORTLIST_PER_RANKING = 10  # sensitivity and levers cover the Pareto front plus the top few
DEFAULT_AMORTIZATION_YEARS = 5.0  # planning convention for purchased cards (as the demo fleet)
MAX_COMPARED_PLANS = 10
GB = 1e9
DEFAULT_HISTORY_DAYS = 90  # a quarter of accounting: recent enough, long enough to smooth weeks
MIN_HISTORY = dt.timedelta(days=1)  # less than a day of records says little about a pool

# Inventory assumptions keys (site → cluster → pool overrides) that are planner columns.
ASSUMPTION_COLUMNS = {
    "mtbf_card_hours": "mtbf_card_hours",
    "checkpoint_save_h": "checkpoint_save_hours",
    "restart_h": "restart_hours",
    "checkpoint_interval_rule": "checkpoint_interval_rule",
    "dp_overlap_share": "comm_overlap_share",
    "utilization_planned": "utilization",
}
FACTOR_OVERRIDES = (
    "mfu",
    "achieved_tflops_per_card",
    "scaling",
    "effective_time",
    "utilization",
    "pue",
)
# Where a factor override's provenance lives (achieved TFLOP/s sets the MFU, PUE the energy).
PROVENANCE_COLUMN = {"achieved_tflops_per_card": "mfu_provenance", "pue": "energy_provenance"}
OVERRIDE = "override"  # provenance of a value entered for this plan: it beats measured ones

# Results and export: (column name with its unit, engine column, scale).
OPTION_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("option_id", "option_id", 1),
    ("label", "label", 1),
    ("source", "source", 1),
    ("accelerator", "accelerator", 1),
    ("accelerator_id", "accelerator_id", 1),
    ("site", "site", 1),
    ("site_id", "site_id", 1),
    ("pool", "pool", 1),
    ("pool_id", "pool_id", 1),
    ("cooling_type", "cooling_type", 1),
    ("precision", "precision", 1),
    ("feasible", "feasible", 1),
    ("reason", "reason", 1),
    ("deadline_days", "deadline_days", 1),
    ("cards", "cards", 1),
    ("tp", "tp", 1),
    ("pp", "pp", 1),
    ("dp", "dp", 1),
    ("virtual_stages", "vp", 1),
    ("cp", "cp", 1),
    ("ep", "ep", 1),
    ("micro_batch", "micro_batch", 1),
    ("micro_batches", "micro_batches", 1),
    ("days", "days", 1),
    ("days_low", "days_low", 1),
    ("days_high", "days_high", 1),
    ("running_days", "running_days", 1),
    ("card_hours", "card_hours", 1),
    ("allocated_card_hours", "allocated_card_hours", 1),
    ("peak_tflops_per_card", "peak_tflops", 1),
    ("effective_utilization", "effective_utilization", 1),
    ("energy", "energy", 1),
    ("mfu", "mfu", 1),
    ("scaling", "scaling", 1),
    ("effective_time", "effective_time", 1),
    ("utilization", "utilization", 1),
    ("pue", "pue", 1),
    ("energy_provenance", "energy_provenance", 1),
    ("mfu_provenance", "mfu_provenance", 1),
    ("scaling_provenance", "scaling_provenance", 1),
    ("effective_time_provenance", "effective_time_provenance", 1),
    ("mtbf_card_hours", "mtbf_card_hours", 1),
    ("mtbf_provenance", "mtbf_provenance", 1),
    ("mtbf_basis", "mtbf_basis", 1),
    ("utilization_provenance", "utilization_provenance", 1),
    ("state_gb", "state_bytes", 1 / GB),
    ("state_per_card_gb", "state_bytes_per_card", 1 / GB),
    ("activations_per_card_gb", "activation_bytes_per_card", 1 / GB),
    ("memory_per_card_gb", "memory_per_card_bytes", 1 / GB),
    ("usable_memory_per_card_gb", "usable_memory_per_card_bytes", 1 / GB),
    ("min_cards_memory", "min_cards_memory", 1),
    ("it_energy_mwh", "it_energy_mwh", 1),
    ("facility_energy_mwh", "facility_energy_mwh", 1),
    ("co2_tonnes", "co2_tonnes", 1),
    ("currency", "currency", 1),
    ("cost_basis", "cost_basis", 1),
    ("compute_cost", "compute_cost", 1),
    ("energy_cost", "energy_cost", 1),
    ("energy_overhead_cost", "energy_overhead_cost", 1),
    ("idle_cost", "idle_cost", 1),
    ("total_cost", "total_cost", 1),
    ("cost_low", "cost_low", 1),
    ("cost_high", "cost_high", 1),
    ("band_note", "band_note", 1),
    ("peak_pflop_days", "peak_pflop_days", 1),
    ("effective_pflop_days", "effective_pflop_days", 1),
    ("cost_per_effective_pflop_day", "cost_per_effective_pflop_day", 1),
    ("rank_by_cost", "rank_by_cost", 1),
    ("rank_by_days", "rank_by_days", 1),
    ("on_pareto_front", "on_pareto_front", 1),
)
OPTION_COLUMN_NAMES = tuple(name for name, _, _ in OPTION_COLUMNS)
WHOLE_NUMBER_COLUMNS = (
    "option_id",
    "accelerator_id",
    "site_id",
    "pool_id",
    "cards",
    "tp",
    "pp",
    "dp",
    "virtual_stages",
    "cp",
    "ep",
    "micro_batch",
    "micro_batches",
    "min_cards_memory",
    "rank_by_cost",
    "rank_by_days",
)
# Headline figures of an option (plan summaries and the compare view).
HEADLINE_COLUMNS = (
    "option_id",
    "label",
    "accelerator",
    "site",
    "cards",
    "days",
    "card_hours",
    "total_cost",
    "currency",
    "facility_energy_mwh",
    "co2_tonnes",
    "effective_utilization",
)


class PlanInputError(ValueError):
    """Bad plan inputs; `errors` maps each field (nested per input section) to why."""

    def __init__(self, errors: Mapping[str, Any]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{key}: {value}" for key, value in self.errors.items()))


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

# API field → TrainingWorkload field, where they differ.
_WORKLOAD_API_NAMES = {"params": "model_params"}
# The shape's refinements: given only with layers, hidden_size and attention_heads.
SHAPE_OPTIONAL_FIELDS = ("ffn_hidden_size", "mlp_kind", "kv_heads", "vocab_size", "tied_embeddings")
# Values that say nothing beyond the default (an unticked box, the plain MLP).
_NEUTRAL_SHAPE_VALUES = {"tied_embeddings": False, "mlp_kind": "plain"}
SHAPE_TOGETHER = "Give layers, hidden_size and attention_heads together, or none of them."


def model_spec_errors(spec: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with a workload's model, by field: the shape incomplete or impossible,
    neither N nor a shape, a shape whose own count is out of range, or N and the shape's count
    apart by more than 10 % (engine.memory.shape_params_error). Empty when it is fine.

    For requests (the API, the planner form); a stored plan's computation does not re-check
    the 10 % (the engine takes N as given beside a partial shape). A catalog `model` or a
    mixture of experts has its own checks (engine.capacity.workload.moe_spec_errors)."""
    moe_errors = moe_spec_errors(spec)
    if moe_errors is not None:
        return moe_errors
    given = [key for key in SHAPE_REQUIRED_FIELDS if spec.get(key) is not None]
    if given and len(given) < len(SHAPE_REQUIRED_FIELDS):
        return {key: SHAPE_TOGETHER for key in SHAPE_REQUIRED_FIELDS if key not in given}
    if not given:
        extras = [
            key
            for key in SHAPE_OPTIONAL_FIELDS
            if spec.get(key) is not None and spec.get(key) != _NEUTRAL_SHAPE_VALUES.get(key)
        ]
        if extras:
            return dict.fromkeys(extras, "Give it with layers, hidden_size and attention_heads.")
        if spec.get("model_params") is None:
            return {
                "model_params": "model_params is required, unless the model's shape (layers, "
                "hidden_size and attention_heads) is given."
            }
        return {}
    shape = shape_from_spec(spec)
    assert shape is not None  # the three required fields are given
    if errors := shape.errors():
        return errors
    if message := range_error("model_params", shape.params):
        return {"layers": f"The shape has {shape.params:.4g} parameters. {message}"}
    params = spec.get("model_params")
    if params is not None and (message := shape_params_error(float(params), shape)):
        return {"model_params": message}
    return {}


def workload_errors(spec: Mapping[str, Any], **overrides: Any) -> dict[str, str]:
    """model_spec_errors, a bf16-layer share without fp4, then what the engine refuses (fixed
    degrees the model or the batch cannot take, an unknown precision, ...), keyed by the API's
    field names."""
    if errors := model_spec_errors(spec):
        return errors
    if spec.get("fp4_bf16_layer_share") is not None and spec.get("precision") != "fp4":
        return {"fp4_bf16_layer_share": "Only with precision fp4."}
    try:
        workload_from_spec(spec, **overrides)
    except PlannerInputError as exc:
        return {_WORKLOAD_API_NAMES.get(k, k): v for k, v in exc.errors.items()}
    except ValueError as exc:  # FixedParallelism's own checks
        return {"parallelism": str(exc)}
    return {}


def build_workload(spec: Mapping[str, Any]) -> TrainingWorkload:
    """The engine workload of a validated workload spec; errors name the spec's fields."""
    try:
        # Stored plans fix one sequence per micro-batch (the estimate searches 1, 2 or 4).
        return workload_from_spec(spec, micro_batch=int(spec.get("micro_batch", 1)))
    except PlannerInputError as exc:
        raise PlanInputError(
            {"workload": {_WORKLOAD_API_NAMES.get(k, k): v for k, v in exc.errors.items()}}
        ) from exc
    except ValueError as exc:  # FixedParallelism's own checks
        raise PlanInputError({"workload": {"parallelism": str(exc)}}) from exc
