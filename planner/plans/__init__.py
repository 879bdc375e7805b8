"""Capacity plans: stored inputs → option frame from the inventory → engine → results.

The lifecycle follows the analyses in `planner.services`: a plan is created and queued after
the transaction commits, every write of a run is guarded by its `run_id` (a superseded or
redelivered task cannot overwrite a newer result), and a failed run keeps the last result.

The option frame is built with one query per inventory table (catalog, sites, pools with their
node groups, clusters' card totals), never one query per option.

The package's modules: `workload` (constants, option columns, the workload), `options` (the
option frame from the inventory), `compute` (evaluation and the training estimate), `lifecycle`
(create, queue, run guards, staleness), `rates` (the exchange rates a plan used, and its
staleness when one changes) and `compare` (reading and comparing plans).
"""

from __future__ import annotations

from planner.plans.compare import (  # noqa: F401 (the package's API)
    COMPARE_HEADLINE_COLUMNS,
    COMPARE_METRICS,
    can_edit,
    comparison,
    option_table,
    plans_for_list,
    plans_to_compare,
)
from planner.plans.compute import (  # noqa: F401 (the package's API)
    build_levers,
    compute,
    estimate_training_for,
    option_rows,
)
from planner.plans.lifecycle import (  # noqa: F401 (the package's API)
    INPUT_FIELDS,
    REF_COLUMNS,
    clone_plan,
    create_plan,
    current_run,
    fail,
    finish,
    inventory_refs,
    mark_plans_stale,
    mark_running,
    recompute_plan,
    record_progress,
    update_plan,
)
from planner.plans.options import (  # noqa: F401 (the package's API)
    CARD_PRICE_COLUMNS,
    build_options,
    without_unpriced_money,
)
from planner.plans.rates import (  # noqa: F401 (the package's API)
    connect_rate_signals,
    mark_plans_stale_for_rate,
    rate_changes,
    stale_rate_reasons,
)
from planner.plans.validation import validate_inputs  # noqa: F401 (the package's API)
from planner.plans.workload import (  # noqa: F401 (the package's API)
    ASSUMPTION_COLUMNS,
    DEFAULT_AMORTIZATION_YEARS,
    DEFAULT_HISTORY_DAYS,
    FACTOR_OVERRIDES,
    GB,
    HEADLINE_COLUMNS,
    MAX_CHUNKS,
    MAX_COMPARED_PLANS,
    MAX_OPTIONS,
    MIN_HISTORY,
    MIN_OPTIONS_PER_CHUNK,
    OPTION_COLUMN_NAMES,
    OPTION_COLUMNS,
    OVERRIDE,
    PROVENANCE_COLUMN,
    SHAPE_OPTIONAL_FIELDS,
    SHORTLIST_PER_RANKING,
    WHOLE_NUMBER_COLUMNS,
    PlanInputError,
    build_workload,
    model_spec_errors,
    workload_errors,
)
