"""The numbers of one report, built from the accounting selectors (measured data).

:func:`build_numbers` returns a JSON-safe dict: it is stored on the Report ("the numbers it
used"), and every rendering (HTML, XLSX, CSV, charts) reads only from it, so a file and the
e-mail can never disagree. Rows are the accounting API's rows for the same period (granularity
``total``), so the XLSX equals ``/api/v1/accounting/…`` for that period.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accounting import selectors as accounting
from core.scopes import Scope
from engine.factors import FACTOR_LABELS as ENGINE_FACTOR_LABELS
from engine.factors import FACTOR_NAMES
from reports import conversion, losses, periods, tables
from reports import selectors as report_selectors
from reports.models import ReportSchedule, ReportTemplate
from reports.trends import change

NO_DATA = "—"  # how a figure without data reads (never 0, never "n/a USD")
RECOMMENDATIONS = 3
UTILIZATION_GROUPS: tuple[str, ...] = ("cluster", "pool", "accelerator", "team")
FACTOR_LABELS = {
    "effective_utilization": "Effective utilization",
    **ENGINE_FACTOR_LABELS,
}
UTILIZATION_COLUMNS = (
    "available_card_hours",
    "allocated_card_hours",
    "idle_card_hours",
    "lost_card_hours",
    "down_card_hours",
    "allocation_share",
    "utilization",
    "effective_time",
    "productive_share",
)
COST_COLUMNS = (
    "currency",
    "card_hours",
    "allocated_card_hours",
    *accounting.COST_MONEY_COLUMNS,
    "cost_per_allocated_card_hour",
    "cost_per_effective_pflop_day",
    "effective_utilization",
    "facility_energy_mwh",
    "co2_tonnes",
)
CHARGEBACK_COLUMNS = (
    "team",
    "currency",
    "used_card_hours",
    "used_cost",
    "idle_cost_share",
    "uncovered_cost",
    "chargeback_cost",
    "share_of_total",
)

# Which sections each content template shows (the summary always comes first).
SECTIONS: dict[str, tuple[str, ...]] = {
    ReportTemplate.UTILIZATION: (
        "summary",
        "recommendations",
        "utilization",
        "idle",
        "failures",
    ),
    ReportTemplate.COST_CHARGEBACK: (
        "summary",
        "recommendations",
        "costs",
        "chargeback",
        "idle",
        "waste",
    ),
    ReportTemplate.EFFICIENCY_REVIEW: (
        "summary",
        "recommendations",
        "waste",
        "utilization",
        "idle",
        "costs",
        "chargeback",
        "failures",
    ),
}

ADVICE = {
    "utilization": "move queued work onto these cards, co-locate inference or batch jobs, or "
    "release rented capacity",
    "effective_time": "tune the checkpoint interval (Young/Daly) and investigate the nodes "
    "that fail",
    "mfu": "profile the main jobs: fused kernels, larger micro-batches, less host-side waiting",
    "scaling": "keep tensor parallelism inside a node, use more micro-batches per step and "
    "overlap the gradient all-reduce",
    "energy": "raise cooling set-points, contain hot aisles or move hot pools to liquid cooling",
}


def money(value: float | None, currency: str | None) -> str:
    """``$12,345`` for USD, ``12,345 EUR`` otherwise ("—" when unknown: no data, no unit)."""
    if value is None:
        return NO_DATA
    if currency == "USD":
        return f"${value:,.0f}"
    return f"{value:,.0f} {currency or ''}".strip()


def _scope_filters(schedule: ReportSchedule, period: periods.Period) -> dict[str, Any]:
    """Cluster ids and team of the schedule's scope (site → its clusters; team → where it ran)."""
    if schedule.scope == Scope.CLUSTER:
        return {"cluster_ids": (schedule.cluster_id,), "team": None}
    if schedule.scope == Scope.SITE:
        return {"cluster_ids": report_selectors.site_cluster_ids(schedule.site_id), "team": None}
    if schedule.scope == Scope.TEAM:
        ids = report_selectors.team_cluster_ids(schedule.team, period.start, period.end)
        return {"cluster_ids": ids, "team": schedule.team}
    return {"cluster_ids": None, "team": None}


