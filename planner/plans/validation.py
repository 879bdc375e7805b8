"""Plan inputs checked against the inventory and the engine before a plan is queued."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from engine.capacity import PlannerInputError, TrainingWorkload, prepare_options
from planner.plans.options import build_options
from planner.plans.workload import PlanInputError, build_workload, model_spec_errors


def validate_inputs(
    workload: Mapping[str, Any], options_spec: Mapping[str, Any], overrides: Mapping[str, Any]
) -> tuple[TrainingWorkload, pd.DataFrame]:
    """Check the inputs against the inventory and the engine before queueing (400, not a
    failed run); raises PlanInputError naming the field."""
    if errors := model_spec_errors(workload):
        raise PlanInputError({"workload": errors})
    engine_workload = build_workload(workload)
    options, _ = build_options(options_spec, overrides)
    try:
        prepare_options(options, engine_workload)
    except PlannerInputError as exc:
        section = {
            key: "overrides" if key in (overrides or {}) else "options_spec" for key in exc.errors
        }
        nested: dict[str, dict[str, str]] = {}
        for key, message in exc.errors.items():
            nested.setdefault(section[key], {})[key] = message
        raise PlanInputError(nested) from exc
    return engine_workload, options
