"""What to serve and how fast: the serving model's input and the checks it passes
(ranges from engine.limits; a mixture-of-experts shape by moe_serving.py). sizing.py evaluates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.inference import moe_serving
from engine.inference.defaults import INFERENCE_DEFAULTS, serving_default
from engine.inference.engines import DEFAULT_ENGINE, ENGINES, EnginePreset
from engine.inference.memory import AttentionShape
from engine.inference.precision import KV_BYTES, WEIGHT_FORMATS
from engine.limits import EngineInputError, range_error
from engine.moe import MoeShape

# Workload attribute -> its limit in engine.limits.LIMITS.
INFERENCE_WORKLOAD_LIMITS = {
    "params": "model_params",
    "input_tokens": "seq_len",
    "output_tokens": "seq_len",
    "context_tokens": "seq_len",
    "requests_per_s": "requests_per_s",
    "tokens_per_s": "serving_tokens_per_s",
    "cards": "cards",
    "tp": "tp_degree",
    "batch": "micro_batch",
    "ttft_ms": "latency_ms",
    "tpot_ms": "latency_ms",
    "ttft_p95_ms": "latency_ms",
    "tpot_p95_ms": "latency_ms",
    "tariff_per_kwh": "tariff_per_kwh",
    "price_per_card_hour": "price_per_card_hour",
}
SHAPE_LIMITS = {
    "layers": "layers",
    "hidden": "hidden_size",
    "heads": "attention_heads",
    "kv_heads": "attention_heads",
    "head_dim": "head_dim",
}
# Settings whose default is the serving engine's (engines.py), not the defaults table's.
ENGINE_SETTINGS = ("bandwidth_efficiency", "compute_efficiency", "usable_memory_share")
OVERRIDE_LIMITS = {
    "bandwidth_efficiency": "share",
    "compute_efficiency": "share",
    "usable_memory_share": "share",
    "power_share_of_tdp": "share",
    "pue": "pue",
    "amortization_years": "amortization_years",
    "prefill_chunk_tokens": "seq_len",
    "max_tp": "tp_degree",
}


@dataclass(frozen=True)
class InferenceWorkload:
    """What to serve and how fast; a target (requests_per_s or tokens_per_s) or cards.

    A mixture of experts gives `moe` (its shape; `params` is then its total) instead of
    `shape`; `expert_parallel` spreads its experts whole over the replica's cards rather
    than splitting every expert by tensor parallelism; `attention_data_parallel` (with expert
    parallelism) gives each card whole attention for its share of the sequences, the MoE
    layers then trading tokens by all-to-all instead of all-reducing (moe_serving.py)."""

    params: float
    input_tokens: int
    output_tokens: int
    weight_precision: str = "bf16"
    kv_precision: str = "bf16"
    shape: AttentionShape | None = None
    context_tokens: int | None = None
    requests_per_s: float | None = None
    tokens_per_s: float | None = None
    cards: int | None = None
    tp: int | None = None
    batch: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    tariff_per_kwh: float | None = None
    price_per_card_hour: float | None = None
    overrides: dict[str, float] = field(default_factory=dict)
    engine: str = DEFAULT_ENGINE
    moe: MoeShape | None = None
    expert_parallel: bool = False
    attention_data_parallel: bool = False

    def __post_init__(self) -> None:
        if errors := workload_errors(self):
            raise EngineInputError(errors)

    @property
    def attention(self) -> AttentionShape:
        if self.moe is not None:
            return moe_serving.attention_shape(self.moe)
        return self.shape or AttentionShape.infer(self.params)

    @property
    def context(self) -> int:
        return self.context_tokens or self.input_tokens + self.output_tokens

    @property
    def target_tokens_per_s(self) -> float | None:
        """Output tokens per second asked for (requests/s × output tokens), None without one."""
        if self.tokens_per_s is not None:
            return float(self.tokens_per_s)
        if self.requests_per_s is not None:
            return float(self.requests_per_s) * self.output_tokens
        return None

    @property
    def preset(self) -> EnginePreset:
        return ENGINES[self.engine]

    def setting(self, key: str) -> float:
        """An entered value, else the engine's (efficiencies, memory share), else the table's."""
        if key in self.overrides:
            return float(self.overrides[key])
        if key in ENGINE_SETTINGS:
            return float(getattr(self.preset, key))
        return serving_default(key)

    def provenance(self) -> dict[str, str]:
        """Where each default-able input came from: entered, or the documented default."""
        given = dict.fromkeys(self.overrides, "entered")
        return {key: given.get(key, "default") for key in INFERENCE_DEFAULTS}


def workload_errors(w: InferenceWorkload) -> dict[str, str]:
    """Field -> message for every input the model refuses (ranges from the one limits table)."""
    errors = {
        key: msg
        for key, name in INFERENCE_WORKLOAD_LIMITS.items()
        if (msg := range_error(name, getattr(w, key)))
    }
    for key, value in w.overrides.items():
        if key not in OVERRIDE_LIMITS:
            errors[key] = "Unknown setting."
        elif msg := range_error(OVERRIDE_LIMITS[key], value):
            errors[key] = msg
    if w.shape is not None:
        for key, name in SHAPE_LIMITS.items():
            if msg := range_error(name, getattr(w.shape, key)):
                errors[key] = msg
    if w.moe is not None:
        if w.shape is not None:
            errors["shape"] = "Give either shape (a dense model) or moe, not both."
        errors.update(moe_serving.moe_errors(w.moe, w.params))
        if w.attention_data_parallel and not w.expert_parallel:
            errors["attention_data_parallel"] = "Only with expert_parallel."
    elif w.expert_parallel or w.attention_data_parallel:
        key = "expert_parallel" if w.expert_parallel else "attention_data_parallel"
        errors[key] = "Only for a mixture-of-experts model (moe)."
    if w.weight_precision not in WEIGHT_FORMATS:
        errors["weight_precision"] = f"One of {', '.join(WEIGHT_FORMATS)}."
    if w.kv_precision not in KV_BYTES:
        errors["kv_precision"] = f"One of {', '.join(KV_BYTES)}."
    if w.engine not in ENGINES:
        errors["engine"] = f"One of {', '.join(ENGINES)}."
    targets = [w.requests_per_s, w.tokens_per_s, w.cards]
    if sum(value is not None for value in targets) != 1:
        errors["requests_per_s"] = "Give exactly one of requests_per_s, tokens_per_s or cards."
    short = w.context_tokens is not None and w.context_tokens < w.input_tokens + w.output_tokens
    if not errors and short:
        errors["context_tokens"] = "Must be at least input_tokens + output_tokens."
    if not errors and w.tp is not None and w.cards is not None and w.tp > w.cards:
        errors["tp"] = "Must not exceed cards."
    return errors