def _scope(
    filters: dict, period: periods.Period, tz: str, group_by: Sequence[str] = ("cluster",), **extra
) -> accounting.AccountingScope:
    return accounting.AccountingScope(
        period_start=period.start,
        period_end=period.end,
        granularity="total",
        cluster_ids=filters["cluster_ids"],
        group_by=tuple(group_by),
        tz=tz,
        **extra,
    )


def _weighted_totals(totals: list[dict]) -> dict[str, Any]:
    """One fleet figure from per-currency totals: factors weighted by the peak PFLOP-days of
    the hours usage records cover (the others have no factors: no data, not zero)."""
    weight = sum(row.get("covered_peak_pflop_days") or 0.0 for row in totals)
    factors: dict[str, float | None] = {}
    for name in FACTOR_NAMES:
        parts = [
            (row["factors"].get(name), row.get("covered_peak_pflop_days") or 0.0)
            for row in totals
            if row["factors"].get(name) is not None
        ]
        factors[name] = (
            sum(value * w for value, w in parts) / sum(w for _, w in parts)
            if parts and sum(w for _, w in parts) > 0
            else None
        )
    effective = _known_sum(row.get("effective_pflop_days") for row in totals)
    currencies = sorted({row["currency"] for row in totals})
    single = currencies[0] if len(currencies) == 1 else None
    total_of = {
        name: _known_sum(row.get(name) for row in totals) if single else None
        for name in ("total_cost", "idle_cost", "lost_cost")
    }
    return {
        "effective_utilization": effective / weight
        if effective is not None and weight > 0
        else None,
        "factors": factors,
        "currency": single,
        "currencies": currencies,
        "lost_cost_by_factor": _lost_by_factor(totals) if single else {},
        **total_of,
    }


def _known_sum(values) -> float | None:
    """The sum of the known values; None when none is known (no data is not 0)."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _lost_by_factor(totals: list[dict]) -> dict[str, float | None]:
    """Money lost per factor over rows of one currency; None where no row has the figure."""
    lost: dict[str, float | None] = {}
    for name in FACTOR_NAMES:
        known = [
            value
            for row in totals
            if (value := (row.get("lost_cost_by_factor") or {}).get(name)) is not None
        ]
        lost[name] = sum(known) if known else None
    return lost


def _waste_rows(totals: list[dict]) -> list[dict]:
    """Where the money is lost: per currency (never summed across), factor by factor."""
    rows = []
    for currency in sorted({row["currency"] for row in totals}):
        lost = _lost_by_factor([row for row in totals if row["currency"] == currency])
        rows += [
            {
                "factor": name,
                "label": FACTOR_LABELS[name],
                "currency": currency,
                "lost_cost": lost[name],
            }
            for name in FACTOR_NAMES
        ]
    return rows


def _card_hours(rows: list[dict]) -> dict[str, float | None]:
    if not rows:  # no usage data in the scope: no figures, not zeros
        return dict.fromkeys(UTILIZATION_COLUMNS[:6])  # the card-hour figures and the share
    available = sum(row.get("available_card_hours") or 0.0 for row in rows)
    allocated = sum(row.get("allocated_card_hours") or 0.0 for row in rows)
    return {
        "available_card_hours": available,
        "allocated_card_hours": allocated,
        "idle_card_hours": max(available - allocated, 0.0),
        "lost_card_hours": sum(row.get("lost_card_hours") or 0.0 for row in rows),
        "down_card_hours": sum(row.get("down_card_hours") or 0.0 for row in rows),
        "allocation_share": allocated / available if available > 0 else None,
    }


def _utilization_rows(report: dict, name: str) -> list[dict]:
    rows = []
    for row in report["rows"]:
        available = row.get("available_card_hours")
        allocated = row.get("allocated_card_hours")
        idle = (
            max(available - allocated, 0.0)
            if available is not None and allocated is not None
            else None
        )
        label = row.get(name)
        if name == "team" and "cluster" in row:
            label = f"{row['team']} @ {row['cluster']}"
        rows.append({"name": label, **row, "idle_card_hours": idle})
    return sorted(rows, key=lambda row: str(row["name"]))


def _period_figures(
    schedule: ReportSchedule, period: periods.Period, tz: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(headline figures, raw accounting reports) for one period."""
    filters = _scope_filters(schedule, period)
    team = filters["team"]
    empty_scope = filters["cluster_ids"] == ()
    utilization: dict[str, list[dict]] = {}
    # Inventory, coverage and downtime of the scope: read once for every table below.
    inputs = None if empty_scope else accounting.scope_inputs(_scope(filters, period, tz))
    for group in UTILIZATION_GROUPS:
        if empty_scope:
            utilization[group] = []
            continue
        report = accounting.utilization_report(
            _scope(filters, period, tz, (group,), team=team), inputs
        )
        utilization[group] = _utilization_rows(report, group)
    if empty_scope:
        costs = {"rows": [], "totals": [], "warnings": []}
        pool_costs = {"rows": [], "totals": [], "warnings": []}
        chargeback = {"rows": [], "totals": [], "warnings": []}
    else:
        by_pool = _scope(filters, period, tz, ("cluster", "pool"))
        money = accounting.pool_costs(by_pool, inputs=inputs)
        costs = accounting.cost_report(_scope(filters, period, tz, ("cluster",)), costs=money)
        pool_costs = accounting.cost_report(by_pool, costs=money)
        chargeback = accounting.chargeback_report(
            _scope(filters, period, tz, team=team), costs=money
        )
    fleet = _weighted_totals(costs["totals"])
    # Team scope: card-hours are the team's own; the idle figures are its clusters'.
    hours = _card_hours(utilization["cluster"])
    figures = {
        "effective_utilization": fleet["effective_utilization"],
        "factors": fleet["factors"],
        "currency": fleet["currency"],
        "currencies": fleet["currencies"],
        "total_cost": fleet["total_cost"],
        "idle_cost": fleet["idle_cost"],
        "lost_cost": fleet["lost_cost"],
        "lost_cost_by_factor": fleet["lost_cost_by_factor"],
        "chargeback_cost": _charged(chargeback["rows"]) if team is not None else None,
        "team": team,
        **hours,
    }
    raw = {
        "utilization": utilization,
        "costs": costs,
        "pool_costs": pool_costs,
        "chargeback": chargeback,
        "filters": filters,
    }
    return figures, raw


