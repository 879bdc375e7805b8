"""Cost, energy and CO₂ of a pool over a period, and chargeback to teams, vectorised.

Formulas: docs/efficiency-model.md, "The money path and currencies".

One row per pool (or pool × bucket). Input columns (float64 unless said; the names match the
capacity planner's columns so either can feed the other):

==========================  ========  ====================================================
column                      required  meaning
==========================  ========  ====================================================
card_hours                  yes       in-service card-hours of the period (what is paid for)
allocated_card_hours        yes       card-hours held by jobs (busy)
idle_card_hours             no        default ``card_hours − allocated_card_hours``
tdp_w                       yes       card TDP, W
pue                         yes       facility ÷ IT energy, >= 1
tariff_per_kwh              no (0)    energy price per facility kWh
grid_carbon_g_per_kwh       no (0)    grid intensity, gCO₂ per kWh
capital_cost_per_card       no        card + its share of server, network, storage
amortization_years          no        required with capital_cost_per_card
yearly_opex_per_card        no (0)    maintenance, support, space, staff per card-year
rental_price_per_card_hour  no        when set, replaces ownership cost
rental_includes_energy      no        bool; a cloud price includes power (energy cost 0)
cards_per_node              no (8)    to spread the per-node overhead over cards
node_overhead_w             no        per-node non-accelerator draw (default below)
busy_load_share             no        mean draw of a busy card as share of TDP
idle_power_share            no        draw of an idle card as share of TDP
peak_tflops                 no        dense peak per card, for PFLOP-days
effective_utilization       no        product of the five factors, for effective PFLOP-days
==========================  ========  ====================================================

Formulas:

* ownership per card-hour = capital / (years × 8,760) + yearly opex / 8,760; or the rental
  price. ``compute_cost`` = that × ``card_hours`` (idle cards cost as much as busy ones).
* IT power: busy card = TDP × busy_load_share, idle card = TDP × idle_power_share, plus
  node_overhead_w / cards_per_node per card (CPUs, memory, NICs, fans, switches share).
  Facility energy = IT energy × PUE; ``energy_cost`` = facility kWh × tariff;
  CO₂ = facility kWh × grid intensity.
* ``energy_overhead_cost`` = energy_cost × (PUE − 1) / PUE: the cooling and power-conversion
  share, the money the energy factor (1 / PUE) loses.
* ``effective_pflop_days`` = peak PFLOPS × days × effective utilization
  = card_hours / 24 × peak_tflops / 1,000 × effective_utilization, and
  ``cost_per_effective_pflop_day`` = total_cost / effective_pflop_days.
* Money lost per factor: the lost share 1 − effective_utilization split by attribution shares
  (the engine's −ln(factor) split, passed in): :func:`waste_by_factor`.
* Chargeback: :func:`chargeback`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from engine.defaults import FACTOR_FLOOR

HOURS_PER_YEAR = 8_760.0
HOURS_PER_DAY = 24.0


def cost_per_effective_pflop_day(
    total_cost: pd.Series, effective_pflop_days: pd.Series, peak_pflop_days: pd.Series
) -> pd.Series:
    """Money per delivered PFLOP-day; undefined (NaN) where nothing was delivered.

    A factor floored at FACTOR_FLOOR (an idle pool) leaves a sliver of effective compute:
    dividing by it would print billions, so at or below the floor the ratio is undefined.
    """
    delivered = effective_pflop_days > FACTOR_FLOOR * peak_pflop_days
    return total_cost / effective_pflop_days.where(delivered & (effective_pflop_days > 0))


@dataclass(frozen=True)
class PowerAssumptions:
    """Documented power defaults; a pool's own column (same name) wins over these.

    * ``busy_load_share`` 0.75: LLM training holds accelerators near their power limit during
      compute but drops during communication, data loading and checkpoints; mean board power
      measured on large training jobs is typically 70-85 % of TDP. 0.75 is the middle-low end,
      since inference and small jobs draw less.
    * ``idle_power_share`` 0.15: an idle SXM card with its memory powered draws roughly
      60-100 W of a 400-700 W TDP (nvidia-smi on A100/H100 nodes), i.e. 10-20 %.
    * ``node_overhead_w`` 2,000 W per 8-card node: an 8×H100 server is rated 10.2 kW of which
      the GPUs are 5.6 kW; under load the rest (2 CPUs, 2 TB RAM, NVSwitches, ~10 NICs, NVMe,
      fans, PSU losses) draws about 1.5-2.5 kW, plus a share of leaf/spine switches. It does
      not scale down much when the cards idle, so it is charged to every in-service hour.
    * ``cards_per_node`` 8: the common HGX/OAM board.
    """

    busy_load_share: float = 0.75
    idle_power_share: float = 0.15
    node_overhead_w: float = 2_000.0
    cards_per_node: float = 8.0


DEFAULT_POWER = PowerAssumptions()
IdleRule = Literal["none", "proportional", "even"]
IDLE_RULES: tuple[str, ...] = ("none", "proportional", "even")
UNALLOCATED_IDLE_TEAM = "(idle, not charged)"
ENERGY_AND_COST_COLUMNS: tuple[str, ...] = (
    "cost_basis",
    "ownership_cost_per_card_hour",
    "busy_energy_cost_per_card_hour",
    "idle_energy_cost_per_card_hour",
    "used_cost_per_card_hour",
    "it_energy_mwh",
    "it_energy_provenance",
    "facility_energy_mwh",
    "compute_cost",
    "energy_cost",
    "energy_overhead_cost",
    "idle_cost",
    "total_cost",
    "co2_tonnes",
    "cost_per_allocated_card_hour",
    "peak_pflop_days",
    "effective_pflop_days",
    "cost_per_effective_pflop_day",
)


class CostInputError(ValueError):
    """An impossible cost input; the message names the column and the rows."""


def _require(valid: pd.Series | np.ndarray, message: str, index: pd.Index) -> None:
    bad = ~np.asarray(valid, dtype=bool)
    if bad.any():
        raise CostInputError(f"{message} (rows {list(index[bad][:5])})")


def _values(frame: pd.DataFrame, name: str, default: float) -> np.ndarray:
    """A float column, NaN or missing filled with ``default``, as an array."""
    # Arrays, not Series: the same arithmetic at ~1/3 of the time (pandas' per-op overhead).
    if name not in frame:
        return np.full(len(frame), default, dtype="float64")
    values = frame[name].astype("float64").to_numpy()
    return values if np.isnan(default) else np.where(np.isnan(values), default, values)


def _measured_it_scale(
    pools: pd.DataFrame, modeled_it_kwh: np.ndarray
) -> tuple[np.ndarray, pd.Series]:
    """Measured IT energy (``measured_it_kwh``: DCGM energy × node overhead, over the period)
    rescales the nameplate power model, so busy and idle energy keep the model's split."""
    measured = _values(pools, "measured_it_kwh", np.nan)
    _require(np.isnan(measured) | (measured >= 0), "measured_it_kwh must be >= 0", pools.index)
    use = ~np.isnan(measured) & (modeled_it_kwh > 0)
    scale = np.where(use, measured / np.where(use, modeled_it_kwh, np.nan), 1.0)
    provenance = pd.Series(np.where(use, "measured", "modeled"), index=pools.index, dtype="str")
    return scale, provenance


