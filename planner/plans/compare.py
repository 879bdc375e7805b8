"""Reading plans: who may edit, the list, the option table and plans side by side (compared
within a currency only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from access.roles import ADMIN, has_role
from planner.models import Plan
from planner.plans.workload import HEADLINE_COLUMNS, OPTION_COLUMN_NAMES, PlanInputError

# --------------------------------------------------------------------------------------------
# Selectors and rules
# --------------------------------------------------------------------------------------------


def can_edit(user, plan: Plan) -> bool:
    """Everyone with a role reads a plan; only its owner or an administrator changes it."""
    return bool(
        user
        and user.is_authenticated
        and ((plan.owner_id is not None and plan.owner_id == user.pk) or has_role(user, ADMIN))
    )


def plans_for_list() -> QuerySet[Plan]:
    """Plans without their heavy JSON (results, snapshot): one query per page."""
    return Plan.objects.select_related("owner").defer("results", "input_snapshot", "inventory_refs")


def plans_to_compare(ids: list[int]) -> list[Plan]:
    """The plans in the order asked; raises PlanInputError for unknown ids."""
    found = {plan.pk: plan for plan in Plan.objects.select_related("owner").filter(pk__in=ids)}
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise PlanInputError({"ids": f"No plan with id {', '.join(missing)}."})
    return [found[i] for i in ids]


def option_table(
    plan: Plan, *, feasible: bool | None = None, pareto: bool | None = None
) -> list[dict[str, Any]]:
    """The stored option rows in column order (jsonb keeps no key order), optionally filtered."""
    results = plan.results or {}
    columns = results.get("columns") or list(OPTION_COLUMN_NAMES)
    rows = results.get("options", [])
    if feasible is not None:
        rows = [row for row in rows if bool(row["feasible"]) == feasible]
    if pareto is not None:
        rows = [row for row in rows if bool(row["on_pareto_front"]) == pareto]
    return [{column: row.get(column) for column in columns} for row in rows]


COMPARE_METRICS: tuple[str, ...] = ("total_flops", "options", "feasible", "pareto")
COMPARE_HEADLINE_COLUMNS = tuple(c for c in HEADLINE_COLUMNS if c not in ("option_id", "currency"))


def _headlines(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Currency → its cheapest/fastest headlines (a summary stored before per-currency ones:
    its single cheapest/fastest under their currency)."""
    groups = summary.get("by_currency")
    if groups is None:
        single = summary.get("cheapest") or summary.get("fastest")
        groups = [{**summary, "currency": single["currency"]}] if single else []
    return {group["currency"]: group for group in groups}


def _headline_metrics(plans: list[Plan]) -> list[dict[str, Any]]:
    """One row per currency, headline and column: `cheapest.EUR.total_cost`. Plans are compared
    within a currency only."""
    headlines = [_headlines(plan.summary or {}) for plan in plans]
    currencies = sorted({currency for per_plan in headlines for currency in per_plan})
    return [
        {
            "metric": f"{which}.{currency}.{column}",
            "values": [
                ((per_plan.get(currency) or {}).get(which) or {}).get(column)
                for per_plan in headlines
            ],
        }
        for which in ("cheapest", "fastest")
        for currency in currencies
        for column in COMPARE_HEADLINE_COLUMNS
    ]


def comparison(plans: list[Plan]) -> dict[str, Any]:
    """Side by side: one entry per plan (headline and Pareto front) and one row per metric."""
    entries = []
    for plan in plans:
        results = plan.results or {}
        by_id = {row["option_id"]: row for row in results.get("options", [])}
        entries.append(
            {
                "id": plan.pk,
                "name": plan.name,
                "owner": plan.owner.get_username() if plan.owner else None,
                "status": plan.status,
                "error": plan.error,
                "workload": plan.workload,
                "summary": plan.summary,
                "pareto_front": [
                    {c: by_id[i][c] for c in HEADLINE_COLUMNS}
                    for i in results.get("pareto_front", [])
                    if i in by_id
                ],
            }
        )
    metrics = [
        {"metric": metric, "values": [(plan.summary or {}).get(metric) for plan in plans]}
        for metric in COMPARE_METRICS
    ]
    return {"plans": entries, "metrics": metrics + _headline_metrics(plans)}
