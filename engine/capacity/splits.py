"""Split search: every valid parallel split of each option's cards, with memory, scaling,
effective time and days; the fastest split that fits is kept per option."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from engine.capacity.options import blocking_save_hours, table_default
from engine.capacity.workload import SECONDS_PER_DAY, TrainingWorkload
from engine.defaults import FABRICS
from engine.limits import (
    check_grid,
)
from engine.memory import (
    LOGIT_BYTES,
    activation_bytes_per_card,
    in_flight_micro_batches,
    logits_bytes_per_card,
    model_state_bytes_per_card,
    usable_card_bytes,
)
from engine.parallelism import (
    CONTEXT_PARALLEL_CANDIDATES,
    enumerate_splits,
    scale_up_cards,
)
from engine.reliability import effective_time_arrays, restart_h_at
from engine.scaling import fabric_efficiency_of
from engine.steptime import (
    STEP_PARTS,
    CardRates,
    Links,
    StepTime,
    Workload,
    step_time_arrays,
    traffic_defaults,
)
from engine.training_precision import (
    bf16_layer_share,
    fp4_weight_copy_bytes,
    gemm_efficiency_ratio,
    saved_gemm_input_bytes,
)


def nvlink_reach(frame: pd.DataFrame) -> NDArray[np.int64]:
    """Cards each option's TP and EP groups may span on NVLink: the card's NVLink domain when
    the option gives it (an NVL72 rack: 72), else the node."""
    return scale_up_cards(frame["cards_per_node"].to_numpy(), frame["nvlink_domain_cards"])


def _links(frame: pd.DataFrame, row: NDArray[np.int64]) -> Links:
    """Per-card NVLink and fabric rates of each split row's option (bytes/s)."""

    def column(name: str) -> NDArray[np.float64]:
        return frame[name].to_numpy(np.float64)[row]

    fabric = frame["fabric"].to_numpy().astype(str)
    nvlink = column("intra_node_interconnect_gbs") / 2.0 * 1e9 * table_default("nvlink_efficiency")
    line_rate = column("inter_node_bandwidth_gbps_per_card") * 1e9 / 8.0
    efficiency = fabric_efficiency_of(fabric)[row] / column("fabric_oversubscription")
    latency_us = np.select(
        [fabric == f for f in FABRICS], [table_default(f"fabric_latency_us_{f}") for f in FABRICS]
    )[row]
    return Links(
        nvlink_bytes_s=nvlink,
        fabric_bytes_s=line_rate * efficiency,
        fabric_latency_s=latency_us * 1e-6,
        cards_per_node=nvlink_reach(frame).astype(np.float64)[row],
    )


def step_workload(workload: TrainingWorkload) -> Workload:
    """The model and how it trains, as the step-time model takes them."""
    return Workload(
        params=workload.params,
        shape=workload.model_shape,
        seq_len=float(workload.seq_len),
        flops_per_param_token=float(workload.flops_per_param_token),
        recompute=workload.activation_recompute,
        sequence_parallel=workload.sequence_parallel,
        fp8=workload.precision == "fp8",
        zero_stage=workload.zero_stage,
        moe=workload.moe_training,
        fp4=workload.precision == "fp4",
        bf16_layer_share=bf16_layer_share(workload.precision, workload.fp4_bf16_layer_share),
    )


