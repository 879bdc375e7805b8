"""The documented physical range of every numeric input, and the engine's allocation budget.

One table (`LIMITS`): serializers, forms, models and the engine all read their bounds from it,
so a range is changed in one place and docs/deployment.md ("Limits") lists the same rows.
Ranges are generous (about ten times the largest published system) but finite: they keep
every derived array, sum and product finite and small, so hostile input costs little.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """Allowed values `low <= x <= high`, in `unit`, and why the bounds are where they are.

    Lower bounds of divisors are well above zero: 1e-320 would make a quotient infinite.
    """

    low: float
    high: float
    unit: str
    why: str

    def contains(self, value: float) -> bool:
        return math.isfinite(value) and self.low <= value <= self.high

    @property
    def message(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"Must be a number from {self.low:g} to {self.high:g}{unit}."


LIMITS: dict[str, Limit] = {
    # The training workload
    "model_params": Limit(1, 1e14, "parameters", "≈50× the largest published models (~2e12)"),
    "tokens": Limit(1, 1e16, "tokens", "≈500× the largest published training sets (~2e13)"),
    "total_flops": Limit(1, 1e32, "FLOP", "k·N·D at the largest parameters and tokens"),
    "layers": Limit(1, 2_000, "layers", "inferred shapes reach ~800 layers at 1e14 parameters"),
    "hidden_size": Limit(1, 262_144, "", "≈10× the widest published models (~25k)"),
    "attention_heads": Limit(1, 4_096, "heads", "≈30× the most published heads (128)"),
    "ffn_hidden_size": Limit(1, 1_000_000, "", "≈20× the widest published MLPs (~53k)"),
    "vocab_size": Limit(1, 10_000_000, "tokens", "≈40× the largest published vocabularies (~256k)"),
    "seq_len": Limit(1, 10_000_000, "tokens", "≈10× the longest published context windows"),
    "global_batch_sequences": Limit(1, 10_000_000, "sequences", "≈1000× published batches"),
    "micro_batch": Limit(1, 1_000_000, "sequences", "at most the global batch in practice"),
    "global_batch_tokens": Limit(1, 1e11, "tokens", "≈1000× published batches (Llama 3: 16M)"),
    "tp_degree": Limit(1, 128, "cards", "tensor parallelism stays inside one node"),
    "pp_degree": Limit(1, 2_000, "stages", "a stage holds at least one layer"),
    "vp_degree": Limit(1, 2_000, "stages", "virtual stages per pipeline rank; p·v ≤ layers"),
    "cp_degree": Limit(1, 4_096, "cards", "≈250× published context parallelism (Llama 3: 16)"),
    "dp_degree": Limit(1, 10_000_000, "replicas", "at most the number of cards"),
    "cards": Limit(1, 10_000_000, "cards", "≈50× the largest published clusters (~2e5 cards)"),
    "cards_per_node": Limit(1, 128, "cards", "published nodes hold 4 to 72 cards"),
    "node_count": Limit(0, 1_000_000, "nodes", "cards = nodes × cards per node stays ≤ 1e8"),
    "card_granularity": Limit(1, 10_000_000, "cards", "at most the number of cards"),
    "deadline_days": Limit(0.001, 36_525, "days", "from a minute and a half to a century"),
    "history_days": Limit(0, 3_650, "days", "ten years of usage records"),
    "object_id": Limit(1, 2**53, "", "a database key; 2^53 is exact as a JSON number"),
    "microbatches": Limit(1, 10_000_000, "micro-batches", "as the global batch"),
    # A mixture of experts (engine.moe, engine.moe_training)
    "experts": Limit(1, 65_536, "experts", "≈250× the most published routed experts (256)"),
    "shared_experts": Limit(0, 64, "experts", "published models share 0 to 2 experts"),
    "dense_layers": Limit(0, 2_000, "layers", "at most the layers"),
    "latent_rank": Limit(0, 262_144, "", "MLA's low-rank widths: at most the widest models"),
    "capacity_factor": Limit(1, 4, "", "published capacity factors run 1 to 2 (GShard: 2)"),
    "mtp_depth": Limit(0, 4, "modules", "DeepSeek-V3 trains one"),
    "ep_degree": Limit(1, 65_536, "cards", "at most the routed experts"),
    # The serving workload (engine.inference)
    "head_dim": Limit(1, 4_096, "", "published models use 64 to 256 per head"),
    "requests_per_s": Limit(1e-6, 1e9, "requests/s", "≈1000× the largest published services"),
    "serving_tokens_per_s": Limit(1e-6, 1e12, "tokens/s", "≈1000× the largest published fleets"),
    "latency_ms": Limit(0.001, 3_600_000, "ms", "from a microsecond to an hour"),
    # Factors and shares
    "share": Limit(1e-6, 1, "", "a factor dividing the run time, so kept above zero"),
    "share_or_zero": Limit(0, 1, "", "a share of a whole"),
    "mixing_penalty": Limit(0.001, 1, "", "a throughput multiplier in (0, 1]"),
    "pue": Limit(1, 10, "", "measured PUEs range 1.03 to ~3; 10 leaves room for odd sites"),
    "energy": Limit(0.1, 1, "", "1/PUE over the PUE range"),
    "achieved_tflops_per_card": Limit(1e-6, 1e6, "TFLOPS", "≈400× today's fastest card"),
    # Reliability
    "mtbf_card_hours": Limit(0.001, 1e9, "h", "≈100,000 years per card"),
    "checkpoint_hours": Limit(0, 8_760, "h", "a year"),
    "checkpoint_interval_hours": Limit(0.001, 8_760, "h", "a year"),
    "checkpoint_minutes": Limit(0, 525_600, "min", "a year"),
    "checkpoint_interval_minutes": Limit(0.001, 525_600, "min", "a year"),
    # Money and energy
    "tariff_per_kwh": Limit(0, 1e5, "currency/kWh", "covers tariffs in low-value currencies"),
    "price_per_card_hour": Limit(0, 1e7, "currency/card-hour", "as above, per card-hour"),
    "money": Limit(0, 1e13, "currency", "card prices and budgets in any currency"),
    "amortization_years": Limit(0.1, 50, "years", "hardware is written off in 3 to 7 years"),
    "grid_carbon_g_per_kwh": Limit(0, 2_000, "gCO₂/kWh", "coal power is ~1,000 g/kWh"),
    "energy_kwh": Limit(0, 1e12, "kWh", "a 10 GW site metered for ten years is ~1e12 kWh"),
    "power_w": Limit(0, 1e6, "W", "per card or node"),
    "tdp_w": Limit(1, 1e5, "W", "≈50× today's hottest card"),
    # The card catalog
    "card_tflops": Limit(0.001, 1e6, "TFLOPS", "≈400× today's fastest card"),
    "memory_gb": Limit(0.001, 1e5, "GB", "≈500× today's largest card memory"),
    "memory_bandwidth_tbs": Limit(0.001, 1e4, "TB/s", "≈1000× today's fastest memory"),
    "interconnect_gbs": Limit(0.001, 1e5, "GB/s", "≈50× today's fastest links"),
    "interconnect_gbits": Limit(0.001, 1e6, "Gbit/s", "≈500× today's fastest NICs"),
    # GPU telemetry (telemetry/): a Prometheus source and one fetch
    "telemetry_scrape_s": Limit(1, 3_600, "s", "dcgm-exporter collects every 30 s by default"),
    "telemetry_step_s": Limit(15, 3_600, "s", "finer than 15 s is below any scrape interval"),
    "telemetry_timeout_s": Limit(1, 600, "s", "a query slower than ten minutes is a fault"),
    "telemetry_days": Limit(1, 92, "days", "one fetch covers at most a quarter"),
    "node_overhead": Limit(0, 3, "", "non-GPU ÷ GPU power; DGX datasheets imply 0.8 to 1"),
    # Alerts and budgets (alerts/): how far back a rule looks
    "alert_window_days": Limit(1, 366, "days", "from a day to a year of usage"),
}

# Engine inputs -> their limit: TrainingWorkload attributes, ModelShape attributes (keyed by
# the API's field names) and the fields of the training estimate's payload.
WORKLOAD_LIMITS = {
    "params": "model_params",
    "tokens": "tokens",
    "total_flops": "total_flops",
    "seq_len": "seq_len",
    "global_batch_sequences": "global_batch_sequences",
    "micro_batch": "micro_batch",
    "global_batch_tokens": "global_batch_tokens",
    "max_batch_tokens": "global_batch_tokens",
}
SHAPE_LIMITS = {
    "layers": "layers",
    "hidden": "hidden_size",
    "heads": "attention_heads",
    "ffn_hidden": "ffn_hidden_size",
    "vocab": "vocab_size",
}

# Dates a user enters or asks a report for.
DATE_MIN = dt.date(2000, 1, 1)
DATE_MAX = dt.date(2100, 12, 31)
DATE_MESSAGE = f"Must be a date from {DATE_MIN.isoformat()} to {DATE_MAX.isoformat()}."

# Cells (options × candidate splits) the engine may hold in one grid; ~100 bytes per cell.
GRID_CELL_BUDGET = 20_000_000


class EngineInputError(ValueError):
    """Input the engine refuses; `errors` maps each offending field to a message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors: dict[str, str] = dict(errors)
        super().__init__("; ".join(f"{key}: {msg}" for key, msg in self.errors.items()))


def limit(name: str) -> Limit:
    return LIMITS[name]


def range_error(name: str, value: float | None) -> str | None:
    """The message when `value` is outside limit `name`; None when it is inside or absent."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return LIMITS[name].message
    return None if LIMITS[name].contains(number) else LIMITS[name].message


def limit_errors(obj: object, fields: Mapping[str, str]) -> dict[str, str]:
    """Field → message for each attribute of `obj` in `fields` (attribute → limit) out of range."""
    errors = {}
    for field, name in fields.items():
        if message := range_error(name, getattr(obj, field, None)):
            errors[field] = message
    return errors


def date_error(value: dt.date | dt.datetime | None) -> str | None:
    """The message when a date (or date-time) is outside the accepted years."""
    if value is None:
        return None
    day = value.date() if isinstance(value, dt.datetime) else value
    return None if DATE_MIN <= day <= DATE_MAX else DATE_MESSAGE


def check_grid(field: str, cells: float, budget: int = GRID_CELL_BUDGET) -> None:
    """Refuse, before allocating, a grid of `cells` cells larger than the budget."""
    if not cells <= budget:
        raise EngineInputError(
            {field: f"Would need {cells:.3g} grid cells (budget {budget:g}); give a smaller value."}
        )
