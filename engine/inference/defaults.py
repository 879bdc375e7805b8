"""Every default the serving model falls back on, in one table, with its source.

Outputs carry `<key>_provenance` = "entered" when the caller gave the value, else "default".
The efficiencies and the memory share default to the serving engine's (engines.py); the values
here are the default engine's, TensorRT-LLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.defaults import default_value
from engine.inference.engines import TENSORRT_LLM


@dataclass(frozen=True)
class ServingDefault:
    value: float
    unit: str
    source: str


INFERENCE_DEFAULTS: dict[str, ServingDefault] = {
    "bandwidth_efficiency": ServingDefault(
        TENSORRT_LLM.bandwidth_efficiency,
        "share of peak HBM bandwidth",
        "The serving engine's (engines.py; this is the default engine's, TensorRT-LLM): fitted "
        "on the calibration rows of engine/data/published_serving_runs.json. Decode kernels "
        "reach 0.6-0.9 of peak HBM bandwidth (kipply, 'Transformer Inference Arithmetic', 2022; "
        "Databricks, 'LLM Inference Performance Engineering', 2023).",
    ),
    "compute_efficiency": ServingDefault(
        TENSORRT_LLM.compute_efficiency,
        "share of dense peak FLOPS",
        "The serving engine's best share of the dense peak on a large batch of tokens "
        "(engines.py, fitted); fewer tokens per product and narrower models reach less "
        "(roofline.gemm_efficiency).",
    ),
    "usable_memory_share": ServingDefault(
        TENSORRT_LLM.usable_memory_share,
        "share of card memory",
        "The serving engine's: TensorRT-LLM gives the KV cache 0.90 of the memory left after "
        "the weights (kv_cache_free_gpu_mem_fraction); vLLM holds 0.90 of the whole card "
        "(gpu_memory_utilization), SGLang about 0.88 (mem_fraction_static).",
    ),
    "prefill_chunk_tokens": ServingDefault(
        8192,
        "tokens",
        "TensorRT-LLM's default max_num_tokens per step (8,192): the prefill activations "
        "reserved on each card are one layer's for this many tokens (Korthikanti et al. 2022, "
        "34·s·h bytes per layer without the attention scores, which FlashAttention never "
        "stores).",
    ),
    "max_tp": ServingDefault(
        8, "cards", "Tensor parallelism stays inside one NVLink domain (8 cards per HGX node)."
    ),
    "power_share_of_tdp": ServingDefault(
        1.0,
        "share of TDP",
        "Cards are assumed to draw their TDP while serving: an upper bound (decode-bound cards "
        "often draw less), so energy is never understated.",
    ),
    "pue": ServingDefault(
        float(default_value("pue_air")),
        "ratio",
        "The efficiency engine's default PUE for an air-cooled site (engine.defaults).",
    ),
    "amortization_years": ServingDefault(
        5.0, "years", "Accelerators are written off over 3 to 7 years; 5 is the middle."
    ),
}


# Kept out of INFERENCE_DEFAULTS (the estimate's settings): a fitted constant of the step model.
HIDDEN_STATE_TRAFFIC = ServingDefault(
    48.0,
    "bytes per hidden unit, decoded token and MoE layer",
    "Memory traffic of a decoded token's whole hidden state around an MoE layer's experts, "
    "on every card: tensor parallelism splits the weights, the KV heads and the FLOPs, but "
    "every card routes every token (TensorRT-LLM's MoE plugin: router and top-k, the "
    "permutation into k rows, k 16-bit partial outputs of the full width, since tensor "
    "parallelism splits the down projection's inner dimension, and the un-permutation that "
    "scales and sums them), besides the norms, residual adds, activation quantisation and "
    "the all-reduce's staging copies; gathers of permuted rows reach a fraction of the "
    "bandwidth. Small beside the weight and KV streams at tp = 1; at tp = 8 with 2,048 "
    "sequences about a fifth of the step. Fitted on the MoE calibration rows of "
    "engine/data/published_serving_runs.json alone (TensorRT-LLM 0.17 and 1.0 maximum load, "
    "the DeepSeek-R1 blog's H200 run: least squares of ln(modeled / published), 1-byte "
    "grid, flat from 44 to 54); the MoE held-out rows only check it. Charged per decoded "
    "sequence, in the step's memory stream: charging the folded prompt tokens too fits the "
    "same rows worse. Dense models have the same traffic but constants fitted without it, "
    "so it is not charged to them (docs/inference.md, section 3a).",
)

# Kept out of INFERENCE_DEFAULTS (the estimate's settings): only analyses' availability uses it.
SERVING_REPAIR = ServingDefault(
    float(default_value("restart_h")),
    "h",
    "Time a serving replica is down after a card fails: detection, rescheduling on a spare and "
    "reloading the weights, automated as on the fleets behind Llama 3 and MegaScale; the "
    "efficiency engine's restart_h default (engine.defaults).",
)


def serving_default(key: str) -> float:
    return INFERENCE_DEFAULTS[key].value
