"""Typed records of the frames that cross the engine's boundary: one row of each, as a TypedDict.

The engine computes on whole DataFrames; these records say what one row of each holds, so the
callers that build the inputs (inventory.frames) or read the results (planner, accounting,
reports) and the type checker share one schema:

    NodeGroupRow    a row of the node-group frame :func:`engine.evaluate.evaluate_pools` reads
    PoolRow         a row of its pool frame (besides per-pool overrides of DEFAULTS keys)
    PoolMeasure     the pool frame's numeric columns the engine reads as given (NaN = not given)
    PoolResultRow   a row of the analysis result it returns, one per pool
    PlanOptionRow   the leading columns of a row of :func:`engine.capacity.plan_capacity`

Each record's key order is the frame's column order. In a frame, numbers are numpy scalars
(``np.float64`` is a ``float``; ``np.int64`` and ``np.bool_`` stand in for the ``int`` and
``bool`` typed here) and categorical columns hold ``str``.
"""

from collections.abc import Hashable
from typing import Literal, NotRequired, TypedDict


class NodeGroupRow(TypedDict):
    """One node group: the cards of one model in one pool (``NODE_GROUP_COLUMNS``)."""

    pool_id: Hashable
    accelerator: str
    vendor: str
    peak_tflops: float
    nodes: float
    cards_per_node: float
    nvlink_bidir_gbs: NotRequired[float]
    nvlink_domain_cards: NotRequired[float]
    default_mfu: NotRequired[float]
    mfu: NotRequired[float]
    mfu_from_jobs: NotRequired[float]


class PoolRow(TypedDict, total=False):
    """One pool of the pool frame (``POOL_COLUMNS``); every column is optional, NaN = not given.

    A pool may also carry any DEFAULTS key as a column: its own override of the table value.
    """

    pool_id: Hashable
    site_id: Hashable
    cluster_id: Hashable
    cooling: str
    fabric: str
    workload_class: str
    duration_h: float
    pue: float
    facility_kwh: float
    it_kwh: float
    meters_outside_period: float
    mfu: float
    mfu_telemetry: float
    job_tokens_per_s: float
    job_cards: float
    model_params: float
    model_active_params: float
    model_replicated_params: float
    global_batch_tokens: float
    model_hidden_size: float
    tensor_parallel: float
    pipeline_parallel: float
    checkpoint_interval_h: float
    failure_count: float
    failure_exposure_card_hours: float
    mtbf_card_hours: float
    productive_h: float
    wall_h: float
    utilization_measured: float
    allocated_card_hours: float
    utilization_planned: float
    cost_per_card_hours: float
    strategy: str
    must_span_pool: bool


# The numeric PoolRow columns the engine reads as given, not as DEFAULTS overrides.
PoolMeasure = Literal[
    "allocated_card_hours",
    "checkpoint_interval_h",
    "cost_per_card_hours",
    "facility_kwh",
    "failure_count",
    "failure_exposure_card_hours",
    "global_batch_tokens",
    "it_kwh",
    "job_cards",
    "job_tokens_per_s",
    "meters_outside_period",
    "mfu",
    "mfu_telemetry",
    "model_active_params",
    "model_hidden_size",
    "model_params",
    "model_replicated_params",
    "mtbf_card_hours",
    "productive_h",
    "pue",
    "tensor_parallel",
    "utilization_measured",
    "wall_h",
]


