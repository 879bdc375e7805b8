"""Training precisions: which peak each one runs its GEMMs at, and what FP4 training adds.

bf16 runs every GEMM at the bf16 peak; fp8 runs the layers' GEMMs at the FP8 peak at a lower
achieved share (``fp8_gemm_efficiency_ratio`` of engine.defaults) and keeps the output
projection, attention and every other kernel in bf16. fp4 is built the same way, after the
published NVFP4 pretraining recipe (NVIDIA, "Pretraining Large Language Models with NVFP4",
arXiv 2509.25149, 2025):

- the linear layers' GEMMs (forward, data and weight gradients) run at the card's FP4 peak
  (``dense_fp4_tflops``) at ``FP4_GEMM_EFFICIENCY_RATIO`` of the bf16 GEMM efficiency; the
  format is NVFP4 (16-value blocks with an E4M3 scale and a per-tensor FP32 scale) on NVIDIA
  Blackwell and MXFP4 (32-value blocks with a power-of-two scale, OCP MX v1.0) elsewhere, e.g.
  AMD's MI355X;
- attention (softmax and its batched products), norms, embeddings, the output projection
  and the optimizer stay in bf16/fp32, as for fp8;
- a share of the linear layers stays in bf16 (the paper keeps about 16 %, mostly the last
  blocks: ``FP4_BF16_LAYER_SHARE``; NVIDIA's Megatron-Bridge performance recipes keep none);
- every GEMM operand is quantised: its bf16 values are read twice (the per-tensor amax, then
  the cast) and written as a row-wise and a column-wise FP4 copy (the transposed one feeds the
  weight-gradient GEMM, after a 16 × 16 random Hadamard transform fused into that cast):
  ``quantisation_bytes_per_token_layer``, memory-bound;
- memory keeps the bf16 weights, gradients and fp32 optimizer state of mixed precision plus
  the two quantised copies of each FP4 layer's weights (``fp4_weight_copy_bytes``);
  activations are Korthikanti et al. 2022's, with each linear layer's input kept quantised for
  its weight gradient, as for fp8 (``saved_gemm_input_bytes``).

The one fitted number, ``FP4_GEMM_EFFICIENCY_RATIO``, comes from the calibration runs of
engine/data/published_training_runs.json's "fp4_runs" that their rule names (written before
fitting: one GB200 row per model size of one release); the other NVFP4 runs there are held
back, only checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.memory import ModelShape

TRAINING_PRECISIONS: tuple[str, ...] = ("bf16", "fp8", "fp4")
PRECISION_ERROR = "must be 'bf16', 'fp8' or 'fp4'"
# The card's dense peak each precision's GEMMs run at (catalog and option columns).
PEAK_COLUMNS: Mapping[str, str] = {
    "bf16": "dense_bf16_tflops",
    "fp8": "dense_fp8_tflops",
    "fp4": "dense_fp4_tflops",
}
FP4_PEAK_COLUMN = PEAK_COLUMNS["fp4"]

# Achieved share of the FP4 peak in a training GEMM, relative to the bf16 GEMM efficiency,
# its quantisation aside, over Blackwell's own GEMM efficiency (gemm_efficiency_blackwell,
# docs/decisions/0017). Fitted on the two calibration runs of "fp4_runs" (the rule, written
# before fitting: the GB200 rows of Megatron-Bridge 26.04.01, one per model size): Llama 3 70B
# on 64 GB200 (4,864 tokens/s per GPU) and Llama 3.1 405B on 256 GB200 (1,184), NVFP4; 0.70 is
# the least-squares optimum of their log errors on a 0.01 grid (modeled +12.3 % and −10.3 %:
# no one value meets both, the 70B is the optimistic one). It was 0.73 (+16.5 %, −12.8 %)
# while the activations were counted in bf16 (docs/decisions/0022). 0.57 met the 70B alone and
# left the other 26.04.01 rows (405B, GB300) 14–26 % short. Below the FP8 ratio (0.89), as
# 4-bit tensor cores are harder to feed; NVIDIA's cuBLAS 12.9 notes (developer.nvidia.com/blog/
# boosting-matrix-multiplication-speed-and-flexibility-with-nvidia-cublas-12-9) give
# block-scaled FP4 GEMMs up to 2.3× the FP8 ones on Blackwell, i.e. at most ≈ 1.02 on this
# scale.
FP4_GEMM_EFFICIENCY_RATIO = 0.70
# Share of the linear layers the NVFP4 recipe keeps in bf16 (arXiv 2509.25149 §4: ~16 %).
FP4_BF16_LAYER_SHARE = 0.16
# Bytes per stored FP4 value with its block scale: NVFP4 4 bits + an 8-bit scale per 16
# values; MXFP4 4 bits + an 8-bit scale per 32 (the per-tensor FP32 scale is negligible).
FP4_BYTES_PER_VALUE: Mapping[str, float] = {"nvfp4": 4.5 / 8.0, "mxfp4": 4.25 / 8.0}
# Quantised copies of each operand: row-wise (forward, data gradient) and column-wise (the
# weight gradient's transposed operand).
FP4_COPIES = 2.0
# Bytes per value of a linear layer's input kept for its weight gradient under FP8: Transformer
# Engine saves the quantised copy its forward GEMM used (transformer_engine/pytorch/module/
# linear.py, column-wise usage only), 1 byte (MXFP8's scale per 32 values aside).
FP8_SAVED_INPUT_BYTES = 1.0
# The stacks whose FP8/FP4 layers are Transformer Engine's (plain PyTorch keeps bf16 inputs).
QUANTISED_INPUT_STACKS: tuple[str, ...] = ("megatron", "megatron_2024")
# bf16 reads per quantised value: one for the per-tensor amax, one for the cast.
QUANTISE_READ_BYTES = 2.0 * 2.0


def fp4_format(vendor: str) -> str:
    """The 4-bit training format of a card: NVFP4 on NVIDIA (Blackwell), MXFP4 elsewhere."""
    return "mxfp4" if vendor.strip().lower() not in ("", "nvidia") else "nvfp4"


def peak_column(precision: str) -> str:
    """The option column holding the dense peak a precision's GEMMs run at."""
    return PEAK_COLUMNS[precision]