def _charged(rows: list[dict]) -> float | None:
    """Charged to a team: one sum within one currency; None without rows or across currencies."""
    known = [row["chargeback_cost"] for row in rows if row["chargeback_cost"] is not None]
    return sum(known) if known and len({row["currency"] for row in rows}) == 1 else None


def _summary(current: dict, previous: dict) -> dict[str, Any]:
    factor_rows = []
    for name in ("effective_utilization", *FACTOR_NAMES):
        now = current["effective_utilization"] if name == "effective_utilization" else None
        before = previous["effective_utilization"] if name == "effective_utilization" else None
        if name != "effective_utilization":
            now, before = current["factors"].get(name), previous["factors"].get(name)
        factor_rows.append(
            {
                "name": name,
                "label": FACTOR_LABELS[name],
                "value": tables.finite(now),
                "previous": tables.finite(before),
                **change(tables.finite(now), tables.finite(before), higher_is_better=True),
            }
        )
    figure_specs = [
        ("available_card_hours", "Available card-hours", True, "card_hours"),
        ("allocated_card_hours", "Allocated card-hours", True, "card_hours"),
        ("idle_card_hours", "Idle card-hours", False, "card_hours"),
        ("lost_card_hours", "Card-hours lost to failures", False, "card_hours"),
        ("total_cost", "Total cost", False, "money"),
        ("idle_cost", "Cost of idle cards", False, "money"),
    ]
    if current.get("team") is not None:
        figure_specs.append(("chargeback_cost", "Charged to the team", False, "money"))
    mixed = len(current["currencies"]) > 1
    figures = []
    for key, label, higher_is_better, unit in figure_specs:
        now, before = tables.finite(current.get(key)), tables.finite(previous.get(key))
        relative = change(now, before, higher_is_better)
        if now is not None and before:
            relative["relative"] = (now - before) / before
        figures.append(
            {
                "name": key,
                "label": label,
                "unit": unit,
                "value": now,
                "previous": before,
                **relative,
                "no_data_reason": (
                    f"no single total: the scope mixes {' and '.join(current['currencies'])}; "
                    "see the cost sheets per currency"
                )
                if unit == "money" and mixed
                else None,
            }
        )
    return {
        "effective_utilization": tables.finite(current["effective_utilization"]),
        "previous_effective_utilization": tables.finite(previous["effective_utilization"]),
        "currency": current["currency"],
        "currencies": current["currencies"],
        "factors": factor_rows,
        "figures": figures,
    }


