"""Vectorised entry point: the five factors of many pools at once (spec §1–§5).

:func:`evaluate_pools` takes one frame row per node group and one per pool and returns one
row per pool; everything is computed with numpy over whole columns (no loop per pool or
card). :func:`evaluate_pool` is the scalar calculator: it builds one-row frames and calls
the same code. Column schemas are in :data:`NODE_GROUP_COLUMNS`, :data:`POOL_COLUMNS`,
:data:`SPEEDUP_COLUMNS` and :data:`OUTPUT_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from planner.engine.aggregate import attribute_waste_arrays
from planner.engine.defaults import (
    COOLING_TYPES,
    DEFAULTS,
    FABRICS,
    FACTOR_FLOOR,
    INTERVAL_RULES,
    PROVENANCES,
    STRATEGIES,
    VENDOR_KEYS,
    WORKLOAD_CLASSES,
    resolve_choice_codes,
    resolve_column,
    validate_override_frame,
)
from planner.engine.factors import (
    ENERGY_BASES,
    ENERGY_PROVENANCE,
    FACTOR_NAMES,
    MFU_BASES,
    MFU_PROVENANCE,
    UTILIZATION_BASES,
    UTILIZATION_PROVENANCE,
    FactorResult,
    choice_lookup,
    default_mfu_arrays,
    energy_arrays,
    group_mfu_arrays,
    mfu_from_throughput,
    require,
    utilization_arrays,
    vendor_codes,
)
from planner.engine.heterogeneous import (
    SPLIT,
    bucket_arrays,
    recommend_strategy,
    why_categorical,
)
from planner.engine.reliability import effective_time_arrays, mtbf_card_from_failures
from planner.engine.scaling import ScalingArrays, modeled_scaling_arrays, speedup_efficiency
from planner.engine.segments import Segments

NODE_GROUP_COLUMNS: Mapping[str, str] = {
    "pool_id": "required; the pool this node group belongs to (matches the pools frame)",
    "accelerator": "required; card model name, e.g. 'H100 SXM5 80GB' (mixing is detected by name)",
    "vendor": "required; 'NVIDIA', 'AMD', 'Huawei', 'Intel' or other (case-insensitive)",
    "peak_tflops": "required; dense BF16 peak per card, TFLOP/s",
    "nodes": "required; number of nodes",
    "cards_per_node": "required; cards in each node",
    "nvlink_bidir_gbs": "optional; intra-node card-to-card bandwidth, GB/s in both directions "
    "as vendors print it (NaN → intra_node_bidir_gbs default)",
    "default_mfu": "optional; catalog default per-card MFU of this model (NaN → vendor default)",
    "mfu": "optional; MFU measured or entered for this card model in this pool (wins over pool)",
    "mfu_from_jobs": "optional; 1 when mfu was filled from this period's job records (measured)",
}

POOL_COLUMNS: Mapping[str, str] = {
    "pool_id": "index or column; unique",
    "site_id, cluster_id": "optional; passed through for aggregation",
    "cooling": "site cooling type: air | rear_door | direct_liquid | immersion (NaN → default)",
    "fabric": "cluster fabric: infiniband | roce | ethernet (NaN → default)",
    "workload_class": "pretraining | finetuning | inference (NaN → default)",
    "duration_h": "period length, h (NaN → default)",
    "pue": "entered PUE for the period (measured)",
    "facility_kwh, it_kwh": "meter readings for the period, kWh (measured; win over pue)",
    "meters_outside_period": "1 when the meter readings are of another period: their PUE is "
    "used, labelled modeled (basis metered_kwh_other_period)",
    "mfu": "MFU entered for the whole pool (measured)",
    "job_tokens_per_s": "measured tokens/s of the representative job (needs model_params)",
    "job_cards": "cards of the representative job (NaN → all the pool's cards)",
    "model_params": "parameters N of the representative job (NaN → reference workload)",
    "global_batch_tokens": "tokens per optimizer step (NaN → microbatches_per_replica)",
    "model_hidden_size": "hidden size of the model (NaN → estimated from model_params)",
    "tensor_parallel, pipeline_parallel": "job shape t, p (NaN → defaults; t capped at the node)",
    "checkpoint_interval_h": "entered checkpoint interval τ, h (NaN → checkpoint_interval_rule)",
    "failure_count, failure_exposure_card_h": "failures observed over card-hours (measured MTBF)",
    "mtbf_card_h": "entered per-card MTBF, h, used as given (NaN → default ÷ cooling factor)",
    "productive_h, wall_h": "job logs: productive and wall-clock hours (measured effective time)",
    "utilization_measured": "allocated ÷ available card-hours from usage records (measured)",
    "allocated_card_h": "allocated card-hours in the period from usage records (measured)",
    "utilization_planned": "entered planning assumption (modeled; NaN → default)",
    "cost_per_card_h": "money per card-hour (NaN → money columns are NaN)",
    "strategy": "heterogeneous strategy actually run (NaN → the recommended one)",
    "must_span_pool": "bool; one job must use the whole pool, so split_homogeneous is excluded",
    "<any DEFAULTS key>": "per-pool override of a default (NaN → table); see layer_overrides",
}

SPEEDUP_COLUMNS: Mapping[str, str] = {
    "pool_id": "pool the measurement belongs to",
    "cards": "cards in the measured run",
    "throughput": "measured throughput at that size (any unit, consistent within the pool)",
}

OUTPUT_COLUMNS: Mapping[str, str] = {
    "<factor>": "energy, mfu, scaling, effective_time, utilization: value in (0, 1]",
    "<factor>_provenance": "measured | modeled | default",
    "<factor>_basis": "which input produced the value (e.g. metered_kwh, card_default)",
    "<factor>_defaults": "comma-separated DEFAULTS keys whose table value was used ('' if none)",
    "product": "energy × mfu × scaling × effective_time × utilization",
    "cards, job_cards, peak_pflops, duration_h, card_h": "size of the pool and the period",
    "peak_pflop_days, effective_pflop_days": "peak compute of the period and its delivered share",
    "cooling, fabric, pue, cooling_performance": "inputs behind energy and default MFU",
    "scaling_model, heterogeneity": "scaling = scaling_model × heterogeneity (modeled mode)",
    "tensor_parallel, pipeline_parallel, data_parallel, microbatches_per_replica": "job shape",
    "bubble_fraction, tp_comm_share, dp_exposed_share, tp_crosses_nodes": "scaling breakdown of "
    "the joint job (shares are of compute time; NaN when split_homogeneous is used)",
    "mtbf_card_h, mtbf_card_basis, mtbf_job_h": "failure model inputs",
    "checkpoint_save_h, restart_h, checkpoint_interval_h": "checkpoint model inputs",
    "lost_checkpoint_share, lost_rework_share, lost_restart_share": "effective-time breakdown",
    "effective_time_stalled": "the job cannot progress: the factor is stored as FACTOR_FLOOR",
    "card_models, vendors, mixing_penalty, microbatches, static_balance": "bucket-effect inputs",
    "h_<strategy>": "heterogeneity factor of each strategy",
    "delivered_pflops_<strategy>": "model PFLOP/s after scaling and failures (before energy "
    "and utilization) under each strategy",
    "split_largest_job_pflops": "delivered PFLOP/s of the largest job under split_homogeneous",
    "recommended_strategy, strategy, strategy_why": "recommendation, strategy used, and why",
    "lost_share, lost_share_<factor>": "1 − product, split in proportion to −ln(factor)",
    "lost_<factor>_card_h, lost_<factor>_pflop_days, lost_<factor>_money": "the same in units",
}


_INTERVAL_DALY = INTERVAL_RULES.index("daly")
_MTBF_BASES: tuple[str, ...] = ("failures_measured", "entered", "cooling_adjusted_default")


def _optional(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Float column or all-NaN if absent."""
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="raise").to_numpy(dtype=float, na_value=np.nan)