def card_rates(frame: pd.DataFrame, row: NDArray[np.int64] | None = None) -> CardRates:
    """What each option's card achieves (per split row when `row` picks the options): the
    vendor's GEMM efficiency on the training precision's peak (FP8, FP4: × their ratio), the
    attention kernel on the bf16 peak (× the stack's attention_kernel_ratio), HBM at its
    efficiency; compute rates × cooling."""

    def column(name: str) -> NDArray[np.float64]:
        values = frame[name].to_numpy(np.float64)
        return values if row is None else values[row]

    bf16_peak = column("dense_bf16_tflops") * 1e12
    peak = column("peak_tflops") * 1e12
    # The stack's attention kernel against the measured one (a frame built by hand has none).
    has_ratio = "attention_kernel_ratio" in frame.columns
    kernel_ratio = column("attention_kernel_ratio") if has_ratio else 1.0
    gemm = column("gemm_efficiency") * column("cooling_performance")
    precision = frame["precision"].to_numpy()
    precision_share = gemm_efficiency_ratio(
        precision if row is None else precision[row], table_default("fp8_gemm_efficiency_ratio")
    )
    return CardRates(
        peak_flops_s=peak,
        matmul_flops_s=peak * gemm * precision_share,
        bf16_matmul_flops_s=bf16_peak * gemm,
        attention_peak_flops_s=bf16_peak
        * column("cooling_performance")
        * column("gemm_efficiency")
        / table_default("gemm_efficiency_nvidia")
        * kernel_ratio,
        hbm_bytes_s=column("memory_bandwidth_tbs") * 1e12 * table_default("hbm_efficiency"),
        mfu=column("mfu"),
    )


def _seam_step_time(
    workload: TrainingWorkload, frame: pd.DataFrame, splits: pd.DataFrame
) -> StepTime:
    """Modeled step time of each split row: engine.steptime.step_time_arrays."""
    row = splits["row"].to_numpy()
    split = tuple(
        splits[name].to_numpy(np.float64)
        for name in ("tp", "pp", "vp", "cp", "dp", "micro_batch", "micro_batches")
    )
    return step_time_arrays(
        work=step_workload(workload),
        split=split,
        card=card_rates(frame, row),
        links=_links(frame, row),
        traffic=traffic_defaults(workload.software_stack),
        dp_overlap=frame["comm_overlap_share"].to_numpy(np.float64)[row],
        tp_overlap=frame["tp_overlap_share"].to_numpy(np.float64)[row],
        ep=splits["ep"].to_numpy(np.float64),
    )