def _rests_on(cluster: str | None, notes: Sequence[str]) -> str:
    """What a cluster's measured figures rest on: the whole period or the covered days."""
    prefix = f"Cluster {cluster}: "
    for note in notes:
        if note.startswith(prefix):
            return note[len(prefix) :].split(";")[0]
    return "usage records cover the whole period"


def _recommendations(
    cost_rows: list[dict],
    utilization_clusters: list[dict],
    period: periods.Period,
    notes: Sequence[str] = (),
) -> list[dict]:
    """The largest (cluster, factor) losses in money, as plain sentences.

    Only factors measured from this period's data qualify (a default MFU or a planned
    utilization is no ground for advice); each sentence says which data it rests on. A loss
    is what the card-hours the factor lost cost (`reports.losses`), and a month is only
    extrapolated from a shorter period, saying so.
    """
    by_cluster = {row.get("cluster_id"): row for row in utilization_clusters}
    candidates = []
    for row in cost_rows:
        provenance = row.get("factor_provenance") or {}
        priced = {
            name: loss
            for name in FACTOR_NAMES
            if provenance.get(name) == "measured"
            and (loss := losses.priced_loss(name, row, period.hours)) is not None
            and loss.cost > 0
        }
        top_factor = max(priced, key=lambda name: priced[name].cost) if priced else None
        for factor, loss in priced.items():
            candidates.append((loss, row, factor, factor == top_factor))
    candidates.sort(key=lambda item: (-item[0].cost, str(item[1].get("cluster")), item[2]))
    return [
        _recommendation(loss, row, factor, largest, by_cluster, period, notes)
        for loss, row, factor, largest in candidates[:RECOMMENDATIONS]
    ]


def _recommendation(
    loss: losses.PricedLoss,
    row: dict,
    factor: str,
    largest: bool,
    by_cluster: dict,
    period: periods.Period,
    notes: Sequence[str],
) -> dict[str, Any]:
    """One piece of advice: the loss, what it cost in the period and, for a short period,
    the month at the period's rate (said as such)."""
    cluster = row.get("cluster")
    currency = row.get("currency")
    usage = by_cluster.get(row.get("cluster_id"), {})
    detail = _loss_detail(factor, row.get("factors") or {}, usage)
    days = period.hours / 24.0
    cost = f"{LOSS_COST[factor]} {money(loss.cost, currency)} in these {days:,.3g} days"
    if loss.per_month is not None:
        cost += (
            f"; about {money(loss.per_month, currency)} a month at this period's rate "
            f"(extrapolated, × {loss.months_factor:.2f})"
        )
    lead = "the biggest loss" if largest else "a large loss"
    rests_on = _rests_on(cluster, notes)
    text = (
        f"{FACTOR_LABELS[factor]} is {lead} in cluster {cluster}: {detail}{cost}. "
        f"Next step: {ADVICE[factor]}. Measured: {rests_on}."
    )
    return {
        "cluster": cluster,
        "factor": factor,
        "lost_card_hours": loss.card_hours,
        "lost_cost": loss.cost,
        "lost_cost_per_month": loss.per_month,
        "currency": currency,
        "rests_on": rests_on,
        "text": text[0].upper() + text[1:],
    }


# How a factor's loss is priced in a sentence ("…, which cost 1,170 EUR in these 7 days").
LOSS_COST = {
    "utilization": ", which cost",
    "effective_time": ", which cost",
    "mfu": "; the busy card-hours' unused peak cost",
    "scaling": "; the busy card-hours it loses cost",
    "energy": "; that overhead cost",
}


