"""A plan's lifecycle, as the analyses': created and queued after the transaction commits,
every write of a run guarded by its `run_id`, a failed run keeps the last result; and
staleness when the inventory a plan used changes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.jobs import lifecycle as jobs
from core.jobs.dispatch import send_or_defer
from planner.models import Plan
from planner.plans.validation import validate_inputs

# Inventory level → the option column naming the object (what staleness looks up).
REF_COLUMNS = {
    "site": "site_id",
    "cluster": "cluster_id",
    "pool": "pool_id",
    "accelerator": "accelerator_id",
}


def inventory_refs(rows: pd.DataFrame | list[Mapping[str, Any]]) -> dict[str, list[int]]:
    """The inventory ids an option frame (or its snapshot rows) uses, per level."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame.from_records(rows)
    return {
        level: sorted(int(v) for v in frame[column].dropna().unique()) if column in frame else []
        for level, column in REF_COLUMNS.items()
    }


def mark_plans_stale(level: str, ids: Iterable[int | None]) -> int:
    """Flag the plans whose options use one of these inventory objects (two queries).

    Plans are few and their references small, so they are matched in Python (JSON
    containment is not portable across PostgreSQL and SQLite).
    """
    wanted = {int(i) for i in ids if i is not None}
    if not wanted:
        return 0
    hits = [
        pk
        for pk, refs in Plan.objects.values_list("pk", "inventory_refs")
        if wanted & set((refs or {}).get(level) or [])
    ]
    if not hits:
        return 0
    return Plan.objects.filter(pk__in=hits).update(stale=True, inventory_changed_at=timezone.now())


# --------------------------------------------------------------------------------------------
# Lifecycle (same discipline as analyses)
# --------------------------------------------------------------------------------------------

INPUT_FIELDS = ("workload", "options_spec", "overrides", "levers")


@transaction.atomic
def create_plan(
    *,
    owner,
    name: str,
    workload: dict,
    options_spec: dict,
    overrides: dict | None = None,
    levers: list | None = None,
) -> Plan:
    """Validate against the inventory, create, and queue the computation after commit."""
    _, options = validate_inputs(workload, options_spec, overrides or {})
    plan = Plan.objects.create(
        name=name,
        owner=owner if owner is not None and owner.is_authenticated else None,
        workload=workload,
        options_spec=options_spec,
        overrides=overrides or {},
        levers=levers or [],
        inventory_refs=inventory_refs(options),
        queued_at=timezone.now(),
    )
    _queue(plan)
    return plan


@transaction.atomic
def update_plan(plan: Plan, **changes: Any) -> Plan:
    """Change a plan; changed inputs start a new run (the last result stays until then)."""
    plan = Plan.objects.select_for_update().get(pk=plan.pk)
    inputs_changed = any(
        key in INPUT_FIELDS and getattr(plan, key) != value for key, value in changes.items()
    )
    for key, value in changes.items():
        setattr(plan, key, value)
    if inputs_changed:
        _, options = validate_inputs(plan.workload, plan.options_spec, plan.overrides)
        plan.inventory_refs = _merged_refs(plan.inventory_refs, inventory_refs(options))
        _reset_run(plan)
    plan.save()
    if inputs_changed:
        _queue(plan)
    return plan


@transaction.atomic
def recompute_plan(plan: Plan) -> Plan:
    """Start a fresh run with the current inventory; a run in flight is superseded."""
    plan = Plan.objects.select_for_update().get(pk=plan.pk)
    _reset_run(plan)
    plan.save()
    _queue(plan)
    return plan


@transaction.atomic
def clone_plan(plan: Plan, *, owner, name: str | None = None) -> Plan:
    """A copy owned by `owner`, showing the source's last result while it recomputes."""
    clone = Plan.objects.create(
        name=name or f"Copy of {plan.name}"[:200],
        owner=owner,
        workload=plan.workload,
        options_spec=plan.options_spec,
        overrides=plan.overrides,
        levers=plan.levers,
        summary=plan.summary,
        results=plan.results,
        input_snapshot=plan.input_snapshot,
        stale=plan.stale,
        inventory_changed_at=plan.inventory_changed_at,
        inventory_refs=plan.inventory_refs,
        cloned_from=plan,
        queued_at=timezone.now(),
    )
    _queue(clone)
    return clone


def _merged_refs(*refs: Mapping[str, list[int]] | None) -> dict[str, list[int]]:
    """Union per level: the shown result and the queued inputs both count until a run ends."""
    return {
        level: sorted({i for ref in refs for i in (ref or {}).get(level) or []})
        for level in REF_COLUMNS
    }


def _reset_run(plan: Plan) -> None:
    jobs.reset_run(plan)


def _queue(plan: Plan) -> None:
    # After commit; a broker outage leaves it queued and marked, sent when the broker is back.
    send_or_defer(plan)


def current_run(plan_id: int, run_id: str) -> QuerySet[Plan]:
    """The plan row of this run only: empty once a newer run superseded it."""
    return jobs.current_run(Plan, plan_id, run_id)


def mark_running(plan_id: int, run_id: str) -> bool:
    return jobs.mark_running(Plan, plan_id, run_id)


def record_progress(plan_id: int, run_id: str, percent: int) -> None:
    jobs.progress(Plan, plan_id, run_id, percent)


def _accept_result(plan: Plan) -> None:
    plan.inventory_refs = inventory_refs(plan.input_snapshot.get("options") or [])
    # An edit after this run began may have been missed by it: the plan stays stale.
    changed, began = plan.inventory_changed_at, plan.started_at
    plan.stale = bool(changed and (began is None or changed >= began))


def finish(plan_id: int, run_id: str, *, results: dict, summary: dict, snapshot: dict) -> bool:
    return jobs.finish(
        Plan,
        plan_id,
        run_id,
        apply=_accept_result,
        results=results,
        summary=summary,
        input_snapshot=snapshot,
    )


def fail(plan_id: int, run_id: str, reason: str) -> None:
    """Record why a run failed; `results` keeps the last successful run's numbers."""
    jobs.fail(Plan, plan_id, run_id, reason)