class PoolResultRow(TypedDict):
    """One pool of the analysis result (``OUTPUT_COLUMNS`` of engine.evaluate), in order.

    ``site_id`` and ``cluster_id`` are passed through when the pool frame has them.
    """

    site_id: NotRequired[Hashable]
    cluster_id: NotRequired[Hashable]
    energy: float
    energy_provenance: str
    energy_basis: str
    energy_defaults: str
    mfu: float
    mfu_provenance: str
    mfu_basis: str
    mfu_defaults: str
    scaling: float
    scaling_provenance: str
    scaling_basis: str
    scaling_defaults: str
    effective_time: float
    effective_time_provenance: str
    effective_time_basis: str
    effective_time_defaults: str
    utilization: float
    utilization_provenance: str
    utilization_basis: str
    utilization_defaults: str
    product: float
    cards: float
    job_cards: float
    peak_pflops: float
    duration_h: float
    card_hours: float
    peak_pflop_days: float
    effective_pflop_days: float
    cooling: str
    fabric: str
    pue: float
    cooling_performance: float
    scaling_model: float
    heterogeneity: float
    tensor_parallel: float
    pipeline_parallel: float
    data_parallel: float
    microbatches_per_replica: float
    bubble_fraction: float
    tp_comm_share: float
    dp_exposed_share: float
    tp_crosses_nodes: bool
    mtbf_card_hours: float
    mtbf_card_basis: str
    mtbf_job_h: float
    checkpoint_save_h: float
    restart_h: float
    checkpoint_interval_h: float
    lost_checkpoint_share: float
    lost_rework_share: float
    lost_restart_share: float
    effective_time_stalled: bool
    card_models: int
    vendors: int
    mixing_penalty: float
    microbatches: float
    static_balance: float
    h_synchronous_uniform: float
    h_static_proportional: float
    h_dynamic_fine_grained: float
    h_split_homogeneous: float
    delivered_pflops_synchronous_uniform: float
    delivered_pflops_static_proportional: float
    delivered_pflops_dynamic_fine_grained: float
    delivered_pflops_split_homogeneous: float
    split_largest_job_pflops: float
    recommended_strategy: str
    strategy: str
    strategy_why: str
    lost_share: float
    lost_share_energy: float
    lost_share_mfu: float
    lost_share_scaling: float
    lost_share_effective_time: float
    lost_share_utilization: float
    lost_energy_card_hours: float
    lost_energy_pflop_days: float
    lost_energy_money: float
    lost_mfu_card_hours: float
    lost_mfu_pflop_days: float
    lost_mfu_money: float
    lost_scaling_card_hours: float
    lost_scaling_pflop_days: float
    lost_scaling_money: float
    lost_effective_time_card_hours: float
    lost_effective_time_pflop_days: float
    lost_effective_time_money: float
    lost_utilization_card_hours: float
    lost_utilization_pflop_days: float
    lost_utilization_money: float


class PlanOptionRow(TypedDict):
    """The leading columns of one option of a capacity plan, in order; the option's inputs
    and intermediate columns follow them. NaN where the option has no result (no split, no
    price, an unreachable deadline)."""

    option_id: Hashable  # the option's index label
    accelerator: str
    site: str
    precision: str
    feasible: bool
    reason: str  # why not feasible; "" when feasible
    cards: float
    tp: float
    pp: float
    vp: float
    cp: float
    dp: float
    micro_batch: float
    micro_batches: float
    global_batch: float
    days: float
    days_low: float
    days_high: float
    running_days: float
    card_hours: float
    allocated_card_hours: float
    peak_tflops: float
    effective_utilization: float
    energy: float
    mfu: float
    scaling: float
    effective_time: float
    utilization: float
    pue: float
    energy_provenance: str
    mfu_provenance: str
    scaling_provenance: str
    effective_time_provenance: str
    utilization_provenance: str
    mtbf_card_hours: float
    mtbf_provenance: str
    mtbf_basis: str
    state_bytes: float
    state_bytes_per_card: float
    activation_bytes_per_card: float
    memory_per_card_bytes: float
    usable_memory_per_card_bytes: float
    min_cards_memory: int
    it_energy_mwh: float
    facility_energy_mwh: float
    cost_basis: str
    compute_cost: float
    energy_cost: float
    energy_overhead_cost: float
    idle_cost: float
    total_cost: float
    cost_low: float
    cost_high: float
    band_note: str
    co2_tonnes: float
    peak_pflop_days: float
    effective_pflop_days: float
    cost_per_effective_pflop_day: float
    rank_by_cost: float
    rank_by_days: float
    on_pareto_front: bool


# The columns a node-group frame must have, and the leading columns of a plan, in order.
NODE_GROUP_REQUIRED_COLUMNS: tuple[str, ...] = tuple(
    key for key in NodeGroupRow.__annotations__ if key in NodeGroupRow.__required_keys__
)
PLAN_OPTION_COLUMNS: tuple[str, ...] = tuple(PlanOptionRow.__annotations__)
