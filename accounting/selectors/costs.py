"""Money of every pool in scope per bucket, cost reports and their sums."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from accounting.selectors.frames import (
    COST_GROUPS,
    AccountingScope,
    ScopeInputs,
    add_labels,
    assign_accounting_pools,
    scope_inputs,
    usage_frame,
)
from accounting.selectors.measured import (
    fill_measured_mfu,
    measured_group_mfu,
    measured_pool_inputs,
)
from accounting.selectors.uncovered import with_uncovered_hours
from core.frames import json_rows
from engine.cost import (
    cost_per_effective_pflop_day,
    waste_by_factor,
)
from engine.evaluate import evaluate_money_inputs, evaluate_pools
from engine.factors import FACTOR_NAMES
from inventory.frames import node_group_frame, pool_frame, price_pools, unpriced_reason
from inventory.models import AcceleratorModel, Cluster
from inventory.validity import invalid_clusters


@dataclass
class PoolCosts:
    """Per pool × bucket (index ``unit``): labels, measured figures, factors and money."""

    units: pd.DataFrame
    edges: pd.DatetimeIndex
    usage: pd.DataFrame
    warnings: list[str]


LOST_COST_PREFIX = "lost_cost_"
# The money columns of a cost report's rows and totals (what a reporting currency converts).
COST_MONEY_COLUMNS: tuple[str, ...] = (
    "total_cost",
    "compute_cost",
    "energy_cost",
    "idle_cost",
    "lost_cost",
    "uncovered_cost",
)


def pool_costs(
    scope: AccountingScope,
    usage: pd.DataFrame | None = None,
    inputs: ScopeInputs | None = None,
    *,
    money_only: bool = False,
) -> PoolCosts:
    """Money of every pool in scope per bucket, with the engine's factors (measured inputs).

    A pool's cost is over its in-service card-hours (idle cards cost as much as busy ones),
    at the cluster's ownership or rental price plus energy at the site's tariff and PUE.
    ``usage`` and ``inputs`` as in :func:`measured_utilization` (every team's usage).
    ``money_only``: what a chargeback reads (:data:`MONEY_ONLY_COLUMNS`, equal to the full
    run's), without the factors, losses and effective compute (no MFU or strategy search).
    """
    edges = scope.edges()
    inputs = inputs or scope_inputs(scope)
    warnings: list[str] = list(inputs.notes)
    if usage is None:
        usage = usage_frame(
            scope.cluster_ids,
            scope.period_start,
            scope.period_end,
            accelerator_id=scope.accelerator_id,
        )
    inventory, usage = _costed_inventory_and_usage(inputs, usage, warnings)
    warnings.extend(serving_pool_notes(inventory))
    empty = PoolCosts(pd.DataFrame(), edges, usage, warnings)
    if inventory.empty:
        return empty
    measured = measured_pool_inputs(
        usage, inventory, inputs.downtime, edges, scope.granularity, scope.tz
    )
    measured = measured[measured["in_service_card_hours"] > 0].reset_index(drop=True)
    uncut = inputs.uncut_inventory
    if uncut is not None:  # same clusters as the costed inventory (invalid ones left out)
        uncut = uncut[uncut["cluster"].isin(inventory["cluster"].unique())]
    measured = with_uncovered_hours(
        measured, uncut, usage, edges, scope.granularity, scope.tz
    ).reset_index(drop=True)
    if measured.empty:
        return empty
    units, groups, evaluated = _evaluated_units(
        scope, usage, inventory, measured, inputs, money_only
    )
    priced = (_money_units if money_only else _priced_units)(units, groups, evaluated, warnings)
    warnings.extend(_unpriced_notes(priced))
    return PoolCosts(priced, edges, usage, warnings)


def _unpriced_notes(priced: pd.DataFrame) -> list[str]:
    """One sentence per cluster without any price (its money is no data, never 0)."""
    ids = priced.loc[priced["cost_basis"] == "none", "cluster_id"].unique().tolist()
    if not ids:
        return []
    names = Cluster.objects.filter(pk__in=[int(i) for i in ids]).values_list("name", flat=True)
    return [
        f"{unpriced_reason(name).capitalize()}; it is left out of the totals and charged to "
        "no team."
        for name in sorted(names)
    ]


def serving_pool_notes(inventory: pd.DataFrame) -> list[str]:
    """Inference pools are scored with serving factors only by analyses: say so here."""
    if "pool_purpose" not in inventory:
        return []
    names = sorted(set(inventory.loc[inventory["pool_purpose"] == "inference", "pool_name"]))
    if not names:
        return []
    return [
        f"Inference pool{'s' if len(names) > 1 else ''} {', '.join(names)}: cost and "
        "utilization here are measured as for any pool, but the factors and money lost use "
        "the training definitions (MFU, scaling, effective training time); analyses score "
        "serving pools with MBU and availability (docs/efficiency-model.md, "
        "“Serving pools”)."
    ]


def _costed_inventory_and_usage(
    inputs: ScopeInputs, usage: pd.DataFrame, warnings: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Leave out clusters with invalid inventory and usage without inventory, saying so."""
    inventory = inputs.inventory
    # Error boundary: a cluster with out-of-range inventory is named and left out, not fatal.
    ids = inventory["cluster"].unique()
    invalid = inputs.read_once(("invalid", *sorted(ids)), lambda: invalid_clusters(ids))
    if invalid:
        notes = sorted({*invalid.values()})
        warnings.extend(f"{note}; left out until corrected." for note in notes)
        inventory = inventory[~inventory["cluster"].isin(list(invalid))]
        usage = usage[~usage["cluster"].isin(list(invalid))].reset_index(drop=True)
    usage = assign_accounting_pools(usage, inventory)
    orphan = usage["pool"].isna()
    if orphan.any():
        warnings.append(
            f"{usage.loc[orphan, 'card_hours'].sum():,.0f} card-hours of usage in clusters "
            "without inventory are left out of costs."
        )
        usage = usage[~orphan].reset_index(drop=True)
    return inventory, usage


def _evaluated_units(
    scope: AccountingScope,
    usage: pd.DataFrame,
    inventory: pd.DataFrame,
    measured: pd.DataFrame,
    inputs: ScopeInputs,
    money_only: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One engine "pool" per pool × bucket, with the measured inputs, through the engine
    (``money_only``: only its PUE and utilization, which measured MFU does not change)."""
    # The engine's pool inputs (site, cluster and pool settings with their overrides).
    cluster_ids = [int(cluster_id) for cluster_id in sorted(inventory["cluster"].unique())]
    pools = inputs.read_once(("pools", *cluster_ids), lambda: pool_frame(cluster_ids, None, 1.0))
    pools = pools[pools["pool_id"].isin(measured["pool"])]
    groups = node_group_frame(pools["pool_id"].tolist())
    if scope.accelerator_id is not None:
        name = AcceleratorModel.objects.get(pk=scope.accelerator_id).name
        groups = groups[groups["accelerator"] == name]
    if not money_only:
        groups = fill_measured_mfu(groups, measured_group_mfu(usage, inventory))
    units = measured.merge(pools, left_on="pool", right_on="pool_id", how="inner")
    units["unit"] = np.arange(len(units))
    units["duration_h"] = units["bucket_hours"]
    if "fill_utilization" in units:  # hours without records: the analyses' utilization
        units["utilization_planned"] = units["fill_utilization"].fillna(
            units["utilization_planned"].astype("float64")
        )
    cards_of_pool = (
        groups.assign(cards=groups["nodes"] * groups["cards_per_node"])
        .groupby("pool_id")["cards"]
        .sum()
    )
    full_card_hours = units["pool_id"].map(cards_of_pool) * units["duration_h"]
    units["allocated_card_hours"] = np.minimum(units["allocated_card_hours"], full_card_hours)
    unit_groups = groups.merge(units[["unit", "pool_id"]], on="pool_id").drop(columns="pool_id")
    engine_pools = units.drop(columns=["pool_id"]).rename(columns={"unit": "pool_id"})
    engine_pools = engine_pools.drop(
        columns=[c for c in ("cluster", "pool", "site") if c in engine_pools], errors="ignore"
    )
    evaluate = evaluate_money_inputs if money_only else evaluate_pools
    evaluated = evaluate(
        unit_groups.rename(columns={"unit": "pool_id"}), engine_pools.set_index("pool_id")
    )
    return units, groups, evaluated


_UNIT_COLUMNS: tuple[str, ...] = (
    "unit",
    "cluster_id",
    "pool_id",
    "site_id",
    "currency",
    "bucket_start",
    "bucket_end",
    "bucket_hours",
    "in_service_card_hours",
    "available_card_hours",
    "lost_card_hours",
    "down_card_hours",
)


def _priced_hours(
    units: pd.DataFrame,
    groups: pd.DataFrame,
    evaluated: pd.DataFrame,
    warnings: list[str],
    effective_utilization: pd.Series,
) -> tuple[pd.Series, pd.Series, pd.DataFrame, pd.DataFrame]:
    """(card-hours, allocated card-hours, cost inputs, costs) per unit: the one money path."""
    covered = units["covered"].astype(bool)
    in_service = units["in_service_card_hours"]
    of_unit = units["unit"]
    allocated = units["allocated_card_hours"].where(
        covered, in_service * of_unit.map(evaluated["utilization"])
    )
    over = allocated > in_service * (1 + 1e-9)
    if over.any():
        warnings.append(
            f"{int(over.sum())} pool-period(s) hold more allocated card-hours than the "
            "inventory provides; cost is taken over the allocated card-hours there."
        )
    card_hours = np.maximum(in_service, allocated)
    cost_input, costs = price_pools(
        units,
        groups,
        card_hours=card_hours,
        allocated_card_hours=allocated,
        pue=of_unit.map(evaluated["pue"]),
        effective_utilization=effective_utilization,
    )
    return card_hours, allocated, cost_input, costs


# What a money-only run gives per unit (the chargeback's inputs), equal to the full run's.
MONEY_ONLY_COLUMNS: tuple[str, ...] = (
    *_UNIT_COLUMNS,
    "card_hours",
    "allocated_card_hours",
    "cost_basis",
    "total_cost",
    "used_cost_per_card_hour",
    "covered",
    "uncovered_card_hours",
    "uncovered_cost",
)


def _money_units(
    units: pd.DataFrame, groups: pd.DataFrame, evaluated: pd.DataFrame, warnings: list[str]
) -> pd.DataFrame:
    """:func:`_priced_units`' :data:`MONEY_ONLY_COLUMNS` (no effective compute is priced)."""
    no_data = pd.Series(np.nan, index=units.index)
    card_hours, allocated, _, costs = _priced_hours(units, groups, evaluated, warnings, no_data)
    priced = pd.concat(
        [
            units[list(_UNIT_COLUMNS)],
            pd.DataFrame({"card_hours": card_hours, "allocated_card_hours": allocated}),
            costs[["cost_basis", "total_cost", "used_cost_per_card_hour"]],
        ],
        axis=1,
    )
    return _without_measured_figures(priced, units["covered"].astype(bool))[
        list(MONEY_ONLY_COLUMNS)
    ]


def _priced_units(
    units: pd.DataFrame, groups: pd.DataFrame, evaluated: pd.DataFrame, warnings: list[str]
) -> pd.DataFrame:
    """Money per unit on the one money path (`inventory.frames.price_pools`), lost per factor.

    Units of hours without usage records (``covered`` false) are priced at the engine's
    utilization, and carry no measured figure: allocated, idle, factors and losses are NaN.
    """
    covered = units["covered"].astype(bool)
    of_unit = units["unit"]
    card_hours, allocated, cost_input, costs = _priced_hours(
        units, groups, evaluated, warnings, of_unit.map(evaluated["product"])
    )
    lost_share = of_unit.map(evaluated["lost_share"])
    shares = pd.DataFrame(
        {
            name: (of_unit.map(evaluated[f"lost_share_{name}"]) / lost_share).fillna(0.0)
            for name in FACTOR_NAMES
        }
    )
    waste = waste_by_factor(
        costs.assign(card_hours=cost_input["card_hours"]),
        shares,
        effective_utilization=cost_input["effective_utilization"],
    )
    factor_columns = {name: of_unit.map(evaluated[name]) for name in FACTOR_NAMES}
    provenance = {
        f"{name}_provenance": of_unit.map(evaluated[f"{name}_provenance"]).astype(str)
        for name in FACTOR_NAMES
    }
    priced = pd.concat(
        [
            units[list(_UNIT_COLUMNS)],
            pd.DataFrame({"card_hours": card_hours, "allocated_card_hours": allocated}),
            costs,
            waste[[c for c in waste.columns if c.startswith(LOST_COST_PREFIX)] + ["lost_cost"]],
            pd.DataFrame(factor_columns),
            pd.DataFrame(provenance),
        ],
        axis=1,
    )
    return _without_measured_figures(priced, covered)


# What only usage records can tell: no data on the hours they do not cover.
_RECORDS_ONLY_COLUMNS: tuple[str, ...] = (
    "allocated_card_hours",
    "idle_cost",
    "cost_per_allocated_card_hour",
    "effective_pflop_days",
    "cost_per_effective_pflop_day",
    "lost_cost",
    *(f"{LOST_COST_PREFIX}{name}" for name in FACTOR_NAMES),
    *FACTOR_NAMES,
)


def _without_measured_figures(priced: pd.DataFrame, covered: pd.Series) -> pd.DataFrame:
    """Blank the record-only figures of uncovered units; say what they cost apart."""
    priced["covered"] = covered
    priced["uncovered_card_hours"] = priced["card_hours"].where(~covered, 0.0)
    priced["uncovered_cost"] = priced["total_cost"].where(~covered, 0.0)
    if covered.all():
        return priced
    priced.loc[~covered, [c for c in _RECORDS_ONLY_COLUMNS if c in priced]] = np.nan
    for name in FACTOR_NAMES:
        if f"{name}_provenance" in priced:
            priced.loc[~covered, f"{name}_provenance"] = "no data"
    return priced


SUMMED_COST_COLUMNS: tuple[str, ...] = (
    "card_hours",
    "allocated_card_hours",
    "lost_card_hours",
    "down_card_hours",
    "it_energy_mwh",
    "facility_energy_mwh",
    "compute_cost",
    "energy_cost",
    "energy_overhead_cost",
    "idle_cost",
    "total_cost",
    "co2_tonnes",
    "peak_pflop_days",
    "effective_pflop_days",
    "lost_cost",
    *(f"{LOST_COST_PREFIX}{name}" for name in FACTOR_NAMES),
    "uncovered_card_hours",
    "uncovered_cost",
)


def _summed_costs(units: pd.DataFrame, keys: list[str], *, factors: bool = True) -> pd.DataFrame:
    """Sum money and card-hours by ``keys``; ratios recomputed from the sums.

    Ratios are over the hours usage records cover (``uncovered_cost`` is the money of the
    others). With ``factors`` also each group's factors and their provenance
    (:func:`_summed_factors`); without, only the money (what the Costs charts draw).
    """
    grouped = units.groupby(keys, dropna=False, sort=True)
    # min_count: a sum of no data is no data, not 0.
    summed = grouped[list(SUMMED_COST_COLUMNS)].sum(min_count=1)
    weight = units["peak_pflop_days"].where(units["covered"], 0.0)
    by = [units[k] for k in keys]
    covered_peak = weight.groupby(by, sort=True).sum().reindex(summed.index)
    factor_columns = _summed_factors(units, weight, by, covered_peak) if factors else {}
    summed = summed.reset_index()
    allocated = summed["allocated_card_hours"]
    effective = summed["effective_pflop_days"]
    covered_cost = summed["total_cost"] - summed["uncovered_cost"]
    summed["cost_per_allocated_card_hour"] = covered_cost / allocated.where(allocated > 0)
    peak = pd.Series(covered_peak.to_numpy(), index=summed.index)
    summed["covered_peak_pflop_days"] = peak
    summed["cost_per_effective_pflop_day"] = cost_per_effective_pflop_day(
        covered_cost, effective, peak
    )
    summed["effective_utilization"] = effective / peak.where(peak > 0)
    lost_columns = [f"{LOST_COST_PREFIX}{name}" for name in FACTOR_NAMES]
    if factors:
        summed["lost_cost_by_factor"] = [
            dict(zip(FACTOR_NAMES, values, strict=True))
            for values in summed[lost_columns].itertuples(index=False, name=None)
        ]
        for column, values in factor_columns.items():
            summed[column] = values
    return summed.drop(columns=lost_columns)


def _summed_factors(
    units: pd.DataFrame, weight: pd.Series, by: list[pd.Series], covered_peak: pd.Series
) -> dict[str, list[dict[str, Any]]]:
    """Per group (in ``covered_peak``'s order) the factors and the provenance of each.

    Factors are aggregated card-hour-weighted by peak FLOPs (weight = peak PFLOP-days of the
    covered hours; docs/efficiency-model.md, Aggregation), each with the provenance that
    carries most of the weight; a group without any covered hour has no factors (NaN,
    "no data").
    """
    total_weight = covered_peak.where(covered_peak > 0)
    factors: dict[str, pd.Series] = {}
    provenance: dict[str, pd.Series] = {}
    # One grouped sum for the five factors (a pivot table per factor costs ~5 ms each).
    weighted = units[list(FACTOR_NAMES)].mul(weight, axis=0).groupby(by, sort=True).sum()
    for name in FACTOR_NAMES:
        factors[name] = weighted[name].reindex(covered_peak.index) / total_weight
        table = (
            weight.groupby([*by, units[f"{name}_provenance"]], sort=True)
            .sum()
            .unstack(fill_value=0.0)
        )
        chosen = table.fillna(0.0).idxmax(axis=1).reindex(covered_peak.index)
        provenance[name] = chosen.where(factors[name].notna(), "no data")
    return {
        "factors": [
            dict(zip(FACTOR_NAMES, values, strict=True))
            for values in zip(*(factors[n].to_numpy() for n in FACTOR_NAMES), strict=True)
        ],
        "factor_provenance": [
            dict(zip(FACTOR_NAMES, values, strict=True))
            for values in zip(*(provenance[n].to_numpy() for n in FACTOR_NAMES), strict=True)
        ],
    }


def _cost_groups(scope: AccountingScope) -> list[str]:
    return [name for name in dict.fromkeys(scope.group_by) if name in COST_GROUPS]


def cost_rows_frame(
    scope: AccountingScope, costs: PoolCosts, *, factors: bool = True
) -> pd.DataFrame:
    """The rows of :func:`cost_report` as a frame, before JSON (the dashboards chart it;
    ``factors=False``: money and ratios only, see :func:`_summed_costs`)."""
    if costs.units.empty:
        return pd.DataFrame()
    group_by = _cost_groups(scope)
    id_columns = [f"{name}_id" for name in group_by]
    keys = [*id_columns, "currency", "bucket_start", "bucket_end"]
    summed = _summed_costs(costs.units, keys, factors=factors)
    return add_labels(summed.rename(columns={c: c[:-3] for c in id_columns}), group_by)


def cost_report(
    scope: AccountingScope, usage: pd.DataFrame | None = None, costs: PoolCosts | None = None
) -> dict[str, Any]:
    """Money per ``scope.group_by`` × bucket and totals per currency (docs/efficiency-model.md).

    ``costs``: :func:`pool_costs` of this scope already computed (shared with a chargeback).
    """
    costs = costs if costs is not None else pool_costs(scope, usage)
    group_by = _cost_groups(scope)
    rows: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    if not costs.units.empty:
        rows = json_rows(cost_rows_frame(scope, costs))
        totals = json_rows(_summed_costs(costs.units, ["currency"]))
    return {
        "period_start": scope.period_start,
        "period_end": scope.period_end,
        "granularity": scope.granularity,
        "group_by": group_by,
        "factor_names": list(FACTOR_NAMES),
        "rows": rows,
        "totals": totals,
        "warnings": costs.warnings,
    }
