"""Read side of accounting: usage records → pandas → the engine's vectorised functions.

* :func:`utilization_report`: measured utilization (factor 5) and effective time (factor 4)
  per cluster / pool / accelerator / team / site and day / week / month, from usage records
  against the inventory (node groups × hours in service since the cluster's commissioning,
  minus sreport planned downtime), with :func:`engine.usage.measured_utilization`.
* :func:`cost_report` and :func:`chargeback_report`: money per pool and bucket with
  :func:`engine.cost.energy_and_cost`, the five factors from
  :func:`engine.evaluate.evaluate_pools` fed with the measured values, money lost per
  factor (:func:`~engine.cost.waste_by_factor`) and chargeback per team.
* :func:`apply_measured_usage`: what the stored analyses (`planner.analysis`) use to replace
  modeled utilization, effective time and MFU with measured ones when usage covers enough
  of the period (`accounting.coverage`).

Every query reads plain columns (no model instances) and every computation is vectorised.

The package's modules: ``frames`` (scope, queries, frames), ``utilization``, ``measured``
(inputs for the stored analyses), ``costs`` and ``chargeback``; callers import from here.
"""

from accounting.selectors.chargeback import chargeback_frames, chargeback_report
from accounting.selectors.costs import (
    COST_MONEY_COLUMNS,
    LOST_COST_PREFIX,
    SUMMED_COST_COLUMNS,
    PoolCosts,
    cost_report,
    cost_rows_frame,
    pool_costs,
)
from accounting.selectors.frames import (
    COST_GROUPS,
    GRANULARITIES,
    GROUP_COLUMNS,
    MAX_BUCKETS,
    NO_ACCOUNT,
    UNKNOWN,
    USAGE_FLOAT_COLUMNS,
    USAGE_FRAME_COLUMNS,
    UTILIZATION_GROUPS,
    AccountingQueryError,
    AccountingScope,
    ScopeInputs,
    _frame,
    add_labels,
    assign_accounting_pools,
    downtime_frame,
    inventory_frame,
    scope_inputs,
    typed_usage_frame,
    usage_frame,
    usage_records_queryset,
)
from accounting.selectors.measured import (
    apply_measured_usage,
    fill_measured_mfu,
    measured_group_mfu,
    measured_pool_inputs,
)
from accounting.selectors.utilization import (
    coverage_rows,
    measured_utilization,
    utilization_report,
)

__all__ = [
    "COST_GROUPS",
    "COST_MONEY_COLUMNS",
    "GRANULARITIES",
    "GROUP_COLUMNS",
    "LOST_COST_PREFIX",
    "MAX_BUCKETS",
    "NO_ACCOUNT",
    "SUMMED_COST_COLUMNS",
    "UNKNOWN",
    "USAGE_FLOAT_COLUMNS",
    "USAGE_FRAME_COLUMNS",
    "UTILIZATION_GROUPS",
    "AccountingQueryError",
    "AccountingScope",
    "PoolCosts",
    "ScopeInputs",
    "_frame",
    "add_labels",
    "apply_measured_usage",
    "assign_accounting_pools",
    "chargeback_frames",
    "chargeback_report",
    "cost_report",
    "cost_rows_frame",
    "coverage_rows",
    "downtime_frame",
    "fill_measured_mfu",
    "inventory_frame",
    "measured_group_mfu",
    "measured_pool_inputs",
    "measured_utilization",
    "pool_costs",
    "scope_inputs",
    "typed_usage_frame",
    "usage_frame",
    "usage_records_queryset",
    "utilization_report",
]