def _categorical(codes: np.ndarray, names: Sequence[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int64), categories=list(names))


def _defaults_column(used: Sequence[tuple[str, np.ndarray]], n_rows: int) -> pd.Categorical:
    """Comma-separated names of the defaults used per row, built from bit masks (no row loop)."""
    bits = np.zeros(n_rows, dtype=np.int64)
    for position, (_, mask) in enumerate(used):
        bits |= np.asarray(mask, dtype=np.int64) << position
    codes, unique_bits = pd.factorize(bits, sort=True)
    names = [
        ", ".join(name for position, (name, _) in enumerate(used) if value >> position & 1)
        for value in unique_bits.tolist()
    ]
    return pd.Categorical.from_codes(codes, categories=names)


def _rescaled(arrays: ScalingArrays, speed_factor: np.ndarray) -> np.ndarray:
    """Scaling when cards run ``speed_factor`` times faster: compute and bubble shrink, comm not."""
    compute = arrays.compute_s / speed_factor
    bubble = arrays.bubble_s / speed_factor
    return np.clip(
        compute / (compute + arrays.tp_comm_s + arrays.dp_exposed_s + bubble), FACTOR_FLOOR, 1.0
    )


def _pool_frame(pools: pd.DataFrame) -> pd.DataFrame:
    if "pool_id" in pools.columns:
        pools = pools.set_index("pool_id")
    if not pools.index.is_unique:
        raise ValueError("pool ids must be unique")
    return pools