def _seam_effective_time(
    cards: NDArray[np.float64],
    mtbf_card_hours: NDArray[np.float64],
    checkpoint_save_hours: NDArray[np.float64],
    restart_hours: NDArray[np.float64],
    checkpoint_interval_hours: NDArray[np.float64],
    use_daly: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """Effective training time: engine.reliability.effective_time_arrays."""
    return effective_time_arrays(
        cards,
        mtbf_card_hours,
        checkpoint_save_hours,
        restart_hours,
        checkpoint_interval_hours,
        use_daly,
    ).effective_time


# --------------------------------------------------------------------------------------------
# Evaluation at given card counts
# --------------------------------------------------------------------------------------------


def effective_time_at_cards(frame: pd.DataFrame, cards: NDArray[np.float64]) -> NDArray[np.float64]:
    """Effective time of each prepared option at `cards`: the override, else the model with
    the restart grown to the job's size and asynchronous saves blocking only their copy."""
    cards = np.asarray(cards, dtype=np.float64)
    modeled = _seam_effective_time(
        cards,
        frame["mtbf_card_hours"].to_numpy(np.float64),
        blocking_save_hours(frame),
        restart_h_at(
            frame["restart_hours"].to_numpy(np.float64),
            cards,
            np.where(frame["restart_grows"], table_default("restart_growth_h_per_doubling"), 0.0),
        ),
        frame["checkpoint_interval_hours"].to_numpy(np.float64),
        (frame["checkpoint_interval_rule"] == "daly").to_numpy(),
    )
    return np.where(frame["effective_time"].isna(), modeled, frame["effective_time"])


# The chosen split's degrees and batch, as plan_capacity reports them.
SPLIT_DEGREES = (
    "tp",
    "pp",
    "vp",
    "cp",
    "dp",
    "ep",
    "micro_batch",
    "micro_batches",
    "global_batch",
)
SPLIT_COLUMNS = (
    *SPLIT_DEGREES,
    "state_bytes_per_card",
    "activation_bytes_per_card",
    "memory_per_card_bytes",
    "usable_memory_per_card_bytes",
    "fits_memory",
    "mfu",
    "scaling",
    "effective_time",
    "running_days",
    "days",
    *(f"{part}_share" for part in STEP_PARTS),
    "has_split",
)


def _activations(
    workload: TrainingWorkload, splits: pd.DataFrame, saved_input: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Peak activation bytes per card: the first pipeline stage's in-flight micro-batches, or
    the last stage's one micro-batch with the output layer's logits, whichever is more."""
    shape = workload.model_shape
    tp, pp, vp, cp, mb, m = (
        splits[name].to_numpy(np.float64)
        for name in ("tp", "pp", "vp", "cp", "micro_batch", "micro_batches")
    )
    terms = {
        "sequence_parallel": workload.sequence_parallel,
        "recompute": workload.activation_recompute,
        "cp": cp,
        "gemm_input_bytes": saved_input,
        **shape.activation_terms(),
    }
    args = (workload.seq_len, mb, shape.layers, shape.hidden, shape.heads, tp, pp)
    first = activation_bytes_per_card(*args, m, virtual_stages=vp, **terms)
    last = first / in_flight_micro_batches(pp, m, vp)  # one micro-batch of a stage's layers
    logits = logits_bytes_per_card(
        workload.seq_len, mb, shape.vocab or 0, tp, cp, LOGIT_BYTES[workload.software_stack]
    )
    peak: NDArray[np.float64] = np.maximum(first, last + logits)
    return peak


def _memory(workload: TrainingWorkload, frame: pd.DataFrame, splits: pd.DataFrame) -> None:
    """Model state (ZeRO over dp·cp; a mixture's routed experts split over ep and ZeRO over
    the dp·cp/ep ranks holding the same ones) and activations per card, and whether they fit."""
    row = splits["row"].to_numpy()
    tp, pp, cp, dp, ep = (
        splits[name].to_numpy(np.float64) for name in ("tp", "pp", "cp", "dp", "ep")
    )
    moe = workload.moe_training
    zero = workload.zero_stage
    # Bytes per parameter of the gradient buffer and the Adam state, by the recipe's precisions.
    per_param = workload.state_bytes
    if moe is None:
        state = model_state_bytes_per_card(workload.params, tp, pp, dp * cp, zero, **per_param)
    else:
        state = model_state_bytes_per_card(
            moe.replicated_params, tp, pp, dp * cp, zero, **per_param
        )
        state += model_state_bytes_per_card(
            moe.routed_params, tp * ep, pp, dp * cp / ep, zero, **per_param
        )
    share = 1.0 - bf16_layer_share(workload.precision, workload.fp4_bf16_layer_share)
    fmt = frame["fp4_format"].to_numpy(dtype=object)[row]
    if workload.precision == "fp4":  # the quantised copies of the FP4 layers' weights
        state = state + fp4_weight_copy_bytes(share * workload.params, tp, pp, fmt)
    saved_input = saved_gemm_input_bytes(workload.precision, workload.software_stack, share, fmt)
    activations = _activations(workload, splits, saved_input)
    usable = usable_card_bytes(
        frame["memory_gb"].to_numpy(np.float64)[row], workload.usable_memory_share
    )
    splits["state_bytes_per_card"] = state
    splits["activation_bytes_per_card"] = activations
    splits["memory_per_card_bytes"] = state + activations
    splits["usable_memory_per_card_bytes"] = usable
    splits["fits_memory"] = state + activations <= usable


def evaluate_splits(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: NDArray[np.int64]
) -> pd.DataFrame:
    """Every valid split of `cards[i]` cards for prepared option row i, with memory and days.

    `frame` comes from `prepare_options`; the result has one row per (option, split) and a
    `row` column giving the option's position in `frame`.
    """
    shape = workload.model_shape
    splits = enumerate_splits(
        cards,
        nvlink_reach(frame),
        layers=shape.layers,
        heads=shape.heads,
        global_batch=workload.batch_rule,
        micro_batch=workload.micro_batch,
        fixed=workload.parallelism,
        seq_len=workload.seq_len,
        experts=workload.experts,
    )
    row = splits["row"].to_numpy()
    n = np.asarray(cards, dtype=np.float64)[row]
    _memory(workload, frame, splits)
    step = _seam_step_time(workload, frame, splits)
    for part in STEP_PARTS:  # where each step's time goes, as a share of the step
        splits[f"{part}_share"] = getattr(step, f"{part}_s") / step.step_s
    # Per-card MFU of the split: the per-card model, or the entered figure (step.mfu keeps it).
    splits["mfu"] = step.mfu
    # The split is chosen on the modeled scaling even when an override fixes the reported value.
    splits["scaling_modeled"] = step.scaling
    scaling_override = frame["scaling"].to_numpy(np.float64)[row]
    splits["scaling"] = np.where(np.isnan(scaling_override), step.scaling, scaling_override)
    effective_time = effective_time_at_cards(frame, np.asarray(cards, dtype=np.float64))
    splits["effective_time"] = effective_time[row]
    peak_flops = frame["peak_tflops"].to_numpy(np.float64)[row] * 1e12
    mfu = step.mfu
    throughput = n * peak_flops * mfu * splits["scaling"].to_numpy() * effective_time[row]
    splits["running_days"] = workload.flops / throughput / SECONDS_PER_DAY
    splits["days"] = splits["running_days"] / frame["utilization"].to_numpy(np.float64)[row]
    return splits


# Cap on (option × split candidate) cells evaluated at once, to bound memory.
MAX_GRID_CELLS_PER_CHUNK = 2_000_000
# The dense grid is tp × pp × cp per option; virtual stages and micro-batches expand only
# the valid cells (sparse), and enumerate_splits sizes that expansion itself.
SEARCH_CELLS_PER_TP_PP = len(CONTEXT_PARALLEL_CANDIDATES)


def best_split_per_option(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: NDArray[np.int64]
) -> pd.DataFrame:
    """The fastest split that fits (else the one needing least memory), one row per option.

    Fastest is judged on the modeled scaling, so an overridden scaling still gets a sensible
    split; ties go to the split with most memory headroom, then the smallest TP.
    """
    columns = {name: np.full(len(frame), np.nan) for name in SPLIT_COLUMNS}
    cards = np.asarray(cards, dtype=np.int64)
    evaluable = frame["peak_tflops"].notna().to_numpy() & (cards >= 1)
    positions = np.flatnonzero(evaluable)
    shape = workload.model_shape
    cells_per_option = int(nvlink_reach(frame).max()) * shape.layers * SEARCH_CELLS_PER_TP_PP
    check_grid("layers" if workload.shape else "model_params", cells_per_option)
    chunk = max(1, MAX_GRID_CELLS_PER_CHUNK // max(cells_per_option, 1))
    picked: list[pd.DataFrame] = []
    for start in range(0, positions.size, chunk):  # chunks of options, not one per option
        part = positions[start : start + chunk]
        splits = evaluate_splits(workload, frame.iloc[part], cards[part])
        if splits.empty:
            continue
        fits = splits["fits_memory"].to_numpy()
        modeled_days = splits["days"].to_numpy() * (
            splits["scaling"].to_numpy() / splits["scaling_modeled"].to_numpy()
        )
        order = np.lexsort(
            (
                splits["ep"].to_numpy(),
                splits["vp"].to_numpy(),
                splits["cp"].to_numpy(),
                splits["tp"].to_numpy(),
                splits["memory_per_card_bytes"].to_numpy(),
                np.where(fits, modeled_days, 0.0),
                ~fits,
                splits["row"].to_numpy(),
            )
        )
        ordered_rows = splits["row"].to_numpy()[order]
        first = order[np.r_[True, ordered_rows[1:] != ordered_rows[:-1]]]
        best = splits.iloc[first].copy()
        best["position"] = part[best["row"].to_numpy()]
        picked.append(best)
    if picked:
        best = pd.concat(picked, ignore_index=True)
        target = best["position"].to_numpy()
        for column in SPLIT_COLUMNS:
            if column != "has_split":
                columns[column][target] = best[column].to_numpy(np.float64)
    result = pd.DataFrame(columns, index=frame.index)
    result["has_split"] = result["tp"].notna()
    result["fits_memory"] = result["fits_memory"].fillna(0.0).astype(bool)
    return result