def _at_least(values: np.ndarray, lower: float) -> np.ndarray:
    """``Series.clip(lower=…)`` on an array: NaN stays NaN."""
    return np.where((values >= lower) | np.isnan(values), values, lower)


def energy_and_cost(pools: pd.DataFrame, power: PowerAssumptions = DEFAULT_POWER) -> pd.DataFrame:
    """Energy, CO₂ and money per row (columns :data:`ENERGY_AND_COST_COLUMNS`, same index).

    ``cost_basis`` is ``rental``, ``ownership`` or ``none`` (no price given: the ownership
    cost is unknown, so compute, idle and total cost are NaN; energy is still priced).
    ``idle_cost`` is what the idle card-hours cost (ownership + idle energy); the rest of
    ``total_cost`` is ``used_cost_per_card_hour × allocated_card_hours``.
    """
    for name in ("card_hours", "allocated_card_hours", "tdp_w", "pue"):
        if name not in pools:
            raise CostInputError(f"column {name} is required")
    # As pandas does: inf and NaN from extreme inputs are values here, not warnings.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _energy_and_cost(pools, power)


def _energy_and_cost(pools: pd.DataFrame, power: PowerAssumptions) -> pd.DataFrame:
    index = pools.index
    card_hours = _values(pools, "card_hours", np.nan)
    allocated = _values(pools, "allocated_card_hours", np.nan)
    idle = _values(pools, "idle_card_hours", np.nan)
    idle = np.where(np.isnan(idle), card_hours - allocated, idle)
    tdp_w = _values(pools, "tdp_w", np.nan)
    pue = _values(pools, "pue", np.nan)
    _require(card_hours >= 0, "card_hours must be >= 0", index)
    _require(allocated >= 0, "allocated_card_hours must be >= 0", index)
    _require(
        idle >= -1e-9 * _at_least(np.abs(card_hours), 1), "allocated exceeds card_hours", index
    )
    _require(tdp_w > 0, "tdp_w must be > 0", index)
    _require(pue >= 1, "pue must be >= 1", index)
    idle = _at_least(idle, 0.0)

    tariff = _values(pools, "tariff_per_kwh", 0.0)
    carbon = _values(pools, "grid_carbon_g_per_kwh", 0.0)
    busy_share = _values(pools, "busy_load_share", power.busy_load_share)
    idle_share = _values(pools, "idle_power_share", power.idle_power_share)
    overhead_w = _values(pools, "node_overhead_w", power.node_overhead_w)
    cards_per_node = _values(pools, "cards_per_node", power.cards_per_node)
    _require(cards_per_node > 0, "cards_per_node must be > 0", index)
    for name, values in (
        ("tariff_per_kwh", tariff),
        ("grid_carbon_g_per_kwh", carbon),
        ("node_overhead_w", overhead_w),
    ):
        _require(values >= 0, f"{name} must be >= 0", index)
    for name, values in (("busy_load_share", busy_share), ("idle_power_share", idle_share)):
        _require((values >= 0) & (values <= 1), f"{name} must be in [0, 1]", index)

    capital = _values(pools, "capital_cost_per_card", np.nan)
    years = _values(pools, "amortization_years", np.nan)
    opex = _values(pools, "yearly_opex_per_card", 0.0)
    rental = _values(pools, "rental_price_per_card_hour", np.nan)
    has_capital = ~np.isnan(capital)
    _require(~has_capital | (years > 0), "amortization_years must be > 0 with capital", index)
    _require(~has_capital | (capital >= 0), "capital_cost_per_card must be >= 0", index)
    is_rental = ~np.isnan(rental)
    _require(~is_rental | (rental >= 0), "rental_price_per_card_hour must be >= 0", index)
    owned_rate = np.where(has_capital, capital, 0.0) / np.where(has_capital, years, 1.0)
    owned_rate = owned_rate / HOURS_PER_YEAR + opex / HOURS_PER_YEAR
    has_ownership = has_capital | (opex > 0)
    # No price at all: the ownership cost is unknown (NaN), never free.
    ownership_rate = np.where(is_rental, rental, np.where(has_ownership, owned_rate, np.nan))
    cost_basis = pd.Series(
        np.where(is_rental, "rental", np.where(has_ownership, "ownership", "none")),
        index=index,
        dtype="str",
    )

    overhead_per_card_kw = overhead_w / cards_per_node / 1000.0
    busy_kw = tdp_w * busy_share / 1000.0 + overhead_per_card_kw
    idle_kw = tdp_w * idle_share / 1000.0 + overhead_per_card_kw
    scale, it_provenance = _measured_it_scale(pools, busy_kw * allocated + idle_kw * idle)
    busy_kw, idle_kw = busy_kw * scale, idle_kw * scale
    it_kwh = busy_kw * allocated + idle_kw * idle
    facility_kwh = it_kwh * pue
    includes_energy = (
        (pools["rental_includes_energy"].fillna(False).astype(bool) & is_rental).to_numpy()
        if "rental_includes_energy" in pools
        else np.zeros(len(pools), dtype=bool)
    )
    paid_tariff = np.where(~includes_energy, tariff, 0.0)
    busy_energy_rate = busy_kw * pue * paid_tariff
    idle_energy_rate = idle_kw * pue * paid_tariff
    energy_cost = busy_energy_rate * allocated + idle_energy_rate * idle
    compute_cost = ownership_rate * card_hours
    total_cost = compute_cost + energy_cost

    peak_tflops = _values(pools, "peak_tflops", np.nan)
    effective_utilization = _values(pools, "effective_utilization", np.nan)
    peak_pflop_days = card_hours / HOURS_PER_DAY * peak_tflops / 1000.0
    effective_pflop_days = peak_pflop_days * effective_utilization
    return pd.DataFrame(
        {
            "cost_basis": cost_basis,
            "ownership_cost_per_card_hour": ownership_rate,
            "busy_energy_cost_per_card_hour": busy_energy_rate,
            "idle_energy_cost_per_card_hour": idle_energy_rate,
            "used_cost_per_card_hour": ownership_rate + busy_energy_rate,
            "it_energy_mwh": it_kwh / 1000.0,
            "it_energy_provenance": it_provenance,
            "facility_energy_mwh": facility_kwh / 1000.0,
            "compute_cost": compute_cost,
            "energy_cost": energy_cost,
            "energy_overhead_cost": energy_cost * (pue - 1.0) / pue,
            "idle_cost": (ownership_rate + idle_energy_rate) * idle,
            "total_cost": total_cost,
            "co2_tonnes": facility_kwh * carbon / 1e6,
            "cost_per_allocated_card_hour": total_cost / np.where(allocated > 0, allocated, np.nan),
            "peak_pflop_days": peak_pflop_days,
            "effective_pflop_days": effective_pflop_days,
            "cost_per_effective_pflop_day": cost_per_effective_pflop_day(
                pd.Series(total_cost, index=index),
                pd.Series(effective_pflop_days, index=index),
                pd.Series(peak_pflop_days, index=index),
            ),
        },
        index=index,
    )


