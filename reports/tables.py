"""Row shaping for a report's tables: the idlest pools, named cost rows, failures per cluster
(reports.content builds the report's numbers from them)."""

from __future__ import annotations

import math
from typing import Any

TOP_IDLE_POOLS = 5


def finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def top_idle_pools(utilization_pools: list[dict], pool_costs: list[dict]) -> list[dict]:
    cost_of = {row.get("pool_id"): row for row in pool_costs}
    rows = []
    for row in utilization_pools:
        idle = row.get("idle_card_hours")
        if not idle:
            continue
        cost = cost_of.get(row.get("pool_id"), {})
        available = row.get("available_card_hours") or 0.0
        rows.append(
            {
                "pool": row.get("pool"),
                "pool_id": row.get("pool_id"),
                "cluster": cost.get("cluster"),
                "idle_card_hours": idle,
                "idle_share": idle / available if available else None,
                "idle_cost": finite(cost.get("idle_cost")),
                "currency": cost.get("currency"),
            }
        )
    rows.sort(key=lambda row: (-(row["idle_cost"] or 0.0), -row["idle_card_hours"], row["pool"]))
    return rows[:TOP_IDLE_POOLS]


def cost_rows(rows: list[dict]) -> list[dict]:
    result = []
    for row in rows:
        name = row.get("cluster")
        if "pool" in row:
            name = f"{row.get('cluster')} / {row.get('pool')}"
        result.append({"name": name, **row})
    return sorted(result, key=lambda row: str(row["name"]))


def failures(utilization_clusters: list[dict], job_counts: list[dict]) -> dict[str, Any]:
    counts: dict[str, dict[str, int]] = {}
    for row in job_counts:
        counts.setdefault(row["cluster"], {})[row["state"]] = row["jobs"]
    rows = []
    for row in utilization_clusters:
        states = counts.get(row.get("cluster"), {})
        rows.append(
            {
                "cluster": row.get("cluster"),
                "failed_jobs": states.get("failed", 0),
                "node_fail_jobs": states.get("node_fail", 0),
                "preempted_jobs": states.get("preempted", 0),
                "lost_card_hours": row.get("lost_card_hours"),
                "down_card_hours": row.get("down_card_hours"),
                "effective_time": row.get("effective_time"),
            }
        )
    return {
        "clusters": rows,
        "lost_card_hours": sum(row["lost_card_hours"] or 0.0 for row in rows),
        "down_card_hours": sum(row["down_card_hours"] or 0.0 for row in rows),
        "failed_jobs": sum(row["failed_jobs"] + row["node_fail_jobs"] for row in rows),
    }
