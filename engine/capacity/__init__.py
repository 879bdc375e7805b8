"""Capacity planner: how many cards, how many days, what it costs, vectorised.

One DataFrame row per option (card model × card count or deadline × site); the planner
expands each option into its valid parallel splits, keeps the fastest that fits in memory,
and computes days, card-hours, energy, cost, CO₂ and the five factors.

Time model (docs/capacity-planning.md):
    total_flops = k · N · D
    running_seconds = total_flops / (n · peak · mfu · scaling · effective_time)
    days = running_seconds / utilization / 86,400
Utilization < 1 stretches calendar time: the job only holds its cards for that share of the
calendar (queueing, sharing with other work), and the cards are paid for the whole time.

Modules: workload (what to train), options (option rows and their defaults), splits (split
search), deadline (fewest cards for a deadline), outcomes (days, money, reasons, Pareto),
band (the days and cost range, the uncertainty tornado), plan (plan_capacity and the scalar
estimate). Public API: ``__all__`` below; one output row is typed as
:class:`engine.records.PlanOptionRow`.
"""

from engine.capacity.deadline import cards_for_deadline
from engine.capacity.options import (
    OPTION_COLUMN_DEFAULTS,
    cross_options,
    prepare_options,
)
from engine.capacity.outcomes import compute_outcomes, pareto_front
from engine.capacity.plan import (
    ESTIMATE_PAYLOAD_FIELDS,
    estimate_training,
    plan_capacity,
)
from engine.capacity.splits import effective_time_at_cards, evaluate_splits
from engine.capacity.workload import (
    DEFAULT_MAX_CARDS,
    FACTORS,
    K_ERROR,
    SECONDS_PER_DAY,
    PlannerInputError,
    TrainingWorkload,
)

__all__ = [
    "DEFAULT_MAX_CARDS",
    "ESTIMATE_PAYLOAD_FIELDS",
    "FACTORS",
    "K_ERROR",
    "OPTION_COLUMN_DEFAULTS",
    "SECONDS_PER_DAY",
    "PlannerInputError",
    "TrainingWorkload",
    "cards_for_deadline",
    "compute_outcomes",
    "cross_options",
    "effective_time_at_cards",
    "estimate_training",
    "evaluate_splits",
    "pareto_front",
    "plan_capacity",
    "prepare_options",
]