def waste_by_factor(
    costs: pd.DataFrame,
    attribution_shares: pd.DataFrame | Mapping[str, float],
    *,
    effective_utilization: pd.Series | None = None,
) -> pd.DataFrame:
    """Money, card-hours and peak PFLOP-days lost per factor.

    ``costs`` needs ``total_cost``, ``card_hours`` and (for PFLOP-days) ``peak_pflop_days``;
    ``effective_utilization`` defaults to ``costs["effective_utilization"]``.
    ``attribution_shares`` gives each factor's share of the lost part ``1 − effective``
    (columns = factor names, one row per cost row, or one mapping for all rows); the shares of
    a row must sum to 1. Returns ``lost_cost_<factor>``, ``lost_card_hours_<factor>``,
    ``lost_pflop_days_<factor>`` and the totals ``lost_cost``, ``lost_card_hours``.
    """
    effective = (
        effective_utilization
        if effective_utilization is not None
        else costs["effective_utilization"]
    ).astype("float64")
    _require(
        (effective > 0) & (effective <= 1 + 1e-12), "effective_utilization in (0, 1]", costs.index
    )
    if isinstance(attribution_shares, Mapping):
        shares = pd.DataFrame(
            {name: float(value) for name, value in attribution_shares.items()}, index=costs.index
        )
    else:
        shares = attribution_shares.reindex(costs.index).astype("float64")
    _require((shares >= 0).all(axis=1), "attribution shares must be >= 0", costs.index)
    total_share = shares.sum(axis=1)
    lost_share = 1.0 - effective
    _require(
        (lost_share <= 1e-12) | (np.abs(total_share - 1.0) <= 1e-6),
        "attribution shares must sum to 1",
        costs.index,
    )
    out: dict[str, pd.Series] = {}
    peak_pflop_days = costs.get("peak_pflop_days")
    for factor in shares.columns:
        part = lost_share * shares[factor]
        out[f"lost_cost_{factor}"] = costs["total_cost"] * part
        out[f"lost_card_hours_{factor}"] = costs["card_hours"] * part
        if peak_pflop_days is not None:
            out[f"lost_pflop_days_{factor}"] = peak_pflop_days * part
    out["lost_cost"] = costs["total_cost"] * lost_share
    out["lost_card_hours"] = costs["card_hours"] * lost_share
    return pd.DataFrame(out, index=costs.index)


