"""Memory wall of transformer training: model state (ZeRO) and activations.

Pure numpy; every function broadcasts over array arguments so the planner can
evaluate thousands of (option, split) rows at once.

Sources:
- Model state: mixed-precision Adam keeps 2 (bf16 weights) + 2 (bf16 gradients)
  + K = 12 (fp32 master weights, momentum, variance) bytes per parameter
  (Rajbhandari et al. 2020, "ZeRO", §3.1). Alibaba Cloud 2024 (docs/sources.md): 175B ->
  350 + 350 + 2,100 = 2,800 GB.
- ZeRO stages partition that state over the Nd data-parallel ranks (ZeRO §5):
  stage 0: (2+2+K)Ψ, stage 1: 2Ψ+2Ψ+KΨ/Nd, stage 2: 2Ψ+(2+K)Ψ/Nd, stage 3: (2+2+K)Ψ/Nd.
  Megatron-Core's distributed optimizer is stage 1 (its guide, "Distributed Optimizer":
  bf16 parameters with fp32 gradients keep 6 + 12/d bytes per parameter).
- The recipe's precisions change the 2 and the K: the gradient buffer is bf16 (2 bytes,
  Megatron-Core's DistributedDataParallelConfig.grad_reduce_in_fp32 = False) or fp32 (4); the
  Adam state is fp32 master weights and moments (K = 12, Megatron-Core's OptimizerConfig) or
  bf16 moments with the bf16 weights as the master copy (K = 4: NeMo's distributed Adam with
  optim.dtype bf16 keeps no master copy when the optimizer's dtype is the model's,
  megatron_base_model.setup_optimization; NeMo 24.07's Nemotron-4 340B recipe does this).
- The output layer's logits, on the last pipeline stage: s·b·V/(t·cp) values (vocabulary-
  parallel over tensor parallelism) at ``LOGIT_BYTES`` each for the software stack.
- Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in
  Large Transformer Models", Table 2 (bytes per transformer layer, 16-bit). FP8/FP4 training
  keeps each linear layer's input for its weight gradient as the quantised copy the forward
  GEMM used (Transformer Engine, transformer_engine/pytorch/module/linear.py: the input is
  saved with only its column-wise usage), so those tensors take 1 (FP8) or about 0.56
  (NVFP4) bytes per value instead of 2 (``gemm_input_bytes``).

Sizes are decimal: 1 GB = 1e9 bytes, as in the published sources and the catalog's memory_gb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

BYTES_PER_GB = 1e9
WEIGHT_BYTES_PER_PARAM = 2  # bf16/fp16 working copy of the weights
GRADIENT_BYTES_PER_PARAM = 2  # bf16/fp16 gradients
OPTIMIZER_BYTES_PER_PARAM = 12  # K in ZeRO: fp32 master weights + Adam momentum + variance

# Bytes per parameter of the gradient buffer, by the precision gradients are reduced in.
GRADIENT_BYTES: dict[str, float] = {"bf16": 2.0, "fp32": 4.0}
# K by the optimizer state's precision: fp32 master weights + moments, or bf16 moments only.
OPTIMIZER_STATE_BYTES: dict[str, float] = {"fp32": 12.0, "bf16": 4.0}
# The precisions either may be kept in (one choice list for the API's two fields).
STATE_PRECISIONS: tuple[str, ...] = ("bf16", "fp32")

# Share of a card's memory the model may use; the rest goes to the CUDA/ROCm context,
# NCCL buffers, allocator fragmentation and temporary workspaces (typically 5-10%).
DEFAULT_USABLE_MEMORY_SHARE = 0.90

# Shape heuristic when layers/hidden are unknown: GPT-3 family keeps hidden = 128 x layers
# (175B: 96 layers, 12,288 hidden) and N ~= 12 * layers * hidden^2 (Kaplan et al. 2020).
HIDDEN_PER_LAYER = 128
HEAD_DIM = 128
# Large models round hidden to 1,024 (heads a multiple of 8) so TP up to 8 divides the heads.
HIDDEN_QUANTUM_LARGE = 1024

# Bytes per activation value in Korthikanti's accounting (16-bit).
ACTIVATION_BYTES = 2.0
# Bytes per logit at the loss's peak, by software stack. Megatron's vocabulary-parallel cross
# entropy (megatron/core/tensor_parallel/cross_entropy.py) keeps the fp32 softmax (4) and
# turns it into the gradient, cast to bf16 (2) for the output layer's backward; plain PyTorch
# (F.cross_entropy on logits.float()) holds the bf16 logits (2), the fp32 log-softmax (4) and
# the fp32 and bf16 gradients (4 + 2), as benchmarks/gpu/measure.py budgets them.
LOGIT_BYTES: dict[str, float] = {"megatron": 6.0, "megatron_2024": 6.0, "plain_pytorch": 12.0}

ActivationRecompute = Literal["none", "selective", "full"]
ACTIVATION_RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


def training_state_bytes(
    params: ArrayLike,
    zero_stage: ArrayLike = 0,
    dp_degree: ArrayLike = 1,
    *,
    gradient_bytes: float = GRADIENT_BYTES_PER_PARAM,
    optimizer_bytes: float = OPTIMIZER_BYTES_PER_PARAM,
) -> NDArray[np.float64]:
    """Model-state bytes held by ONE data-parallel rank for `params` parameters (ZeRO §5).

    With zero_stage 0 (or dp_degree 1) this is the whole training state, 16 bytes/param with
    the default bf16 gradients and fp32 Adam state (`state_bytes_of` gives the others).
    """
    psi = np.asarray(params, dtype=np.float64)
    stage = np.asarray(zero_stage, dtype=np.int64)
    nd = np.asarray(dp_degree, dtype=np.float64)
    if np.any((stage < 0) | (stage > 3)):
        raise ValueError("zero_stage must be 0, 1, 2 or 3")
    if np.any(nd < 1):
        raise ValueError("dp_degree must be >= 1")
    weights = WEIGHT_BYTES_PER_PARAM * psi / np.where(stage >= 3, nd, 1.0)
    grads = gradient_bytes * psi / np.where(stage >= 2, nd, 1.0)
    optimizer = optimizer_bytes * psi / np.where(stage >= 1, nd, 1.0)
    return weights + grads + optimizer


def state_bytes_of(gradients: str = "bf16", optimizer_state: str = "fp32") -> dict[str, float]:
    """Keyword arguments of training_state_bytes for the recipe's gradient and optimizer-state
    precisions (GRADIENT_BYTES, OPTIMIZER_STATE_BYTES)."""
    if gradients not in GRADIENT_BYTES:
        raise ValueError(f"gradients must be one of {', '.join(GRADIENT_BYTES)}")
    if optimizer_state not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"optimizer_state must be one of {', '.join(OPTIMIZER_STATE_BYTES)}")
    return {
        "gradient_bytes": GRADIENT_BYTES[gradients],
        "optimizer_bytes": OPTIMIZER_STATE_BYTES[optimizer_state],
    }


def min_cards_for_state(
    params: ArrayLike,
    card_memory_gb: ArrayLike,
    usable_share: ArrayLike = DEFAULT_USABLE_MEMORY_SHARE,
    *,
    gradient_bytes: float = GRADIENT_BYTES_PER_PARAM,
    optimizer_bytes: float = OPTIMIZER_BYTES_PER_PARAM,
) -> NDArray[np.int64]:
    """Fewest cards that can hold the full training state (fully sharded), activations aside."""
    usable_bytes = (
        np.asarray(card_memory_gb, dtype=np.float64) * BYTES_PER_GB * np.asarray(usable_share)
    )
    state = training_state_bytes(
        params, gradient_bytes=gradient_bytes, optimizer_bytes=optimizer_bytes
    )
    # Tiny epsilon so that 2,800 GB / 80 GB stays 35, not 36 from float noise.
    cards: NDArray[np.int64] = np.ceil(state / usable_bytes - 1e-9).astype(np.int64)
    return cards


MlpKind = Literal["plain", "gated"]
MLP_KINDS: tuple[str, ...] = ("plain", "gated")
# GPT-3's MLP is 4 × hidden wide with two matrices; a gated MLP (SwiGLU: gate, up, down) has
# three, so the same parameters give it 2/3 of the width (Llama: 8/3 × hidden, rounded up).
FFN_PER_HIDDEN = 4
# model_params and the count of a given shape may differ this much (biases, norms, rounding).
SHAPE_PARAMS_TOLERANCE = 0.10


@dataclass(frozen=True)
class ModelShape:
    """Transformer shape; inferred from the parameter count when not given.

    Only layers, hidden and heads are needed; the rest refine it: `kv_heads` (grouped-query
    attention), `ffn_hidden` (the MLP's width; None: 4 × hidden), `mlp` ("gated": three
    matrices, SwiGLU), `vocab` (None: embeddings not counted) and `tied_embeddings` (the output
    projection shares the input embedding). Defaults reproduce the GPT-3-like shape exactly.
    """

    layers: int
    hidden: int
    heads: int
    kv_heads: int | None = None  # grouped-query attention; None: as many as the heads
    ffn_hidden: int | None = None  # MLP width; None: FFN_PER_HIDDEN × hidden
    vocab: int | None = None  # vocabulary; None: embeddings not counted
    tied_embeddings: bool = False
    mlp: MlpKind = "plain"

    @property
    def kv_hidden(self) -> int:
        """Width of the K and V projections (hidden × kv_heads / heads)."""
        return self.hidden * (self.kv_heads or self.heads) // self.heads

    @property
    def ffn(self) -> int:
        """Width of the MLP's hidden layer."""
        return self.ffn_hidden or FFN_PER_HIDDEN * self.hidden

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2

    @property
    def layer_params(self) -> int:
        """Weights of one layer: Q and O (h²), K and V (h × kv width), the MLP's matrices.

        GPT-3-like (kv = h, ffn = 4h, plain): 4h² + 8h² = 12h². Biases and norms are left out.
        """
        h = self.hidden
        return 2 * h * h + 2 * h * self.kv_hidden + self.mlp_matrices * h * self.ffn

    @property
    def embedding_params(self) -> int:
        """Input embedding and (untied) output projection: vocab × hidden each."""
        if not self.vocab:
            return 0
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> int:
        """N of the shape: layers × per-layer weights + embeddings."""
        return self.layers * self.layer_params + self.embedding_params

    @property
    def refines_activations(self) -> bool:
        """Whether GQA, the MLP's width or its kind change the per-layer activations."""
        return self.kv_heads is not None or self.ffn_hidden is not None or self.mlp != "plain"

    def activation_terms(self) -> dict[str, Any]:
        """Keyword arguments of activation_bytes_per_layer for this shape (none: GPT-3-like)."""
        if not self.refines_activations:
            return {}
        return {
            "kv_hidden": self.kv_hidden,
            "ffn_hidden": self.ffn,
            "gated_mlp": self.mlp == "gated",
        }

    def errors(self) -> dict[str, str]:
        """What makes the shape impossible, keyed by the API's field names."""
        errors: dict[str, str] = {}
        if self.heads >= 1 and self.hidden % self.heads:
            errors["attention_heads"] = f"Must divide hidden_size ({self.hidden})."
        kv = self.kv_heads
        if kv is not None and self.heads >= 1 and kv >= 1 and (kv > self.heads or self.heads % kv):
            errors["kv_heads"] = f"Must divide attention_heads ({self.heads})."
        if self.mlp not in MLP_KINDS:
            errors["mlp_kind"] = f"Must be one of {', '.join(MLP_KINDS)}."
        elif self.mlp == "gated" and self.ffn_hidden is None:
            errors["ffn_hidden_size"] = "Give the MLP's width with a gated MLP."
        if self.tied_embeddings and not self.vocab:
            errors["tied_embeddings"] = "Give vocab_size with tied embeddings."
        return errors

    @classmethod
    def infer(cls, params: float) -> ModelShape:
        """GPT-3-like shape: N = 12 L h^2, h = 128 L, head size 128.

        175B -> 96 layers x 12,288 (96 heads); 13B -> 40 x 5,120; 6.7B -> 32 x 4,096.
        """
        if params <= 0:
            raise ValueError("params must be positive")
        layers = max(1, round((params / (12 * HIDDEN_PER_LAYER**2)) ** (1 / 3)))
        exact_hidden = float(np.sqrt(params / (12 * layers)))
        quantum = HIDDEN_QUANTUM_LARGE if exact_hidden >= 2 * HIDDEN_QUANTUM_LARGE else HEAD_DIM
        hidden = max(HEAD_DIM, round(exact_hidden / quantum) * quantum)
        return cls(layers=int(layers), hidden=int(hidden), heads=int(hidden // HEAD_DIM))


def shape_params_error(
    params: float, shape: ModelShape, tolerance: float = SHAPE_PARAMS_TOLERANCE
) -> str | None:
    """The message when `params` and the shape's own count differ by more than `tolerance`."""
    counted = shape.params
    if counted <= 0 or abs(params - counted) <= tolerance * counted:
        return None
    embeddings = f" + {shape.embedding_params:.4g} embedding" if shape.embedding_params else ""
    return (
        f"{params:.4g} parameters given, but the shape has {counted:.4g} ({shape.layers} layers "
        f"× {shape.layer_params:.4g}{embeddings}): they differ by "
        f"{abs(params - counted) / counted:.0%}, more than {tolerance:.0%}. Give one of them, "
        "or make them agree."
    )


def activation_bytes_per_layer(
    seq_len: ArrayLike,
    micro_batch: ArrayLike,
    hidden: ArrayLike,
    heads: ArrayLike,
    tp: ArrayLike = 1,
    *,
    sequence_parallel: bool = True,
    recompute: ActivationRecompute = "none",
    kv_hidden: ArrayLike | None = None,
    ffn_hidden: ArrayLike | None = None,
    gated_mlp: bool = False,
    gemm_input_bytes: ArrayLike = ACTIVATION_BYTES,
) -> NDArray[np.float64]:
    """Activation bytes one transformer layer keeps per micro-batch (Korthikanti 2022, Table 2).

    - no recomputation, no parallelism: s·b·h·(34 + 5·a·s/h)
    - tensor parallel only: s·b·h·(10 + 24/t + 5·a·s/(h·t))
    - tensor + sequence parallel: s·b·h·(34 + 5·a·s/h) / t
    - selective recomputation (attention core recomputed): s·b·h·34/t (with SP; 10+24/t without)
    - full recomputation (only the layer input kept): 2·s·b·h

    The 24 that tensor parallelism splits is Q (2), K and V (4), the output projection's input
    (2) and the MLP's two 4h-wide tensors (16), in bytes per s·b·h. Given `kv_hidden` (GQA:
    K and V are kv_hidden wide), `ffn_hidden` (the MLP's width) or a gated MLP (three ffn-wide
    tensors: gate, up and their product), those terms are 2 + 4·kv/h + 2 + (4 or 6)·ffn/h.
    `gemm_input_bytes` below 2 keeps the linear layers' inputs quantised
    (_quantised_gemm_inputs).
    """
    if recompute not in ACTIVATION_RECOMPUTE_MODES:
        raise ValueError(f"recompute must be one of {ACTIVATION_RECOMPUTE_MODES}")
    s = np.asarray(seq_len, dtype=np.float64)
    b = np.asarray(micro_batch, dtype=np.float64)
    h = np.asarray(hidden, dtype=np.float64)
    a = np.asarray(heads, dtype=np.float64)
    t = np.asarray(tp, dtype=np.float64)
    sbh = s * b * h
    attention_core = 5.0 * a * s / h  # softmax, its dropout mask, Q·K^T: the part selective drops
    if recompute == "full":
        return 2.0 * sbh * np.ones_like(t)
    whole_less, split_less = _quantised_gemm_inputs(h, ffn_hidden, gemm_input_bytes)
    split = _tp_split_activations(h, kv_hidden, ffn_hidden, gated_mlp) - split_less
    # Sequence parallelism also splits the LayerNorm/dropout activations that TP alone keeps whole.
    whole = TP_WHOLE_ACTIVATIONS - whole_less
    linear = (whole + split) / t if sequence_parallel else whole + split / t
    if recompute == "selective":
        return sbh * linear
    return sbh * (linear + attention_core / t)


# Korthikanti 2022 §4.1, bytes per s·b·h: what tensor parallelism keeps whole (LayerNorm inputs
# 4, the attention and MLP inputs 2 + 2, their dropout masks 1 + 1) and what it splits.
TP_WHOLE_ACTIVATIONS = 10.0
TP_SPLIT_ACTIVATIONS = 24.0


def _tp_split_activations(
    hidden: NDArray[np.float64],
    kv_hidden: ArrayLike | None,
    ffn_hidden: ArrayLike | None,
    gated_mlp: bool,
) -> NDArray[np.float64] | float:
    """The bytes per s·b·h that tensor parallelism splits: 24 for a GPT-3-like layer."""
    if kv_hidden is None and ffn_hidden is None and not gated_mlp:
        return TP_SPLIT_ACTIVATIONS
    kv = hidden if kv_hidden is None else np.asarray(kv_hidden, dtype=np.float64)
    ffn = FFN_PER_HIDDEN * hidden if ffn_hidden is None else np.asarray(ffn_hidden, np.float64)
    mlp_tensors = 6.0 if gated_mlp else 4.0  # 2 bytes each: (gate, up, product) or (in, out)
    split: NDArray[np.float64] = 2.0 + 4.0 * kv / hidden + 2.0 + mlp_tensors * ffn / hidden
    return split


def _quantised_gemm_inputs(
    hidden: NDArray[np.float64], ffn_hidden: ArrayLike | None, gemm_input_bytes: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(whole, split) bytes per s·b·h that quantised saved GEMM inputs take off the 16-bit
    terms: the attention and MLP inputs (2 + 2, whole) and the second MLP matrix's input
    (2·ffn/h, split) shrink to the quantised size; the attention output stays 16-bit for the
    attention backward and its quantised copy for the output projection comes on top."""
    q = np.asarray(gemm_input_bytes, dtype=np.float64)
    ffn = FFN_PER_HIDDEN * hidden if ffn_hidden is None else np.asarray(ffn_hidden, np.float64)
    saved = ACTIVATION_BYTES - q
    extra_copy = np.where(q < ACTIVATION_BYTES, q, 0.0)
    return 2.0 * saved, saved * ffn / hidden - extra_copy


def activation_bytes_per_token_layer(
    hidden: ArrayLike,
    tp: ArrayLike = 1,
    *,
    sequence_parallel: bool = True,
    kv_hidden: ArrayLike | None = None,
    ffn_hidden: ArrayLike | None = None,
    gated_mlp: bool = False,
) -> NDArray[np.float64]:
    """Bytes one token stores per layer on one card, attention core aside (Korthikanti's
    linear terms: (10 + 24)·h for a GPT-3-like layer, the 24 following the shape): the size of
    the tensors the memory-bound kernels (norms, activations, residuals) read and write."""
    h = np.asarray(hidden, dtype=np.float64)
    t = np.asarray(tp, dtype=np.float64)
    split = _tp_split_activations(h, kv_hidden, ffn_hidden, gated_mlp)
    whole = TP_WHOLE_ACTIVATIONS
    per_token: NDArray[np.float64] = h * (
        (whole + split) / t if sequence_parallel else whole + split / t
    )
    return per_token


def in_flight_micro_batches(
    pp: ArrayLike, micro_batches: ArrayLike, virtual_stages: ArrayLike = 1
) -> NDArray[np.float64]:
    """Micro-batches whose activations the busiest pipeline stage holds at once.

    1F1B schedule: the first stage starts p micro-batches before its first backward,
    so it holds min(p, m) of them (Korthikanti 2022 §4.2.3; Narayanan et al. 2021). The
    interleaved schedule with v virtual stages holds (1 + (p − 1)/(p·v)) times more.
    """
    p = np.asarray(pp, dtype=np.float64)
    v = np.asarray(virtual_stages, dtype=np.float64)
    interleave = np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0)
    return np.minimum(p, np.asarray(micro_batches, np.float64)) * interleave


def activation_bytes_per_card(
    seq_len: ArrayLike,
    micro_batch: ArrayLike,
    shape_layers: ArrayLike,
    hidden: ArrayLike,
    heads: ArrayLike,
    tp: ArrayLike,
    pp: ArrayLike,
    micro_batches: ArrayLike,
    *,
    sequence_parallel: bool = True,
    recompute: ActivationRecompute = "none",
    cp: ArrayLike = 1,
    virtual_stages: ArrayLike = 1,
    kv_hidden: ArrayLike | None = None,
    ffn_hidden: ArrayLike | None = None,
    gated_mlp: bool = False,
    gemm_input_bytes: ArrayLike = ACTIVATION_BYTES,
) -> NDArray[np.float64]:
    """Peak activation bytes on the busiest card: per layer × layers/pp × in-flight micro-batches.

    With 1F1B the first stage holds min(p, m) micro-batches of L/p layers each, i.e. about
    L layers' worth when m >= p: pipeline parallelism alone does not shrink activations.
    Context parallelism over cp cards gives each card s/cp of every sequence.
    """
    per_layer = activation_bytes_per_layer(
        np.asarray(seq_len, dtype=np.float64) / np.asarray(cp, dtype=np.float64),
        micro_batch,
        hidden,
        heads,
        tp,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        kv_hidden=kv_hidden,
        ffn_hidden=ffn_hidden,
        gated_mlp=gated_mlp,
        gemm_input_bytes=gemm_input_bytes,
    )
    layers_per_stage = np.ceil(
        np.asarray(shape_layers, dtype=np.float64) / np.asarray(pp, dtype=np.float64)
    )
    return per_layer * layers_per_stage * in_flight_micro_batches(pp, micro_batches, virtual_stages)


def logits_bytes_per_card(
    seq_len: ArrayLike,
    micro_batch: ArrayLike,
    vocab: ArrayLike,
    tp: ArrayLike = 1,
    cp: ArrayLike = 1,
    bytes_per_logit: float = LOGIT_BYTES["megatron"],
) -> NDArray[np.float64]:
    """Bytes of one micro-batch's logits and their gradient on the last pipeline stage: every
    token's vocabulary scores, split over tensor parallelism (the vocabulary) and context
    parallelism (the tokens); 0 for a shape without a vocabulary."""
    values = (
        np.asarray(seq_len, dtype=np.float64)
        * np.asarray(micro_batch, dtype=np.float64)
        * np.asarray(vocab, dtype=np.float64)
        / (np.asarray(tp, dtype=np.float64) * np.asarray(cp, dtype=np.float64))
    )
    logits: NDArray[np.float64] = values * bytes_per_logit
    return logits


def model_state_bytes_per_card(
    params: ArrayLike,
    tp: ArrayLike,
    pp: ArrayLike,
    dp: ArrayLike,
    zero_stage: ArrayLike,
    *,
    gradient_bytes: float = GRADIENT_BYTES_PER_PARAM,
    optimizer_bytes: float = OPTIMIZER_BYTES_PER_PARAM,
) -> NDArray[np.float64]:
    """Training-state bytes per card: TP × PP split the parameters, ZeRO shards over DP."""
    params_per_model_shard = np.asarray(params, dtype=np.float64) / (
        np.asarray(tp, dtype=np.float64) * np.asarray(pp, dtype=np.float64)
    )
    return training_state_bytes(
        params_per_model_shard,
        zero_stage,
        dp,
        gradient_bytes=gradient_bytes,
        optimizer_bytes=optimizer_bytes,
    )


def usable_card_bytes(
    card_memory_gb: ArrayLike, usable_share: ArrayLike = DEFAULT_USABLE_MEMORY_SHARE
) -> NDArray[np.float64]:
    """Bytes of a card the model may use (memory × share left after framework overhead)."""
    usable: NDArray[np.float64] = (
        np.asarray(card_memory_gb, dtype=np.float64) * BYTES_PER_GB * np.asarray(usable_share)
    )
    return usable
