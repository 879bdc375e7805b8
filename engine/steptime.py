"""Time of one training step of a (tp, pp, v, cp, dp, micro-batch) split, vectorised.

The capacity planner's split search calls :func:`step_time_arrays` on every candidate split.
A step is what one card does (its per-card compute, from what the card achieves on each kind
of work) plus what the split adds on top (bubbles and exposed communication). The per-card
MFU is the useful model FLOPs over the compute time; the modeled scaling factor is the compute
time over the whole step. All arguments broadcast (one entry per split row); seconds are per
training step and card.

Per data-parallel replica a step runs ``m`` micro-batches of ``b`` sequences of ``s`` tokens
on ``t·p·c`` cards (tensor, pipeline, context parallel). Per card and micro-batch, with
``T = b·s/c`` tokens, ``L_p = ⌈L/p⌉`` layers and 3 passes (4 with full recomputation):

    matmuls    = 2·passes·T·(N_layers·L_p/L + N_out/p)/t ÷ (peak · e_gemm) + calls · t_call
    attention  = (3.5 + passes − 3) · 2·s·h·T·L_p/t ÷ (bf16 peak · e_att(block, h/heads))
    kernels    = (β_act·passes/3 + φ_fp8) · A·T·L_p + Q_fp4·T·L_p/t + λ·V·T/(t·p)
                                                                    bytes ÷ (HBM · e_hbm)
    weights    = β_w · N/(t·p)                                          bytes ÷ (HBM · e_hbm)
    compute    = m · (matmuls + attention + kernels + weights) + optimizer
                 (÷ multi_card_compute_share when the job has more than one card)
    useful     = k·N·m·b·s / (t·p·c·peak)                       per-card MFU = useful / compute
    bubble     = m · micro-batch time · (p − 1)/(v·m)           interleaved 1F1B
    tp, cp, pp, dp                                              exposed communication (below)
    scaling    = compute / (compute + bubble + tp + cp + pp + dp)

``N_layers`` and ``N_out`` are the matmul weights of the layers and of the output projection
(an FP8 or FP4 run keeps the latter in bf16; an FP4 run also a share of the former, and
quantises every GEMM operand: Q_fp4, engine.training_precision), ``A`` the layer's stored
activation bytes per token (Korthikanti et al. 2022, engine.memory), ``V`` the vocabulary.
e_gemm, e_att, e_hbm, t_call and the traffic constants are the defaults of engine/defaults.py,
each with its source; an entered or measured MFU replaces the per-card model
(compute = useful ÷ MFU).

Sources: Narayanan et al. 2021 (SC21, interleaved schedule and its bubble), Korthikanti et al.
2022 (sequence parallel collectives, activation bytes), Liu et al. 2023 (ring attention),
Rajbhandari et al. 2020 (ZeRO communication volume), Fleetwise's GPU measurements (GEMM,
attention and HBM efficiency). See docs/capacity-planning.md "Split search".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.defaults import (
    DEFAULTS,
    FACTOR_FLOOR,
    STACK_TRAFFIC_FAMILY,
    STACKS_WITH_ATTENTION_KERNEL_RATIO,
)
from engine.memory import ActivationRecompute, ModelShape, activation_bytes_per_token_layer
from engine.moe import active_params
from engine.moe_training import (
    MoeTraining,
    active_matmul_params,
    all_to_all_s,
    attention_width,
    communication_sm_slowdown,
    grouped_gemm_efficiency,
    params_per_model_rank,
    permutation_bytes,
    tokens_per_local_expert,
)
from engine.training_precision import quantisation_bytes_per_token_layer

FloatArray = NDArray[np.float64]
# (layers, hidden, seq_len) and (tp, pp, virtual stages, cp, dp, micro-batch sequences,
# micro-batches per replica), each broadcast over the split rows.
Shape = tuple[FloatArray, FloatArray, FloatArray]
Split = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]

BF16_BYTES = 2.0
BUCKET_PARAMS = 40e6
BUCKET_PARAMS_PER_RANK = 1e6
# GEMMs per layer and pass: QKV, attention output, MLP in (gate and up fused), MLP out.
GEMMS_PER_LAYER = 4.0
# Attention core per token and layer: forward 2·s·h FLOPs (causal: half the s × s square);
# the backward costs 2.5 forwards (five matmuls against two: FlashAttention's convention).
ATTENTION_PASSES = 3.5
# Where a step's time goes beyond the per-card compute (StepTime fields <part>_s).
STEP_PARTS: tuple[str, ...] = ("bubble", "tp", "cp", "pp", "dp", "ep", "fabric")


def _default(key: str) -> float:
    return float(DEFAULTS[key].value)


def ring_s(
    bytes_per_member: ArrayLike, members: ArrayLike, bytes_s: ArrayLike, latency_s: ArrayLike
) -> NDArray[np.float64]:
    """Seconds for a ring reduce-scatter or all-gather: (D−1)/D of the data, D−1 hops."""
    d = np.maximum(np.asarray(members, dtype=float), 1.0)
    data = np.asarray(bytes_per_member, dtype=float)
    hops = d - 1.0
    seconds: FloatArray = hops / d * data / np.asarray(bytes_s) + hops * np.asarray(latency_s)
    return seconds


@dataclass(frozen=True)
class StepTime:
    """Breakdown of one training step (seconds); `mfu` = useful / compute (per card),
    `scaling` = compute / step, in (0, 1]."""

    mfu: NDArray[np.float64]
    scaling: NDArray[np.float64]
    useful_s: NDArray[np.float64]  # the model FLOPs (k·N per token) at the card's peak
    compute_s: NDArray[np.float64]  # what one card spends on its share, split costs aside
    bubble_s: NDArray[np.float64]
    tp_s: NDArray[np.float64]
    cp_s: NDArray[np.float64]
    pp_s: NDArray[np.float64]
    dp_s: NDArray[np.float64]
    ep_s: NDArray[np.float64]  # the experts' dispatch and combine all-to-all, exposed
    fabric_s: NDArray[np.float64]  # the exposed seconds that ride on the scale-out fabric
    step_s: NDArray[np.float64]


@dataclass(frozen=True)
class Links:
    """Per-card link rates (bytes/s) and the fabric's per-hop latency (s). `cards_per_node`
    is how many cards share NVLink: the card's NVLink domain when known (72 on an NVL72 rack),
    else the node; groups within it ride NVLink, larger ones the fabric."""

    nvlink_bytes_s: ArrayLike
    fabric_bytes_s: ArrayLike
    fabric_latency_s: ArrayLike
    cards_per_node: ArrayLike


@dataclass(frozen=True)
class CardRates:
    """What one card achieves on each kind of work (per split row).

    `peak_flops_s` is the dense peak in the training precision (MFU's denominator);
    `matmul_flops_s` the large-GEMM rate in that precision and `bf16_matmul_flops_s` in bf16
    (peak × GEMM efficiency × cooling); `attention_peak_flops_s` the bf16 peak the attention
    kernel's efficiency applies to (× cooling, × the vendor's GEMM efficiency relative to
    NVIDIA's); `hbm_bytes_s` the achieved memory bandwidth. `mfu` is an entered or measured
    per-card MFU (NaN: modeled).
    """

    peak_flops_s: ArrayLike
    matmul_flops_s: ArrayLike
    bf16_matmul_flops_s: ArrayLike
    attention_peak_flops_s: ArrayLike
    hbm_bytes_s: ArrayLike
    mfu: ArrayLike = np.nan


@dataclass(frozen=True)
class Traffic:
    """Memory-bound traffic of the training stack: bytes per stored activation byte (β_act,
    per three passes), FP8 cast bytes per activation byte (φ), bytes per parameter per
    micro-batch (β_w) and per step in the optimizer, bytes per vocabulary entry per token."""

    per_activation_byte: float
    fp8_cast_per_activation_byte: float
    weight_bytes_per_param: float
    optimizer_bytes_per_param: float
    logits_bytes_per_vocab: float


@dataclass(frozen=True)
class Workload:
    """The model and how it trains (scalars, the same for every split row)."""

    params: float
    shape: ModelShape
    seq_len: float
    flops_per_param_token: float = 6.0
    recompute: ActivationRecompute = "selective"
    sequence_parallel: bool = True
    fp8: bool = False
    zero_stage: int = 1
    # FP4 (engine.training_precision): the layers' GEMMs at the FP4 rate but a share of them
    # kept in bf16, and the quantisation traffic of the 4-bit format (nvfp4 or mxfp4).
    fp4: bool = False
    bf16_layer_share: float = 0.0
    fp4_format: str = "nvfp4"
    # A mixture of experts (engine.moe_training): params is then every expert's weights (what
    # memory holds) and a token multiplies through the active ones only.
    moe: MoeTraining | None = None

    @property
    def flops_params(self) -> float:
        """N of the useful FLOPs (k·N per token): the active parameters of a mixture."""
        return self.params if self.moe is None else active_params(self.moe.shape)


def traffic_defaults(stack: str) -> Traffic:
    """The table's traffic constants of a software stack (engine.defaults)."""
    family = STACK_TRAFFIC_FAMILY[stack]
    return Traffic(
        per_activation_byte=_default(f"kernel_traffic_per_activation_byte_{family}"),
        fp8_cast_per_activation_byte=_default("fp8_cast_traffic_per_activation_byte"),
        weight_bytes_per_param=_default(f"weight_traffic_bytes_per_param_{family}"),
        optimizer_bytes_per_param=_default("optimizer_traffic_bytes_per_param"),
        logits_bytes_per_vocab=_default("logits_traffic_bytes_per_vocab"),
    )


def stack_attention_kernel_ratio(stack: str) -> float:
    """The stack's fused-attention kernel against the measured one (1 for most stacks)."""
    if stack in STACKS_WITH_ATTENTION_KERNEL_RATIO:
        return _default(f"attention_kernel_ratio_{stack}")
    return 1.0


def matmul_params(params: float, shape: ModelShape) -> tuple[float, float]:
    """Weights every token multiplies through: the layers' and the output projection's.

    The input embedding is a lookup, not a matmul; tied embeddings still multiply the output
    projection. Without a vocabulary every parameter counts as a layer weight."""
    if not shape.vocab:
        return float(params), 0.0
    table = float(shape.vocab * shape.hidden)
    embeddings = table if shape.tied_embeddings else 2.0 * table
    return max(float(params) - embeddings, 0.0), table


def attention_efficiency(tokens_per_rank: ArrayLike, head_dim: ArrayLike) -> FloatArray:
    """Share of the bf16 peak the fused attention kernel reaches, forward + backward:
    e_max · s/(s + s½) · d/(d + d½) (fitted to cuDNN/flash SDPA on H100 and H200)."""
    s = np.asarray(tokens_per_rank, dtype=np.float64)
    d = np.asarray(head_dim, dtype=np.float64)
    e: FloatArray = (
        _default("attention_efficiency_max")
        * s
        / (s + _default("attention_half_efficiency_tokens"))
        * d
        / (d + _default("attention_half_efficiency_head_dim"))
    )
    return e


def _passes(recompute: ActivationRecompute) -> float:
    """Passes over the weights per micro-batch: forward, two backward, one more forward when
    every layer is recomputed."""
    return 4.0 if recompute == "full" else 3.0


def _matmul_s(work: Workload, split: Split, card: CardRates, ep: ArrayLike = 1.0) -> FloatArray:
    """One micro-batch's GEMMs on one card: the layers' at the training precision, the output
    projection's in bf16, and a fixed cost per GEMM call. A mixture's routed experts run as
    grouped GEMMs at their efficiency, paced by the busiest expert (the capacity factor)."""
    t, p, _, c, _, b, _ = split
    layers = float(work.shape.layers)
    stage_layers = np.ceil(layers / p)
    passes = _passes(work.recompute)
    tokens = b * work.seq_len / c
    layer_mm, out_mm = matmul_params(work.params, work.shape)
    expert_rate = np.asarray(card.matmul_flops_s, dtype=np.float64)
    expert_mm = 0.0
    if work.moe is not None:
        layer_mm = active_matmul_params(work.moe) + work.moe.mtp_matmul_params - out_mm
        expert_mm = work.moe.routed_active_params
        layer_mm -= expert_mm
        per_expert = tokens_per_local_expert(work.moe.shape, tokens / t, ep)
        rates = (card.matmul_flops_s, card.hbm_bytes_s)
        expert_rate = expert_rate * grouped_gemm_efficiency(
            per_expert, work.moe.shape, rates, fp8=work.fp8
        )
        expert_rate = expert_rate / work.moe.capacity_factor
    share = 2.0 * passes * tokens / t * stage_layers / layers
    # The layers an FP4 recipe keeps in bf16 (spread evenly over the stages).
    kept = work.bf16_layer_share * layer_mm
    layer_mm -= kept
    out_flops = 2.0 * passes * tokens / t * out_mm / p
    calls = passes * (GEMMS_PER_LAYER * stage_layers + (out_mm > 0))
    seconds: FloatArray = (
        share * layer_mm / np.asarray(card.matmul_flops_s)
        + share * expert_mm / expert_rate
        + (out_flops + share * kept) / np.asarray(card.bf16_matmul_flops_s)
        + calls * _default("gemm_call_overhead_us") * 1e-6
    )
    return seconds


def _attention_s(work: Workload, split: Split, card: CardRates) -> FloatArray:
    """One micro-batch's causal attention core on one card, at the kernel's efficiency."""
    t, p, _, c, _, b, _ = split
    s = float(work.seq_len)
    passes = ATTENTION_PASSES + _passes(work.recompute) - 3.0
    width, head_dim = float(work.shape.hidden), work.shape.hidden / work.shape.heads
    if work.moe is not None:  # MLA's heads are wider than hidden / heads
        width, head_dim = attention_width(work.moe.shape)
    flops = passes * 2.0 * s * width * b * s / c / t * np.ceil(work.shape.layers / p)
    # Context parallelism balances the causal mask by cutting each sequence into 2·c chunks
    # (Megatron-Core, Llama 3): the kernel works on blocks of s/(2c) tokens.
    block = np.where(c > 1, s / (2.0 * c), s)
    rate = np.asarray(card.attention_peak_flops_s) * attention_efficiency(block, head_dim)
    seconds: FloatArray = flops / rate
    return seconds


def _memory_s(
    work: Workload, split: Split, card: CardRates, traffic: Traffic, ep: ArrayLike = 1.0
) -> FloatArray:
    """One micro-batch's memory-bound kernels on one card: traffic per stored activation byte
    (and FP8 casts), the loss over the vocabulary, the stack's pass over the weights."""
    t, p, _, c, _, b, _ = split
    shape = work.shape
    tokens = b * work.seq_len / c
    per_token_layer = activation_bytes_per_token_layer(
        shape.hidden, t, sequence_parallel=work.sequence_parallel, **shape.activation_terms()
    )
    activations = tokens * np.ceil(shape.layers / p) * per_token_layer
    per_activation = traffic.per_activation_byte * _passes(work.recompute) / 3.0
    if work.fp8:
        per_activation += traffic.fp8_cast_per_activation_byte
    kernel_bytes = (
        per_activation * activations
        + _quantisation_bytes(work, tokens, t, p)
        + traffic.logits_bytes_per_vocab * float(shape.vocab or 0) * tokens / (t * p)
        + traffic.weight_bytes_per_param
        * params_per_model_rank(work.moe, work.params, ep)
        / (t * p)
    )
    if work.moe is not None:  # the experts' token copies, gathered and scattered
        stage_share = np.ceil(shape.layers / p) / shape.layers
        kernel_bytes = kernel_bytes + stage_share * permutation_bytes(
            work.moe, tokens / t, _passes(work.recompute)
        )
    seconds: FloatArray = kernel_bytes / np.asarray(card.hbm_bytes_s)
    return seconds


def _quantisation_bytes(
    work: Workload, tokens: FloatArray, t: FloatArray, p: FloatArray
) -> FloatArray | float:
    """One micro-batch's FP4 quantisation traffic on one card (its FP4 layers only)."""
    if not work.fp4:
        return 0.0
    per_token_layer = quantisation_bytes_per_token_layer(
        work.shape, _passes(work.recompute), work.fp4_format
    )
    fp4_layers = np.ceil(work.shape.layers / p) * (1.0 - work.bf16_layer_share)
    moved: FloatArray = per_token_layer * tokens / t * fp4_layers
    return moved


def _micro_batch_s(
    work: Workload, split: Split, card: CardRates, traffic: Traffic, ep: ArrayLike = 1.0
) -> tuple[FloatArray, FloatArray]:
    """Per-card seconds of one micro-batch (matmuls, attention, memory-bound kernels and the
    weights' traffic), and of its attention core alone."""
    attention = _attention_s(work, split, card)
    matmul = _matmul_s(work, split, card, ep)
    total = matmul + attention + _memory_s(work, split, card, traffic, ep)
    return total, attention


def _optimizer_s(
    work: Workload, split: Split, card: CardRates, traffic: Traffic, ep: ArrayLike = 1.0
) -> FloatArray:
    """The optimizer step over this card's share of the state (ZeRO ≥ 1 shards it over the
    data- and context-parallel ranks; a mixture's experts over the dp·cp/ep ranks holding each,
    which leaves every card 1/(dp·cp) of the whole): memory-bound."""
    t, p, _, c, d, _, _ = split
    held = params_per_model_rank(work.moe, work.params, ep)
    state = np.where(work.zero_stage >= 1, work.params / (d * c), held)
    seconds: FloatArray = (
        traffic.optimizer_bytes_per_param * state / (t * p) / np.asarray(card.hbm_bytes_s)
    )
    return seconds


@dataclass(frozen=True)
class CardCompute:
    """Per-card seconds of one step, split costs aside."""

    useful_s: FloatArray
    compute_s: FloatArray
    micro_batch_s: FloatArray  # one micro-batch's share of compute (no optimizer step)
    attention_s: FloatArray  # the attention core of the whole step


def card_compute(
    work: Workload, split: Split, card: CardRates, traffic: Traffic, ep: ArrayLike = 1.0
) -> CardCompute:
    """What one card spends on its share of a step: the per-card model, or useful ÷ an entered
    MFU (which already holds every per-card cost)."""
    t, p, _, c, d, b, m = split
    useful = (
        work.flops_per_param_token
        * work.flops_params
        * m
        * b
        * work.seq_len
        / (t * p * c * np.asarray(card.peak_flops_s))
    )
    per_micro, attention = _micro_batch_s(work, split, card, traffic, ep)
    # A card of a multi-card job runs slower than one alone (sustained clocks of loaded nodes,
    # collective kernels sharing its SMs and memory, waits for the slowest card).
    synchronous = t * p * c * d > 1
    slowdown = np.where(synchronous, 1.0 / _default("multi_card_compute_share"), 1.0)
    per_micro, attention = per_micro * slowdown, attention * slowdown
    modeled = m * per_micro + _optimizer_s(work, split, card, traffic, ep) * slowdown
    entered = np.asarray(card.mfu, dtype=np.float64)
    given = ~np.isnan(entered)
    compute = np.where(given, useful / np.where(given, entered, 1.0), modeled)
    share = np.where(given, compute / modeled, 1.0)  # an entered MFU scales every part alike
    return CardCompute(
        useful_s=useful * np.ones_like(compute),
        compute_s=compute,
        micro_batch_s=np.where(given, compute / m, per_micro),
        attention_s=m * attention * share,
    )


def mfu_ceiling(
    work: Workload, card: CardRates, traffic: Traffic, cards: ArrayLike = 1
) -> FloatArray:
    """The most per-card MFU any split of `cards` cards reaches: no per-call, per-micro-batch
    or optimizer costs, the attention kernel at the whole sequence, the multi-card share beyond
    one card (a bound for deadline search; tensor, pipeline and context parallelism only shrink
    each card's share or its kernels)."""
    one = np.ones_like(np.asarray(card.peak_flops_s, dtype=np.float64))
    split: Split = (one, one, one, one, one, one * 1e9, one)
    bound = Traffic(
        traffic.per_activation_byte, traffic.fp8_cast_per_activation_byte, 0.0, 0.0, 0.0
    )
    per_micro, _ = _micro_batch_s(work, split, card, bound)  # per-call costs vanish at 1e9
    useful = work.flops_per_param_token * work.flops_params * 1e9 * work.seq_len
    share = np.where(np.asarray(cards) > 1, _default("multi_card_compute_share"), 1.0)
    ceiling: FloatArray = useful / np.asarray(card.peak_flops_s) / per_micro * share
    entered = np.asarray(card.mfu, dtype=np.float64)
    return np.clip(np.where(np.isnan(entered), ceiling, entered), FACTOR_FLOOR, 1.0)


def _tp_s(
    shape: Shape, split: Split, links: Links, passes: float, tp_overlap: ArrayLike
) -> FloatArray:
    """Sequence-parallel reduce-scatter + all-gather pairs of every layer on NVLink."""
    layers, hidden, s = shape
    t, p, _, c, _, b, m = split
    collectives = 2.0 * passes - 2.0  # 4 per layer, 6 with full recomputation
    per_collective = 2.0 * ring_s(BF16_BYTES * b * s / c * hidden, t, links.nvlink_bytes_s, 0.0)
    return m * np.ceil(layers / p) * collectives * per_collective * (1.0 - np.asarray(tp_overlap))


def _cp_s(
    shape: Shape, split: Split, links: Links, attention_s: FloatArray, kv_hidden: FloatArray
) -> FloatArray:
    """Ring attention: K and V chunks go round the c ranks (backward sends them and their
    gradients again); the exchange hides behind the attention compute it feeds."""
    layers, _, s = shape
    t, p, _, c, _, b, m = split
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(t * c > node, links.fabric_bytes_s, links.nvlink_bytes_s)
    chunk = 2.0 * BF16_BYTES * b * s / c * kv_hidden / t  # K and V of the local chunk
    exchange = m * np.ceil(layers / p) * 3.0 * (c - 1.0) * chunk / bw
    exposed: FloatArray = np.maximum(exchange - attention_s, 0.0)
    return exposed


def _pp_s(shape: Shape, split: Split, links: Links) -> FloatArray:
    """Pipeline fill and drain: 2·(p·v − 1) activation transfers on the critical path."""
    _, hidden, s = shape
    t, p, v, c, _, b, _ = split
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(t * c >= node, links.fabric_bytes_s, links.nvlink_bytes_s)
    transfer = BF16_BYTES * b * s / c * hidden / t / bw + np.asarray(links.fabric_latency_s)
    return np.where(p > 1, 2.0 * (p * v - 1.0) * transfer, 0.0)


def _dp_s(
    params: FloatArray,
    split: Split,
    links: Links,
    zero_stage: ArrayLike,
    windows: tuple[FloatArray, FloatArray],
    overlap: ArrayLike,
) -> FloatArray:
    """Gradient reduce-scatter in buckets behind the last backward, parameter all-gather
    behind the next first forward; one bucket (a layer's share) always stays exposed."""
    t, p, _, c, d, _, _ = split
    backward_s, forward_s = windows
    members = d * c  # context-parallel ranks hold the same weights
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(members * t * c <= node, links.nvlink_bytes_s, links.fabric_bytes_s)
    grads = BF16_BYTES * params / (t * p)
    half = ring_s(grads, members, bw, links.fabric_latency_s)  # one reduce-scatter or all-gather
    # Megatron-LM's DDP bucket: max(40M, 1M × DP size) parameters; the last one stays exposed.
    bucket_params = np.maximum(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * members)
    bucket = half * np.minimum(bucket_params * t * p / params, 1.0)
    o = np.asarray(overlap, dtype=float)
    zero = np.asarray(zero_stage, dtype=float)
    reduce = np.where(zero >= 1, half, 2.0 * half)  # ZeRO 0: a full all-reduce in backward
    exposed = np.maximum(reduce - o * backward_s, bucket)
    gather = np.where(zero >= 1, np.maximum(half - o * forward_s, bucket), 0.0)
    fsdp = np.where(zero >= 3, 2.0 * half, 0.0)  # ZeRO 3 gathers weights again in backward
    exposed_s: FloatArray = np.where(
        members > 1, exposed + gather + np.maximum(fsdp - o * backward_s, 0.0), 0.0
    )
    return exposed_s


def _ep_s(
    work: Workload, split: Split, links: Links, ep: FloatArray, micro_batch_s: FloatArray
) -> FloatArray:
    """The experts' all-to-all of a stage's MoE layers, behind the overlap share of the
    micro-batch's compute, and the compute the SMs it holds meanwhile cost
    (engine.moe_training)."""
    if work.moe is None:
        return np.zeros_like(micro_batch_s)
    t, p, _, c, _, b, m = split
    layers = float(work.shape.layers)
    link = (links.nvlink_bytes_s, links.fabric_bytes_s, links.fabric_latency_s)
    exchange = all_to_all_s(
        work.moe,
        b * work.seq_len / (c * t),
        ep,
        t,
        (*link, links.cards_per_node),
        passes=_passes(work.recompute),
        fp8=work.fp8,
    ) * (np.ceil(layers / p) / layers)
    exposed = np.maximum(exchange - work.moe.a2a_overlap * micro_batch_s, 0.0)
    lost = communication_sm_slowdown(work.moe, exchange, micro_batch_s)
    seconds: FloatArray = m * (exposed + lost)
    return seconds


def step_time_arrays(
    *,
    work: Workload,
    split: tuple[ArrayLike, ...],
    card: CardRates,
    links: Links,
    traffic: Traffic | None = None,
    dp_overlap: ArrayLike | None = None,
    tp_overlap: ArrayLike = 0.0,
    ep: ArrayLike = 1.0,
) -> StepTime:
    """Step time of every split row; `split` is (tp, pp, virtual stages, cp, dp, micro-batch
    sequences, micro-batches per replica), `ep` the expert-parallel degree (inside dp).
    `traffic` defaults to the Megatron stack's."""
    t, p, v, c, d, b, m = (np.asarray(x, dtype=np.float64) for x in split)
    ep_ = np.asarray(ep, dtype=np.float64) * np.ones_like(t)
    arrays: Split = (t, p, v, c, d, b, m)
    shape = work.shape
    dims: Shape = (
        np.asarray(float(shape.layers)),
        np.asarray(float(shape.hidden)),
        np.asarray(float(work.seq_len)),
    )
    per_card = card_compute(work, arrays, card, traffic or traffic_defaults("megatron"), ep_)
    compute = per_card.compute_s
    bubble = m * per_card.micro_batch_s * (p - 1.0) / (v * m)
    passes = _passes(work.recompute)
    tp = _tp_s(dims, arrays, links, passes, tp_overlap)
    cp = _cp_s(dims, arrays, links, per_card.attention_s, np.asarray(float(shape.kv_hidden)))
    pp = _pp_s(dims, arrays, links)
    # Gradients reduce behind the last backward and the pipeline's drain; weights gather behind
    # the next first forward and the fill (each virtual chunk starts as soon as it is done).
    per_micro = per_card.micro_batch_s
    k = 2.0 * passes
    windows = (per_micro * (k - 2.0) / k + bubble / 2.0, per_micro * 2.0 / k + bubble / 2.0)
    overlap = _default("dp_overlap_share") if dp_overlap is None else dp_overlap
    held = params_per_model_rank(work.moe, work.params, ep_)
    dp = _dp_s(held, arrays, links, work.zero_stage, windows, overlap)
    ep_s = _ep_s(work, arrays, links, ep_, per_micro)
    node = np.asarray(links.cards_per_node, dtype=float)
    fabric = pp * (t * c >= node) + cp * (t * c > node) + dp * (t * c * d > node)
    fabric = fabric + ep_s * (t * ep_ > node)
    step = compute + bubble + tp + cp + pp + dp + ep_s
    return StepTime(
        mfu=np.clip(per_card.useful_s / compute, FACTOR_FLOOR, 1.0),
        scaling=np.clip(compute / step, FACTOR_FLOOR, 1.0),
        useful_s=per_card.useful_s,
        compute_s=compute,
        bubble_s=bubble,
        tp_s=tp,
        cp_s=cp,
        pp_s=pp,
        dp_s=dp,
        ep_s=ep_s,
        fabric_s=fabric,
        step_s=step,
    )
