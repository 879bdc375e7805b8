"""Serving engines as an input: what each one achieves, and the constants all of them share.

A preset holds the efficiencies a serving engine reaches on a card, fitted on the calibration
rows of engine/data/published_serving_runs.json (benchmarks/fidelity.py --fit repeats the
search and prints what it finds; the committed values are its result, rounded). Few
constants, never one per case: 26 in all (FITTED_CONSTANTS), for 66 calibration rows.

    bandwidth_efficiency  share of the card's HBM bandwidth the weight and KV streams reach
    compute_efficiency    share of the dense peak the matrix products reach on a large batch of
                          tokens (it falls for few tokens and narrow models: SHARED.gemm_*)
    layer_overhead_us     fixed time per layer and step: kernel launches and the tails of
                          small kernels (CUDA graphs keep it small, eager PyTorch does not)
    step_overhead_us      fixed time per step: scheduling, sampling, the host
    allreduce_latency_us  latency of one tensor-parallel all-reduce (two per layer and step)
    kv_read_efficiency    the KV cache stream's bandwidth relative to the weights' (a paged
                          cache is read in blocks; a static one is contiguous)
    max_batch             the engine's cap on sequences per step (its default)

and how the engine runs: flash-decoding (attention split along the context so a small batch
of long sequences fills the card), chunked prefill (prompt tokens ride in the decode steps,
sharing the weight reads), and how it reserves the KV cache (a share of the memory left after
the weights, TensorRT-LLM's kv_cache_free_gpu_mem_fraction; or a share of the whole card,
vLLM's gpu_memory_utilization).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

KvMemory = Literal["share_of_free", "share_of_total"]


@dataclass(frozen=True)
class EnginePreset:
    name: str
    label: str
    bandwidth_efficiency: float
    compute_efficiency: float
    layer_overhead_us: float
    step_overhead_us: float
    allreduce_latency_us: float
    kv_read_efficiency: float
    max_batch: int
    flash_decoding: bool
    chunked_prefill: bool
    kv_memory: KvMemory
    usable_memory_share: float
    calibrated_on: str  # which published rows fitted it ("" when none did)
    sources: tuple[str, ...]


@dataclass(frozen=True)
class SharedConstants:
    """Constants every engine shares (kernels and hardware, not the engine's code)."""

    gemm_half_tokens: float  # tokens in one product at which its efficiency is half the best
    gemm_half_hidden: float  # model width at which the products reach half the best
    roofline_sharpness: float  # p of (memory^p + compute^p)^(1/p); large p is the plain max
    attention_unit_gbs: float  # bandwidth one attention work unit (a thread block) pulls
    split_tokens: int  # flash-decoding's context chunk per work unit
    allreduce_efficiency: float  # share of the one-way NVLink bandwidth an all-reduce reaches
    runtime_reserve_gib: float  # CUDA context, workspaces, communication buffers per card
    narrow_format_compute: dict[str, float] = field(default_factory=dict)  # of the FP8/FP4 peak
    dequant_bandwidth: dict[str, float] = field(default_factory=dict)


SHARED = SharedConstants(
    gemm_half_tokens=42.0,
    gemm_half_hidden=620.0,
    roofline_sharpness=1.65,
    attention_unit_gbs=44.0,
    split_tokens=512,
    allreduce_efficiency=0.57,
    runtime_reserve_gib=2.0,
    narrow_format_compute={"fp8": 0.73, "fp4": 0.49},
    dequant_bandwidth={"int8": 0.87, "int4": 1.0},
)

TENSORRT_LLM = EnginePreset(
    name="tensorrt-llm",
    label="TensorRT-LLM",
    bandwidth_efficiency=0.78,
    compute_efficiency=0.77,
    layer_overhead_us=49.0,
    step_overhead_us=12.0,
    allreduce_latency_us=17.5,
    kv_read_efficiency=0.86,
    max_batch=2048,
    flash_decoding=True,
    chunked_prefill=True,
    kv_memory="share_of_free",
    usable_memory_share=0.9,
    calibrated_on="TensorRT-LLM performance overview (v0.14 online, v0.17 and v1.0 maximum "
    "load), FasterTransformer 13B (kipply 2022)",
    sources=(
        "NVIDIA TensorRT-LLM, docs/source/performance/perf-overview.md (v0.17, v1.0): "
        "maximum-load output tokens/s of Llama 3.1 8B/70B/405B on H100, H200, A100, B200",
        "TensorRT-LLM defaults: kv_cache_free_gpu_mem_fraction 0.90, max_batch_size 2,048, "
        "max_num_tokens 8,192, multi-block (flash-decoding) attention, chunked context, "
        "custom one-shot/two-shot all-reduce inside an NVLink node",
    ),
)
VLLM = EnginePreset(
    name="vllm",
    label="vLLM",
    bandwidth_efficiency=0.83,
    compute_efficiency=TENSORRT_LLM.compute_efficiency,
    layer_overhead_us=27.0,
    step_overhead_us=1500.0,
    allreduce_latency_us=18.0,
    kv_read_efficiency=TENSORRT_LLM.kv_read_efficiency,
    max_batch=256,
    flash_decoding=True,
    chunked_prefill=True,
    kv_memory="share_of_total",
    usable_memory_share=0.9,
    calibrated_on="vLLM nightly performance benchmark, latency tests (A100, H100, H200)",
    sources=(
        "vLLM performance benchmark (buildkite.com/vllm/performance-benchmark, builds 9515, "
        "9523, 9555): end-to-end latency, batch 8, 32 in / 128 out, Llama 3.1 8B TP1 and "
        "Llama 3 70B TP4",
        "vLLM defaults: gpu_memory_utilization 0.90, max_num_seqs 256, CUDA graphs, "
        "chunked prefill, FlashAttention/FlashInfer split-KV decode",
    ),
)
SGLANG = EnginePreset(
    name="sglang",
    label="SGLang",
    bandwidth_efficiency=VLLM.bandwidth_efficiency,
    compute_efficiency=VLLM.compute_efficiency,
    layer_overhead_us=VLLM.layer_overhead_us,
    step_overhead_us=VLLM.step_overhead_us,
    allreduce_latency_us=VLLM.allreduce_latency_us,
    kv_read_efficiency=VLLM.kv_read_efficiency,
    max_batch=VLLM.max_batch,
    flash_decoding=True,
    chunked_prefill=True,
    kv_memory="share_of_total",
    usable_memory_share=0.88,
    calibrated_on="",
    sources=(
        "No published SGLang figure is in the calibration set: its efficiencies are vLLM's. "
        "LMSYS, 'Achieving Faster Open-Source Llama3 Serving with SGLang Runtime' (2024) "
        "reports throughput at or above vLLM's on the same cards, so this is on the safe side",
        "SGLang defaults: mem_fraction_static about 0.88 of the card, CUDA graphs, "
        "FlashInfer split-KV decode, chunked prefill",
    ),
)
PLAIN_PYTORCH = EnginePreset(
    name="plain-pytorch",
    label="Plain PyTorch",
    bandwidth_efficiency=0.86,
    compute_efficiency=0.71,
    layer_overhead_us=65.0,
    step_overhead_us=0.0,
    allreduce_latency_us=20.0,
    kv_read_efficiency=1.0,
    max_batch=1_000_000,
    flash_decoding=False,
    chunked_prefill=False,
    kv_memory="share_of_total",
    usable_memory_share=0.9,
    calibrated_on="this repository's H100 and H200 measurements (benchmarks/gpu/results)",
    sources=(
        "benchmarks/gpu/measure.py on H100 SXM and H200 (2026-11-26): eager PyTorch 2.11 "
        "with a static KV cache, one CUDA graph per step, SDPA attention without a split "
        "along the context, no torch.compile",
    ),
)

PYTORCH_COMPILED = EnginePreset(
    name="pytorch-compiled",
    label="PyTorch, torch.compile (gpt-fast)",
    bandwidth_efficiency=0.98,
    compute_efficiency=PLAIN_PYTORCH.compute_efficiency,
    layer_overhead_us=19.0,
    step_overhead_us=0.0,
    allreduce_latency_us=20.0,
    kv_read_efficiency=PLAIN_PYTORCH.kv_read_efficiency,
    max_batch=PLAIN_PYTORCH.max_batch,
    flash_decoding=False,
    chunked_prefill=False,
    kv_memory="share_of_total",
    usable_memory_share=0.9,
    calibrated_on="gpt-fast on A100 (batch 1; its compute efficiency is plain PyTorch's)",
    sources=(
        "pytorch-labs/gpt-fast README: Llama-2-7B/70B at batch 1 on A100-80GB (330 W), "
        "torch.compile (mode reduce-overhead: CUDA graphs, fused kernels), bf16, int8 and "
        "int4 weight-only, TP 1-8",
    ),
)

# Constants fitted on the calibration rows: 9 shared (the GEMM curve's two halves, the
# roofline's sharpness, the attention unit's bandwidth, the all-reduce efficiency, FP8 and FP4
# compute shares, int8 and int4 dequantisation), TensorRT-LLM 6, vLLM 4, plain PyTorch 4,
# compiled PyTorch 3. band.py widens the residuals' spread for them.
FITTED_CONSTANTS = 26

ENGINES: dict[str, EnginePreset] = {
    preset.name: preset for preset in (TENSORRT_LLM, VLLM, SGLANG, PLAIN_PYTORCH, PYTORCH_COMPILED)
}
DEFAULT_ENGINE = TENSORRT_LLM.name