def chargeback(
    team_usage: pd.DataFrame,
    pool_costs: pd.DataFrame,
    *,
    pool_keys: Sequence[str] = ("pool",),
    team_column: str = "account",
    idle_rule: IdleRule = "proportional",
    scope_keys: Sequence[str] = (),
) -> pd.DataFrame:
    """Charge each team its used card-hours at cost plus a share of idle cost.

    ``team_usage``: ``pool_keys``, ``team_column``, ``used_card_hours``.
    ``pool_costs``: ``pool_keys`` (+ ``scope_keys``) + the :func:`energy_and_cost` columns
    ``total_cost`` and ``used_cost_per_card_hour``, plus ``allocated_card_hours``.

    A team's used cost = used card-hours × the pool's ``used_cost_per_card_hour`` (ownership +
    busy energy). Each pool's idle cost is the rest of its total cost, and is shared out:

    * ``proportional``: to the pool's teams in proportion to their used card-hours;
    * ``even``: equally among the teams that used the pool;
    * ``none``: not charged; it appears as the row ``(idle, not charged)``.

    A pool nobody used has its idle cost shared over all teams of its bill by the same rule
    (in proportion to their used cost, or evenly); with no teams at all it stays not charged.
    So the ``chargeback_cost`` column always sums to the pools' total cost, bill by bill.

    ``scope_keys``: columns of ``pool_costs`` that split the pools into separate bills (e.g.
    currency and month), all charged in one vectorised pass; none: one bill.

    Returns one row per bill and team: ``scope_keys``, ``team_column``, ``used_card_hours``,
    ``used_cost``, ``idle_cost_share``, ``chargeback_cost``; after each bill's teams its
    not-charged row when non-zero (with ``none``: always).
    """
    if idle_rule not in IDLE_RULES:
        raise CostInputError(f"idle_rule must be one of {IDLE_RULES}, not {idle_rule!r}")
    keys = list(pool_keys)
    if not keys:
        raise CostInputError("pool_keys must name at least one column (e.g. a constant pool id)")
    scopes = list(scope_keys)
    if set(scopes) & {*keys, team_column}:
        raise CostInputError("scope_keys must differ from pool_keys and team_column")
    pools = pool_costs[
        [*keys, *scopes, "total_cost", "used_cost_per_card_hour", "allocated_card_hours"]
    ]
    _require(~pools.duplicated(keys).to_numpy(), "pool_costs has one row per pool", pools.index)
    # Each bill as a number (first seen first); its scope values are put back at the end.
    bill = (
        pools.groupby(scopes, sort=False, dropna=False).ngroup().to_numpy()
        if scopes
        else np.zeros(len(pools), dtype="int64")
    )
    bills = pools[scopes].assign(_bill=bill).drop_duplicates("_bill").set_index("_bill")
    pools = pools.drop(columns=scopes).assign(_bill=bill)
    usage = team_usage[[*keys, team_column, "used_card_hours"]].astype(
        {"used_card_hours": "float64"}
    )
    used = usage.groupby([*keys, team_column], sort=False, dropna=False)["used_card_hours"].sum()
    usage = used.reset_index()
    _require(usage["used_card_hours"] >= 0, "used_card_hours must be >= 0", usage.index)
    usage = usage.merge(pools, on=keys, how="left", validate="many_to_one")
    _require(usage["total_cost"].notna(), "team usage in a pool without costs", usage.index)
    by_pool = [usage[key] for key in keys]
    pool_used = usage["used_card_hours"].groupby(by_pool, sort=False).transform("sum")
    _require(
        pool_used <= usage["allocated_card_hours"] * (1 + 1e-9) + 1e-9,
        "teams used more card-hours than the pool's allocated_card_hours",
        usage.index,
    )
    usage["used_cost"] = usage["used_card_hours"] * usage["used_cost_per_card_hour"]

    used_cost_by_pool = usage["used_cost"].groupby(by_pool, sort=False).sum()
    pools = pools.set_index(keys)
    pool_idle = pools["total_cost"] - used_cost_by_pool.reindex(pools.index).fillna(0.0)
    by_team = [usage["_bill"], usage[team_column]]
    teams = usage.groupby(by_team, sort=False, dropna=False)[["used_card_hours", "used_cost"]].sum()
    teams["idle_cost_share"] = 0.0
    if idle_rule == "none":
        unassigned = pool_idle.groupby(pools["_bill"], sort=False).sum()
    else:
        # Weight of each team inside its pool.
        if idle_rule == "proportional":
            weight = usage["used_card_hours"]
        else:
            weight = pd.Series(1.0, index=usage.index)
        pool_weight = weight.groupby(by_pool, sort=False).transform("sum")
        idle_of_row = (
            usage[keys]
            .merge(pool_idle.rename("_idle").reset_index(), on=keys, how="left")["_idle"]
            .to_numpy()
        )
        # The team's fraction first: tiny (even subnormal) weights still give the whole idle.
        with np.errstate(divide="ignore", invalid="ignore"):
            in_pool = np.where(pool_weight > 0, idle_of_row * (weight / pool_weight), 0.0)
        # Same keys, same first-seen order as ``teams``.
        teams["idle_cost_share"] = (
            pd.Series(in_pool, index=usage.index)
            .groupby(by_team, sort=False, dropna=False)
            .sum()
            .to_numpy()
        )
        # Pools whose teams have no weight (no teams, or teams with zero use): bill-wide.
        weighted = weight.groupby(by_pool, sort=False).sum()
        orphan = ~pool_idle.index.isin(weighted.index[weighted > 0])
        orphan_idle = pool_idle[orphan].groupby(pools.loc[orphan, "_bill"], sort=False).sum()
        team_bill = teams.index.get_level_values(0)
        bill_used = teams["used_cost"].groupby(team_bill, sort=False)
        bill_total = bill_used.transform("sum").to_numpy()
        even = 1.0 / bill_used.transform("size").to_numpy()
        if idle_rule == "proportional":
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(bill_total > 0, teams["used_cost"].to_numpy() / bill_total, even)
        else:
            share = even
        teams["idle_cost_share"] += share * orphan_idle.reindex(team_bill).fillna(0.0).to_numpy()
        # A bill whose pools nobody used and that has no teams keeps its idle cost uncharged.
        unassigned = orphan_idle[~orphan_idle.index.isin(team_bill) & (orphan_idle != 0.0)]
    teams["chargeback_cost"] = teams["used_cost"] + teams["idle_cost_share"]
    result = teams.reset_index()
    if len(unassigned):
        idle_rows = pd.DataFrame(
            {
                "_bill": unassigned.index.to_numpy(),
                team_column: UNALLOCATED_IDLE_TEAM,
                "used_card_hours": 0.0,
                "used_cost": 0.0,
                "idle_cost_share": unassigned.to_numpy(),
                "chargeback_cost": unassigned.to_numpy(),
            }
        )
        result = pd.concat([result, idle_rows], ignore_index=True)
    # Bill by bill: its teams, then its not-charged row (a stable sort keeps their order).
    result = result.iloc[np.argsort(result["_bill"].to_numpy(), kind="stable")]
    scope_values = bills.reindex(result["_bill"].to_numpy()).reset_index(drop=True)
    result = result.drop(columns="_bill").reset_index(drop=True)
    return pd.concat([scope_values, result], axis=1)