def evaluate_pools(
    node_groups: pd.DataFrame,
    pools: pd.DataFrame,
    speedup: pd.DataFrame | None = None,
    passthrough: Sequence[str] = ("site_id", "cluster_id"),
) -> pd.DataFrame:
    """The five factors, their product, heterogeneous strategies and waste attribution per pool.

    Inputs are described in :data:`NODE_GROUP_COLUMNS` (one row per node group),
    :data:`POOL_COLUMNS` (one row per pool; NaN = not given) and :data:`SPEEDUP_COLUMNS`
    (optional measured speed-up points). Returns a frame indexed by pool id with the
    columns of :data:`OUTPUT_COLUMNS`, plus ``passthrough`` columns present in ``pools``.
    Raises :class:`~planner.engine.factors.EngineInputError` (a ``ValueError``) naming the
    column and pools for impossible inputs, and the defaults errors for bad overrides.
    """
    pools = _pool_frame(pools)
    validate_override_frame(pools, "pool")
    labels = pools.index
    n_pools = len(pools)
    missing = [
        c for c in ("pool_id", *list(NODE_GROUP_COLUMNS)[1:6]) if c not in node_groups.columns
    ]
    if missing:
        raise ValueError(f"node_groups frame is missing column(s) {missing}")

    resolved: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def setting(key: str) -> np.ndarray:
        if key not in resolved:
            resolved[key] = resolve_column(pools, key)
        return resolved[key][0]

    def defaulted(key: str) -> np.ndarray:
        setting(key)
        return resolved[key][1]

    # --- node groups -------------------------------------------------------------------
    group_pool = labels.get_indexer(node_groups["pool_id"])
    require(
        group_pool >= 0, "node_groups.pool_id not found in pools", node_groups["pool_id"].tolist()
    )
    if n_pools == 0:
        raise ValueError("no pools to evaluate")
    require(np.bincount(group_pool, minlength=n_pools) > 0, "pool has no node groups", labels)
    pool_segments = Segments(group_pool, n_pools)
    nodes = _optional(node_groups, "nodes")
    cards_per_node = _optional(node_groups, "cards_per_node")
    cards = nodes * cards_per_node
    peak = _optional(node_groups, "peak_tflops")
    require(
        (cards > 0) & (peak > 0),
        "node groups need nodes, cards_per_node and peak_tflops > 0",
        node_groups["pool_id"].tolist(),
    )
    vendor_index, vendor_names = pd.factorize(node_groups["vendor"].astype(str))
    vendor = vendor_codes(np.asarray(vendor_names, dtype=str))[vendor_index]
    accelerator_code, accelerators = pd.factorize(node_groups["accelerator"].astype(str))
    nvlink_given = _optional(node_groups, "nvlink_bidir_gbs")
    nvlink = np.where(
        np.isnan(nvlink_given), setting("intra_node_bidir_gbs")[group_pool], nvlink_given
    )

    cooling, cooling_defaulted = resolve_choice_codes(pools, "cooling")
    fabric, fabric_defaulted = resolve_choice_codes(pools, "fabric")
    workload, workload_defaulted = resolve_choice_codes(pools, "workload_class")
    interval_rule, rule_defaulted = resolve_choice_codes(pools, "checkpoint_interval_rule")

    pool_cards = pool_segments.sum(cards)
    pool_peak_tflops = pool_segments.sum(cards * peak)

    # --- MFU per node group, then per pool ------------------------------------------------
    k = setting("flops_per_param_token")
    params_entered = _optional(pools, "model_params")
    tokens_per_s = _optional(pools, "job_tokens_per_s")
    require(
        np.isnan(tokens_per_s) | ~np.isnan(params_entered),
        "job_tokens_per_s needs model_params to derive MFU",
        labels,
    )
    job_cards_given = _optional(pools, "job_cards")
    job_cards = np.where(np.isnan(job_cards_given), pool_cards, job_cards_given)
    require(
        (job_cards > 0) & (job_cards <= pool_cards), "job_cards must be in (0, pool cards]", labels
    )
    derived_mfu = mfu_from_throughput(
        params_entered, tokens_per_s, job_cards, pool_peak_tflops / pool_cards, k
    )
    vendor_fallback = choice_lookup(
        vendor, [setting(f"mfu_default_{v}")[group_pool] for v in VENDOR_KEYS]
    )
    workload_factor = choice_lookup(
        workload, [setting(f"workload_mfu_{w}") for w in WORKLOAD_CLASSES]
    )
    cooling_performance = choice_lookup(
        cooling, [setting(f"cooling_performance_{c}") for c in COOLING_TYPES]
    )
    card_default = _optional(node_groups, "default_mfu")
    default_mfu = default_mfu_arrays(
        card_default, vendor_fallback, workload_factor[group_pool], cooling_performance[group_pool]
    )
    group_mfu, group_basis = group_mfu_arrays(
        _optional(node_groups, "mfu"),
        derived_mfu[group_pool],
        _optional(pools, "mfu")[group_pool],
        default_mfu,
    )
    # A group MFU filled from this period's job records is measured, not typed.
    from_jobs = np.nan_to_num(_optional(node_groups, "mfu_from_jobs")) > 0
    group_basis = np.where(
        (group_basis == 0) & from_jobs, MFU_BASES.index("job_records"), group_basis
    )
    require(
        (group_mfu > 0) & (group_mfu <= 1.0),
        "MFU must be in (0, 1] (check mfu / job_tokens_per_s)",
        labels[group_pool].tolist(),
    )
    speed = peak * group_mfu  # effective TFLOP/s per card
    pool_speed = pool_segments.sum(cards * speed)  # W = Σ n_i s_i
    mfu = pool_speed / pool_peak_tflops
    mfu_basis_share = np.column_stack(
        [pool_segments.sum(cards * peak * (group_basis == b)) for b in range(len(MFU_BASES))]
    )
    mfu_basis = np.argmax(mfu_basis_share, axis=1)

    # --- energy ---------------------------------------------------------------------------
    facility_kwh, it_kwh = _optional(pools, "facility_kwh"), _optional(pools, "it_kwh")
    require(
        np.isnan(facility_kwh) == np.isnan(it_kwh),
        "facility_kwh and it_kwh must be given together",
        labels,
    )
    default_pue = choice_lookup(cooling, [setting(f"pue_{c}") for c in COOLING_TYPES])
    energy, pue, energy_basis = energy_arrays(
        _optional(pools, "pue"), facility_kwh, it_kwh, default_pue
    )
    meters_elsewhere = np.nan_to_num(_optional(pools, "meters_outside_period")) > 0
    energy_basis = np.where((energy_basis == 0) & meters_elsewhere, 3, energy_basis)
    require(pue >= 1.0, "PUE (pue or facility_kwh / it_kwh) must be >= 1", labels)

    # --- card-model groups (for the bucket effect and split jobs) -------------------------
    n_models = max(len(accelerators), 1)
    model_group, model_keys = pd.factorize(group_pool * n_models + accelerator_code, sort=True)
    model_segments = Segments(model_group, model_keys.size)
    model_pool = model_keys // n_models
    model_cards = model_segments.sum(cards)
    model_speed = model_segments.sum(cards * speed) / model_cards
    model_cards_per_node = model_segments.min(cards_per_node)
    model_nvlink = model_segments.min(nvlink)
    model_vendor = model_segments.min(vendor)

    # --- job shape and the modeled scaling of the joint job --------------------------------
    fabric_eff = choice_lookup(fabric, [setting(f"fabric_efficiency_{f}") for f in FABRICS])
    shape = {
        "inter_node_gbit_s_per_card": setting("inter_node_gbit_s_per_card"),
        "fabric_efficiency": fabric_eff,
        "model_params": setting("model_params"),
        "tensor_parallel": _optional(pools, "tensor_parallel"),
        "pipeline_parallel": setting("pipeline_parallel"),
        "microbatches_per_replica": setting("microbatches_per_replica"),
        "global_batch_tokens": _optional(pools, "global_batch_tokens"),
        "micro_batch_tokens": setting("micro_batch_tokens"),
        "model_hidden_size": _optional(pools, "model_hidden_size"),
        "flops_per_param_token": k,
        "gradient_bytes_per_param": setting("gradient_bytes_per_param"),
        "dp_overlap_share": setting("dp_overlap_share"),
    }
    mean_speed = pool_speed / pool_cards
    joint = modeled_scaling_arrays(
        job_cards,
        mean_speed,
        pool_segments.min(cards_per_node),
        nvlink_bidir_gbs=pool_segments.min(nvlink),
        **shape,
    )
    microbatches = np.rint(joint.microbatches_per_replica * joint.data_parallel)

    bucket = bucket_arrays(
        model_pool,
        n_pools,
        model_cards,
        model_speed,
        model_keys % n_models,
        model_vendor,
        microbatches,
        setting("mixing_penalty_same_vendor"),
        setting("mixing_penalty_cross_vendor"),
        setting("granularity_penalty"),
    )
    heterogeneity = bucket.heterogeneity
    # Cards progress at W·h/N under each joint strategy, so rescale compute against comm.
    joint_scaling = np.column_stack([_rescaled(joint, heterogeneity[:, j]) for j in range(3)])

    # --- failures and effective time -------------------------------------------------------
    failures, exposure = (
        _optional(pools, "failure_count"),
        _optional(pools, "failure_exposure_card_h"),
    )
    mtbf_entered = _optional(pools, "mtbf_card_h")
    failure_rate = choice_lookup(cooling, [setting(f"failure_rate_{c}") for c in COOLING_TYPES])
    failures_measured = ~np.isnan(failures) & ~np.isnan(exposure)
    mtbf_basis = np.where(failures_measured, 0, np.where(~np.isnan(mtbf_entered), 1, 2))
    mtbf_card = np.select(
        [mtbf_basis == 0, mtbf_basis == 1],
        [mtbf_card_from_failures(failures, exposure), mtbf_entered],
        setting("mtbf_card_h") / failure_rate,
    )
    require(mtbf_card > 0, "MTBF per card must be positive", labels)
    save_h, restart_h = setting("checkpoint_save_h"), setting("restart_h")
    interval_given = _optional(pools, "checkpoint_interval_h")
    require(
        np.isnan(interval_given) | (interval_given > 0), "checkpoint_interval_h must be > 0", labels
    )
    use_daly = interval_rule == _INTERVAL_DALY
    joint_time = effective_time_arrays(
        job_cards, mtbf_card, save_h, restart_h, interval_given, use_daly
    )

    # --- split_homogeneous: one job per card model, at most job_cards each ----------------
    model_job_cards = np.minimum(model_cards, job_cards[model_pool])
    split = modeled_scaling_arrays(
        model_job_cards,
        model_speed,
        model_cards_per_node,
        nvlink_bidir_gbs=model_nvlink,
        **{name: value[model_pool] for name, value in shape.items()},
    )
    split_time = effective_time_arrays(
        model_job_cards,
        mtbf_card[model_pool],
        save_h[model_pool],
        restart_h[model_pool],
        interval_given[model_pool],
        use_daly[model_pool],
    )
    per_pool_models = Segments(model_pool, n_pools)
    model_ideal = model_cards * model_speed
    split_scaled = per_pool_models.sum(model_ideal * split.scaling)
    split_delivered = per_pool_models.sum(model_ideal * split.scaling * split_time.effective_time)
    largest_split_job = per_pool_models.max(
        model_job_cards * model_speed * split.scaling * split_time.effective_time
    )

    # --- strategies: deliver, recommend, choose ---------------------------------------------
    delivered = np.column_stack(
        [
            pool_speed * heterogeneity[:, j] * joint_scaling[:, j] * joint_time.effective_time
            for j in range(3)
        ]
        + [split_delivered]
    )
    must_span = (
        pools["must_span_pool"].fillna(False).to_numpy(dtype=bool)
        if "must_span_pool" in pools.columns
        else np.zeros(n_pools, dtype=bool)
    )
    allowed = np.column_stack([np.ones((n_pools, 3), dtype=bool), ~must_span])
    recommended = recommend_strategy(delivered, allowed, bucket.mix_class)
    if "strategy" in pools.columns:
        strategy_given = pd.Index(STRATEGIES).get_indexer(pools["strategy"]).astype(np.int64)
        require(
            (strategy_given >= 0) | pools["strategy"].isna().to_numpy(),
            f"strategy must be one of {', '.join(STRATEGIES)}",
            labels,
        )
        strategy = np.where(strategy_given >= 0, strategy_given, recommended)
    else:
        strategy = recommended
    is_split = strategy == SPLIT
    joint_column = np.minimum(strategy, 2)[:, np.newaxis]
    chosen_h = np.where(
        is_split, 1.0, np.take_along_axis(heterogeneity, joint_column, axis=1)[:, 0]
    )
    chosen_model = np.where(
        is_split,
        split_scaled / pool_speed,
        np.take_along_axis(joint_scaling, joint_column, axis=1)[:, 0],
    )

    # --- scaling factor: measured table wins, else model × heterogeneity ------------------
    has_table = np.zeros(n_pools, dtype=bool)
    table_scaling = np.full(n_pools, np.nan)
    if speedup is not None and len(speedup):
        table_pool = labels.get_indexer(speedup["pool_id"])
        require(table_pool >= 0, "speedup.pool_id not found in pools", speedup["pool_id"].tolist())
        table_scaling, has_table = speedup_efficiency(
            table_pool,
            _optional(speedup, "cards"),
            _optional(speedup, "throughput"),
            np.arange(n_pools),
            job_cards,
        )
    scaling = np.where(
        has_table, table_scaling, np.clip(chosen_model * chosen_h, FACTOR_FLOOR, 1.0)
    )

    # --- effective time factor: job logs win, else the failure model ----------------------
    productive_h, wall_h = _optional(pools, "productive_h"), _optional(pools, "wall_h")
    logged = ~np.isnan(productive_h) & ~np.isnan(wall_h)
    require(
        ~logged | ((wall_h > 0) & (productive_h >= 0) & (productive_h <= wall_h * (1 + 1e-9))),
        "job logs need 0 <= productive_h <= wall_h and wall_h > 0",
        labels,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        split_time_factor = split_delivered / split_scaled
        logged_share = productive_h / wall_h
    modeled_time = np.where(is_split, split_time_factor, joint_time.effective_time)
    effective_time = np.clip(np.where(logged, logged_share, modeled_time), FACTOR_FLOOR, 1.0)

    # --- utilization ------------------------------------------------------------------------
    duration_h = setting("duration_h")
    card_h = pool_cards * duration_h
    planned, planned_defaulted = resolve_column(pools, "utilization_planned")
    utilization_measured = _optional(pools, "utilization_measured")
    allocated = _optional(pools, "allocated_card_h")
    require(
        np.isnan(utilization_measured)
        | ((utilization_measured >= 0) & (utilization_measured <= 1)),
        "utilization_measured must be in [0, 1]",
        labels,
    )
    require(
        np.isnan(allocated) | ((allocated >= 0) & (allocated <= card_h * (1 + 1e-9))),
        "allocated_card_h must be in [0, cards × duration_h]",
        labels,
    )
    utilization, utilization_basis = utilization_arrays(
        utilization_measured,
        allocated,
        card_h,
        np.where(planned_defaulted, np.nan, planned),
        float(DEFAULTS["utilization_planned"].value),
    )
    utilization = np.minimum(utilization, 1.0)

    # --- product and attribution ------------------------------------------------------------
    factors = np.column_stack([energy, mfu, scaling, effective_time, utilization])
    product, lost, shares = attribute_waste_arrays(factors)
    peak_pflops = pool_peak_tflops / 1000.0
    peak_pflop_days = peak_pflops * duration_h / 24.0
    cost = _optional(pools, "cost_per_card_h")

    # --- provenance and defaults used ---------------------------------------------------------
    scaling_modeled = ~has_table
    time_modeled = ~logged
    any_group = pool_segments.any
    mfu_default_rows = group_basis == 3
    mfu_used = [
        ("cooling", cooling_defaulted & any_group(mfu_default_rows)),
        ("workload_class", workload_defaulted & any_group(mfu_default_rows)),
    ]
    mfu_used += [
        (
            f"mfu_default_{v}",
            any_group(
                mfu_default_rows
                & np.isnan(card_default)
                & (vendor == i)
                & defaulted(f"mfu_default_{v}")[group_pool]
            ),
        )
        for i, v in enumerate(VENDOR_KEYS)
    ]
    mfu_used += [
        (
            f"workload_mfu_{w}",
            any_group(mfu_default_rows) & (workload == i) & defaulted(f"workload_mfu_{w}"),
        )
        for i, w in enumerate(WORKLOAD_CLASSES)
    ]
    mfu_used += [
        (
            f"cooling_performance_{c}",
            any_group(mfu_default_rows) & (cooling == i) & defaulted(f"cooling_performance_{c}"),
        )
        for i, c in enumerate(COOLING_TYPES)
    ]
    mfu_used += [
        ("flops_per_param_token", any_group(group_basis == 1) & defaulted("flops_per_param_token"))
    ]
    energy_used = [("cooling", cooling_defaulted & (energy_basis == 2))] + [
        (f"pue_{c}", (energy_basis == 2) & (cooling == i) & defaulted(f"pue_{c}"))
        for i, c in enumerate(COOLING_TYPES)
    ]
    scaling_keys = [
        "model_params",
        "pipeline_parallel",
        "micro_batch_tokens",
        "gradient_bytes_per_param",
        "dp_overlap_share",
        "inter_node_gbit_s_per_card",
        "flops_per_param_token",
    ]
    scaling_used = [(key, scaling_modeled & defaulted(key)) for key in scaling_keys]
    scaling_used += [
        ("tensor_parallel", scaling_modeled & np.isnan(shape["tensor_parallel"])),
        (
            "microbatches_per_replica",
            scaling_modeled
            & np.isnan(shape["global_batch_tokens"])
            & defaulted("microbatches_per_replica"),
        ),
        ("fabric", scaling_modeled & fabric_defaulted),
        (
            "intra_node_bidir_gbs",
            scaling_modeled & any_group(np.isnan(nvlink_given)) & defaulted("intra_node_bidir_gbs"),
        ),
        (
            "mixing_penalty_same_vendor",
            scaling_modeled
            & ~is_split
            & (bucket.mix_class == 1)
            & defaulted("mixing_penalty_same_vendor"),
        ),
        (
            "mixing_penalty_cross_vendor",
            scaling_modeled
            & ~is_split
            & (bucket.mix_class == 2)
            & defaulted("mixing_penalty_cross_vendor"),
        ),
        (
            "granularity_penalty",
            scaling_modeled & (strategy == 2) & defaulted("granularity_penalty"),
        ),
    ]
    scaling_used += [
        (
            f"fabric_efficiency_{f}",
            scaling_modeled & (fabric == i) & defaulted(f"fabric_efficiency_{f}"),
        )
        for i, f in enumerate(FABRICS)
    ]
    mtbf_from_table = time_modeled & (mtbf_basis == 2)
    time_used = [
        ("mtbf_card_h", mtbf_from_table & defaulted("mtbf_card_h")),
        ("cooling", mtbf_from_table & cooling_defaulted),
        ("checkpoint_save_h", time_modeled & defaulted("checkpoint_save_h")),
        ("restart_h", time_modeled & defaulted("restart_h")),
        ("checkpoint_interval_rule", time_modeled & np.isnan(interval_given) & rule_defaulted),
    ]
    time_used += [
        (f"failure_rate_{c}", mtbf_from_table & (cooling == i) & defaulted(f"failure_rate_{c}"))
        for i, c in enumerate(COOLING_TYPES)
    ]
    utilization_used = [("utilization_planned", utilization_basis == 3)]

    provenance_codes = {
        "energy": np.asarray([PROVENANCES.index(p) for p in ENERGY_PROVENANCE])[energy_basis],
        "mfu": np.asarray([PROVENANCES.index(p) for p in MFU_PROVENANCE])[mfu_basis],
        "scaling": np.where(has_table, 0, 1),
        "effective_time": np.where(logged, 0, 1),
        "utilization": np.asarray([PROVENANCES.index(p) for p in UTILIZATION_PROVENANCE])[
            utilization_basis
        ],
    }
    bases = {
        "energy": _categorical(energy_basis, ENERGY_BASES),
        "mfu": _categorical(mfu_basis, MFU_BASES),
        "scaling": _categorical(np.where(has_table, 0, 1), ("speedup_table", "comm_model")),
        "effective_time": _categorical(np.where(logged, 0, 1), ("job_logs", "failure_model")),
        "utilization": _categorical(utilization_basis, UTILIZATION_BASES),
    }
    used = {
        "energy": energy_used,
        "mfu": mfu_used,
        "scaling": scaling_used,
        "effective_time": time_used,
        "utilization": utilization_used,
    }

    # --- output frame -------------------------------------------------------------------------
    out: dict[str, object] = {}
    for column in passthrough:
        if column in pools.columns:
            out[column] = pools[column].to_numpy()
    for position, name in enumerate(FACTOR_NAMES):
        out[name] = factors[:, position]
        out[f"{name}_provenance"] = _categorical(provenance_codes[name], PROVENANCES)
        out[f"{name}_basis"] = bases[name]
        out[f"{name}_defaults"] = _defaults_column(used[name], n_pools)
    joint_used = ~is_split
    out |= {
        "product": product,
        "cards": pool_cards,
        "job_cards": job_cards,
        "peak_pflops": peak_pflops,
        "duration_h": duration_h,
        "card_h": card_h,
        "peak_pflop_days": peak_pflop_days,
        "effective_pflop_days": product * peak_pflop_days,
        "cooling": _categorical(cooling, COOLING_TYPES),
        "fabric": _categorical(fabric, FABRICS),
        "pue": pue,
        "cooling_performance": cooling_performance,
        "scaling_model": chosen_model,
        "heterogeneity": chosen_h,
        "tensor_parallel": np.where(joint_used, joint.tensor_parallel, np.nan),
        "pipeline_parallel": np.where(joint_used, joint.pipeline_parallel, np.nan),
        "data_parallel": np.where(joint_used, joint.data_parallel, np.nan),
        "microbatches_per_replica": np.where(joint_used, joint.microbatches_per_replica, np.nan),
        "bubble_fraction": np.where(joint_used, joint.bubble_fraction, np.nan),
        "tp_comm_share": np.where(joint_used, joint.tp_comm_s / joint.compute_s, np.nan),
        "dp_exposed_share": np.where(joint_used, joint.dp_exposed_s / joint.compute_s, np.nan),
        "tp_crosses_nodes": joint.tp_crosses_nodes & joint_used,
        "mtbf_card_h": mtbf_card,
        "mtbf_card_basis": _categorical(mtbf_basis, _MTBF_BASES),
        "mtbf_job_h": joint_time.mtbf_job_h,
        "checkpoint_save_h": save_h,
        "restart_h": restart_h,
        "checkpoint_interval_h": joint_time.checkpoint_interval_h,
        "lost_checkpoint_share": joint_time.lost_checkpoint_share,
        "lost_rework_share": joint_time.lost_rework_share,
        "lost_restart_share": joint_time.lost_restart_share,
        "effective_time_stalled": effective_time <= FACTOR_FLOOR,
        "card_models": bucket.models,
        "vendors": bucket.vendors,
        "mixing_penalty": bucket.mixing_penalty,
        "microbatches": bucket.microbatches,
        "static_balance": bucket.static_balance,
    }
    for position, name in enumerate(STRATEGIES):
        out[f"h_{name}"] = heterogeneity[:, position]
    for position, name in enumerate(STRATEGIES):
        out[f"delivered_pflops_{name}"] = delivered[:, position] / 1000.0
    out["split_largest_job_pflops"] = largest_split_job / 1000.0
    out["recommended_strategy"] = _categorical(recommended, STRATEGIES)
    out["strategy"] = _categorical(strategy, STRATEGIES)
    out["strategy_why"] = why_categorical(recommended, bucket.mix_class)
    out["lost_share"] = lost
    for position, name in enumerate(FACTOR_NAMES):
        out[f"lost_share_{name}"] = shares[:, position]
    for position, name in enumerate(FACTOR_NAMES):
        out[f"lost_{name}_card_h"] = shares[:, position] * card_h
        out[f"lost_{name}_pflop_days"] = shares[:, position] * peak_pflop_days
        out[f"lost_{name}_money"] = shares[:, position] * card_h * cost
    return pd.DataFrame(out, index=labels)


# --- scalar calculator ------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGroup:
    """One node group of a pool for :func:`evaluate_pool` (see :data:`NODE_GROUP_COLUMNS`)."""

    accelerator: str
    vendor: str
    peak_tflops: float
    nodes: int
    cards_per_node: int
    nvlink_bidir_gbs: float | None = None
    default_mfu: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class StrategyOutcome:
    strategy: str
    heterogeneity: float
    delivered_pflops: float


@dataclass(frozen=True)
class PoolEvaluation:
    """Everything :func:`evaluate_pools` says about one pool, typed."""

    factors: dict[str, FactorResult]
    product: float
    lost_share: float
    lost_share_by_factor: dict[str, float]
    strategies: tuple[StrategyOutcome, ...]
    recommended_strategy: str
    strategy: str
    why: str
    row: dict[str, object] = field(default_factory=dict)  # the full output row


_FACTOR_INPUTS: Mapping[str, tuple[str, ...]] = {
    "energy": ("pue", "cooling"),
    "mfu": ("cooling_performance",),
    "scaling": (
        "scaling_model",
        "heterogeneity",
        "tensor_parallel",
        "pipeline_parallel",
        "data_parallel",
        "microbatches_per_replica",
        "bubble_fraction",
        "tp_comm_share",
        "dp_exposed_share",
    ),
    "effective_time": (
        "mtbf_card_h",
        "mtbf_job_h",
        "checkpoint_save_h",
        "restart_h",
        "checkpoint_interval_h",
        "lost_checkpoint_share",
        "lost_rework_share",
        "lost_restart_share",
    ),
    "utilization": ("card_h",),
}


def evaluate_pool(
    node_groups: Sequence[NodeGroup],
    *,
    speedup: Mapping[float, float] | None = None,
    **pool_inputs: object,
) -> PoolEvaluation:
    """Evaluate one pool through :func:`evaluate_pools` (keywords as in :data:`POOL_COLUMNS`)."""
    if not node_groups:
        raise ValueError("a pool needs at least one node group")
    groups = pd.DataFrame([{"pool_id": 0, **asdict(group)} for group in node_groups])
    groups = groups.astype(dict.fromkeys(("nvlink_bidir_gbs", "default_mfu", "mfu"), float))
    pool = pd.DataFrame([{"pool_id": 0, **pool_inputs}])
    table = (
        pd.DataFrame(
            {"pool_id": 0, "cards": list(speedup.keys()), "throughput": list(speedup.values())}
        )
        if speedup
        else None
    )
    row = evaluate_pools(groups, pool, table).iloc[0].to_dict()
    factors = {
        name: FactorResult(
            name=name,
            value=float(row[name]),
            provenance=str(row[f"{name}_provenance"]),
            basis=str(row[f"{name}_basis"]),
            inputs={
                key: (row[key] if isinstance(row[key], str) else float(row[key]))
                for key in _FACTOR_INPUTS[name]
            },
            defaults_used=tuple(filter(None, str(row[f"{name}_defaults"]).split(", "))),
        )
        for name in FACTOR_NAMES
    }
    return PoolEvaluation(
        factors=factors,
        product=float(row["product"]),
        lost_share=float(row["lost_share"]),
        lost_share_by_factor={name: float(row[f"lost_share_{name}"]) for name in FACTOR_NAMES},
        strategies=tuple(
            StrategyOutcome(name, float(row[f"h_{name}"]), float(row[f"delivered_pflops_{name}"]))
            for name in STRATEGIES
        ),
        recommended_strategy=str(row["recommended_strategy"]),
        strategy=str(row["strategy"]),
        why=str(row["strategy_why"]),
        row=row,
    )