def gemm_efficiency_ratio(precision: ArrayLike, fp8_ratio: float) -> NDArray[np.float64]:
    """Achieved share of each precision's peak relative to the bf16 GEMM efficiency."""
    p = np.asarray(precision)
    ratio: NDArray[np.float64] = np.select(
        [p == "fp8", p == "fp4"], [fp8_ratio, FP4_GEMM_EFFICIENCY_RATIO], 1.0
    ).astype(np.float64)
    return ratio


def bf16_layer_share(precision: str, entered: float | None) -> float:
    """Share of the layers' GEMMs run in bf16: the entered share under fp4, else the
    recipe's; none under bf16 (all are) or fp8 (Megatron's FP8 recipes keep none)."""
    if precision != "fp4":
        return 0.0
    return FP4_BF16_LAYER_SHARE if entered is None else float(entered)


def saved_gemm_input_bytes(
    precision: str, software_stack: str, fp4_share: float, fmt: ArrayLike
) -> NDArray[np.float64]:
    """Bytes per value of the linear layers' inputs kept for the backward, per format in
    `fmt`: 2 (bf16, or a stack that keeps them unquantised); 1 under fp8; under fp4 the FP4
    layers' block-scaled size and 2 for the share left in bf16."""
    formats = np.atleast_1d(np.asarray(fmt, dtype=object))
    bf16 = np.full(len(formats), 2.0)
    if software_stack not in QUANTISED_INPUT_STACKS or precision == "bf16":
        return bf16
    if precision == "fp8":
        return np.full(len(formats), FP8_SAVED_INPUT_BYTES)
    fp4 = fp4_bytes_per_value(formats)
    mixed: NDArray[np.float64] = fp4_share * fp4 + (1.0 - fp4_share) * bf16
    return mixed


def quantisation_bytes_per_token_layer(shape: ModelShape, passes: float, fmt: str) -> float:
    """HBM bytes one token's FP4 quantisation moves in one layer (before tensor parallelism):
    the forward GEMMs' inputs (again under full recomputation) and the backward's output
    gradients, each read twice in bf16 and written as two FP4 copies."""
    h, ffn = float(shape.hidden), float(shape.ffn)
    mlp_in = ffn * (shape.mlp_matrices - 1)  # the gated MLP's gate and up projections
    forward = 3.0 * h + ffn  # QKV, attention output, MLP in and MLP out inputs
    backward = h + 2.0 * float(shape.kv_hidden) + h + mlp_in + h  # their output gradients
    per_value = QUANTISE_READ_BYTES + FP4_COPIES * FP4_BYTES_PER_VALUE[fmt]
    return per_value * (forward * (passes - 2.0) + backward)


def fp4_bytes_per_value(fmt: Iterable[str] | str | ArrayLike) -> NDArray[np.float64]:
    """Bytes per stored value, block scale included, of each FP4 format in `fmt`."""
    formats = np.asarray(fmt, dtype=object)
    per_value: NDArray[np.float64] = np.vectorize(FP4_BYTES_PER_VALUE.__getitem__, otypes=[float])(
        formats
    )
    return per_value


def fp4_weight_copy_bytes(
    layer_params: ArrayLike, tp: ArrayLike, pp: ArrayLike, fmt: Iterable[str] | str
) -> NDArray[np.float64]:
    """Per card: the row- and column-wise FP4 copies of the layers' weights it holds (not
    sharded by ZeRO: every data-parallel rank multiplies through them)."""
    per_value = fp4_bytes_per_value(fmt)
    shard = np.asarray(layer_params, dtype=np.float64) / (
        np.asarray(tp, dtype=np.float64) * np.asarray(pp, dtype=np.float64)
    )
    copies: NDArray[np.float64] = FP4_COPIES * per_value * shard
    return copies


def missing_fp4_message(card: str, cards_with_fp4: Iterable[str]) -> str:
    """Why a card cannot train in fp4, naming the catalog cards that can."""
    names = ", ".join(sorted(cards_with_fp4)) or "none in the catalog"
    return f"fp4 requested but {card} has no dense FP4 peak. Cards with one: {names}."