def _loss_detail(factor: str, factors: dict, usage: dict) -> str:
    if factor == "utilization":
        share = usage.get("allocation_share")
        idle = 1.0 - share if share is not None else 1.0 - (factors.get("utilization") or 0.0)
        hours = usage.get("idle_card_hours")
        return f"{idle:.0%} of the card-hours idle" + (
            f" ({hours:,.0f} card-hours)" if hours is not None else ""
        )
    if factor == "effective_time":
        lost = usage.get("lost_card_hours") or 0.0
        share = 1.0 - (factors.get("effective_time") or 1.0)
        return (
            f"{lost:,.0f} card-hours lost to failed and preempted jobs ({share:.0%} of held time)"
        )
    if factor == "mfu":
        return f"cards deliver {factors.get('mfu') or 0.0:.0%} of their peak FLOPs (MFU)"
    if factor == "scaling":
        return f"parallel scaling efficiency is {factors.get('scaling') or 0.0:.0%}"
    energy = factors.get("energy") or 1.0
    return f"PUE {1.0 / energy:.2f}, so {1.0 - energy:.0%} of the power never reaches a card"


def _period_json(period: periods.Period) -> dict[str, Any]:
    return {
        "start": period.start.isoformat(),
        "end": period.end.isoformat(),
        "label": period.label(),
        "hours": period.hours,
    }


def build_numbers(schedule: ReportSchedule, period: periods.Period) -> dict[str, Any]:
    """Everything a report of ``schedule`` over ``period`` shows, as JSON-safe data."""
    spec = schedule.spec()
    previous = periods.previous_period(spec, period)
    tz = schedule.timezone
    current, raw = _period_figures(schedule, period, tz)
    before, raw_before = _period_figures(schedule, previous, tz)
    utilization = raw["utilization"]
    cost_rows = raw["costs"]["rows"]
    job_counts = report_selectors.job_state_counts(
        raw["filters"]["cluster_ids"], raw["filters"]["team"], period.start, period.end
    )
    chargeback = raw["chargeback"]
    waste = _waste_rows(raw["costs"]["totals"])
    warnings = [*dict.fromkeys(raw["costs"].get("warnings", []) + chargeback.get("warnings", []))]
    if len(current["currencies"]) > 1:
        warnings.append(
            "The scope mixes " + " and ".join(current["currencies"]) + ": money is shown per "
            "currency in the cost tables and left out of the headline."
        )
    if schedule.scope == Scope.TEAM:
        warnings.append(
            f"Team scope: utilization and card-hours are team {schedule.team}'s own; factors, "
            "cost and idle figures are those of the clusters it ran on."
        )
    numbers = {
        "schedule": {
            "id": schedule.pk,
            "name": schedule.name,
            "template": schedule.template,
            "template_label": schedule.get_template_display(),
            "scope": schedule.scope,
            "scope_label": schedule.scope_label,
        },
        "timezone": tz,
        "period": _period_json(period),
        "previous_period": _period_json(previous),
        "sections": list(SECTIONS[schedule.template]),
        "summary": _summary(current, before),
        "utilization": utilization,
        "idle": {
            "idle_card_hours": current["idle_card_hours"],
            "idle_cost": current["idle_cost"],
            "currency": current["currency"],
            "top_pools": tables.top_idle_pools(utilization["pool"], raw["pool_costs"]["rows"]),
        },
        "costs": {
            "clusters": tables.cost_rows(cost_rows),
            "pools": tables.cost_rows(raw["pool_costs"]["rows"]),
            "totals": raw["costs"]["totals"],
        },
        "chargeback": {
            "idle_rule": chargeback.get("idle_rule", "proportional"),
            # Currency by currency (each is charted on its own axis), the largest first.
            "teams": sorted(
                chargeback["rows"],
                key=lambda row: (row["currency"], -(row["chargeback_cost"] or 0)),
            ),
            "totals": chargeback["totals"],
        },
        "waste": waste,
        "failures": tables.failures(utilization["cluster"], job_counts),
        "recommendations": _recommendations(
            cost_rows, utilization["cluster"], period, raw["costs"].get("warnings", [])
        ),
        "warnings": warnings,
    }
    target = schedule.reporting_currency  # blank: per currency, as the costs are kept
    return conversion.apply(numbers, target, raw_before["costs"]["totals"]) if target else numbers
