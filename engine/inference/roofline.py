"""Prefill and decode times on the roofline, and the batch a latency bound allows.

- Prefill is compute-bound: 2 · N · input tokens / (tp · peak · compute efficiency)
  (a forward pass costs 2 FLOP per parameter and token; Kaplan et al. 2020).
- One decode step of a batch B reads every weight once and each sequence's KV cache:
  memory time = (weights/tp + B · KV bytes per sequence per card) / (HBM bandwidth · efficiency);
  compute time = 2 · N · B / (tp · peak · efficiency). The step takes the larger of the two
  (the roofline: memory-bound at small B, compute-bound past the crossover).
- In steady state each replica also runs the prefill of new requests between steps:
  B / output tokens arrivals per step, so the time per output token (TPOT) is
  step + B · prefill / output tokens, throughput is B / TPOT, and the time to first token
  (TTFT) is one prefill plus one step.
Both step terms are linear in B, so the largest B within a TPOT or TTFT bound is closed-form.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

TERA = 1e12


def _f(value: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(value, dtype=np.float64)


def prefill_seconds(
    params: ArrayLike, tokens: ArrayLike, tp: ArrayLike, peak_tflops: ArrayLike, eff: ArrayLike
) -> NDArray[np.float64]:
    return 2.0 * _f(params) * _f(tokens) / (_f(tp) * _f(peak_tflops) * TERA * _f(eff))


def step_coefficients(
    weights_per_card: ArrayLike,
    kv_read_per_sequence: ArrayLike,
    params: ArrayLike,
    tp: ArrayLike,
    bandwidth_tbs: ArrayLike,
    bandwidth_eff: ArrayLike,
    peak_tflops: ArrayLike,
    compute_eff: ArrayLike,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(fixed memory s, memory s per sequence, compute s per sequence) of one decode step."""
    bandwidth = _f(bandwidth_tbs) * TERA * _f(bandwidth_eff)
    compute = _f(tp) * _f(peak_tflops) * TERA * _f(compute_eff)
    return (
        _f(weights_per_card) / bandwidth,
        _f(kv_read_per_sequence) / bandwidth,
        2.0 * _f(params) / compute,
    )


def step_seconds(
    batch: ArrayLike, fixed_s: ArrayLike, memory_s: ArrayLike, compute_s: ArrayLike
) -> NDArray[np.float64]:
    b = _f(batch)
    return np.maximum(_f(fixed_s) + _f(memory_s) * b, _f(compute_s) * b)


def tpot_seconds(
    batch: ArrayLike, step_s: ArrayLike, prefill_s: ArrayLike, output_tokens: ArrayLike
) -> NDArray[np.float64]:
    return _f(step_s) + _f(batch) * _f(prefill_s) / _f(output_tokens)


def batch_within(
    bound_s: ArrayLike,
    fixed_s: ArrayLike,
    memory_s: ArrayLike,
    compute_s: ArrayLike,
    extra_per_sequence_s: ArrayLike,
) -> NDArray[np.float64]:
    """Largest real B with max(fixed + memory·B, compute·B) + extra·B <= bound (inf: no bound)."""
    bound = _f(bound_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_memory = (bound - _f(fixed_s)) / (_f(memory_s) + _f(extra_per_sequence_s))
        by_compute = bound / (_f(compute_s) + _f(extra_per_sequence_s))
    return np.where(np.isfinite(bound), np.minimum(by_memory, by_compute), np.inf)
