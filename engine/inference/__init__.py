"""Serving capacity: memory, roofline timing, sizing, energy and cost (docs/inference.md).

Pure numpy/pandas like the training planner; every function broadcasts over option arrays.

Public API: :func:`evaluate_inference` and :class:`InferenceWorkload` (``__all__``), and the
modules

    sizing      cards for a serving target, one row per (card model × TP degree); ``choose``
    memory      weights, KV cache and prefill activations per card
    roofline    the step-time model: decode steps, prefill, TPOT, the batch a bound allows
    engines     the serving engines' presets (TensorRT-LLM, vLLM, SGLang, PyTorch) and the
                constants they share, fitted on published figures
    precision   weight and KV formats (bf16 … int4 weight-only, FP8, NVFP4/MXFP4)
    moe_serving  a mixture of experts: memory for every expert, the experts a step reads
    band        the calibrated band around tokens/s, TPOT and TTFT
    track_record  published serving figures through the model (engine/data/track_record.json)
    queueing    p95 TTFT and TPOT from the queueing of requests
    energy      energy and money per million served tokens
    curve       the latency–throughput curve of each option
    serving     serving definitions of the five factors for an inference pool
    defaults    the serving model's table of defaults
"""

from engine.inference.sizing import InferenceWorkload, evaluate_inference

__all__ = ["InferenceWorkload", "evaluate_inference"]
