"""The engine's option frame from the inventory: one query per table (catalog, sites,
pools with their node groups, clusters' card totals), never one query per option; card
prices in another currency than the site's energy converted with a dated rate or unpriced."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import Q
from django.utils import timezone

from accounting.coverage import record_spans
from accounting.selectors import apply_measured_usage
from engine.defaults import default_value
from engine.reliability import RELIABILITY_PRESETS
from inventory.currency import REFERENCE, conversions
from inventory.frames import cluster_cards, opex_per_card
from inventory.models import AcceleratorModel, NodeGroup, Pool, Site
from planner.plans.workload import (
    ASSUMPTION_COLUMNS,
    DEFAULT_AMORTIZATION_YEARS,
    DEFAULT_HISTORY_DAYS,
    FACTOR_OVERRIDES,
    MAX_OPTIONS,
    MIN_FAILURE_EXPOSURE_CARD_HOURS,
    MIN_HISTORY,
    OVERRIDE,
    PROVENANCE_COLUMN,
    PlanInputError,
)

DEFAULT_PRESET = RELIABILITY_PRESETS[0]  # production practice; stored plans without one too

# --------------------------------------------------------------------------------------------
# Options from the inventory (one query per table)
# --------------------------------------------------------------------------------------------

_CATALOG_FIELDS = (
    "id",
    "name",
    "vendor",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "dense_fp4_tflops",
    "memory_gb",
    "memory_bandwidth_tbs",
    "tdp_w",
    "intra_node_interconnect_gbs",
    "nvlink_domain_cards",
    "default_training_mfu",
    "rental_price_per_card_hour",
    "list_price",
    "currency",
)
_SITE_FIELDS = (
    "id",
    "name",
    "cooling_type",
    "pue",
    "metered_facility_energy_kwh",
    "metered_it_energy_kwh",
    "tariff_per_kwh",
    "grid_carbon_g_per_kwh",
    "currency",
    "assumptions",
)


def _catalog_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """Planner columns of one catalog row (keys as in `_CATALOG_FIELDS`)."""
    return {
        "accelerator": row["name"],
        "accelerator_id": row["id"],
        "vendor": row["vendor"],
        "dense_bf16_tflops": row["dense_bf16_tflops"],
        "dense_fp8_tflops": row["dense_fp8_tflops"],
        "dense_fp4_tflops": row["dense_fp4_tflops"],  # fp4 training (NVFP4 or MXFP4)
        "memory_gb": row["memory_gb"],
        "memory_bandwidth_tbs": row["memory_bandwidth_tbs"],  # the per-card model's HBM
        "tdp_w": row["tdp_w"],
        "intra_node_interconnect_gbs": row["intra_node_interconnect_gbs"],
        "nvlink_domain_cards": row["nvlink_domain_cards"],  # None: the node is the domain
        "default_training_mfu": row["default_training_mfu"],
    }


def _mapped_assumptions(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Inventory assumptions layered (later wins), as planner columns."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in (layer or {}).items() if v is not None})
    columns = {ASSUMPTION_COLUMNS[k]: v for k, v in merged.items() if k in ASSUMPTION_COLUMNS}
    if "utilization" in columns:
        columns["utilization_provenance"] = "modeled"  # an entered planning assumption
    return columns


def _site_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "site": row["name"],
        "site_id": row["id"],
        "cooling_type": row["cooling_type"],
        "pue": row["pue"],
        "metered_facility_energy_kwh": row["metered_facility_energy_kwh"],
        "metered_it_energy_kwh": row["metered_it_energy_kwh"],
        "tariff_per_kwh": row["tariff_per_kwh"],
        "grid_carbon_g_per_kwh": row["grid_carbon_g_per_kwh"],
        "currency": row["currency"],
        **_mapped_assumptions(row["assumptions"]),
    }


def _resolve_accelerators(keys: list[Any]) -> list[dict[str, Any]]:
    """Catalog rows for names or ids, in the order given (one query)."""
    names = [k for k in keys if isinstance(k, str) and not k.isdecimal()]
    ids = [int(k) for k in keys if not (isinstance(k, str) and not k.isdecimal())]
    found = AcceleratorModel.objects.filter(Q(name__in=names) | Q(pk__in=ids)).values(
        *_CATALOG_FIELDS
    )
    by_name = {row["name"]: row for row in found}
    by_id = {row["id"]: row for row in by_name.values()}
    rows, missing, seen = [], [], set()
    for key in keys:
        row = by_name.get(key) if key in names else by_id.get(int(key))
        if row is None:
            missing.append(str(key))
        elif row["id"] not in seen:
            seen.add(row["id"])
            rows.append(row)
    if missing:
        raise PlanInputError(
            {"options_spec": {"accelerators": f"Not in the catalog: {', '.join(missing)}."}}
        )
    return rows


def _resolve_sites(entries: list[Any]) -> list[dict[str, Any]]:
    """Site columns for inventory ids (one query) or explicit figures, in the order given."""
    ids = [int(e) for e in entries if not isinstance(e, Mapping)]
    found = {row["id"]: row for row in Site.objects.filter(pk__in=ids).values(*_SITE_FIELDS)}
    missing = sorted(set(ids) - set(found))
    if missing:
        raise PlanInputError(
            {"options_spec": {"sites": f"No site with id {', '.join(map(str, missing))}."}}
        )
    sites = []
    for entry in entries:
        if isinstance(entry, Mapping):
            sites.append(
                {
                    "site": entry["name"],
                    "site_id": None,
                    "cooling_type": entry.get("cooling_type") or default_value("cooling"),
                    "pue": entry.get("pue"),
                    "tariff_per_kwh": entry.get("tariff_per_kwh", 0.0),
                    "grid_carbon_g_per_kwh": entry.get("grid_carbon_g_per_kwh", 0.0),
                    "currency": entry.get("currency", "USD"),
                }
            )
        else:
            sites.append(_site_columns(found[int(entry)]))
    return sites


def _catalog_price_columns(
    row: Mapping[str, Any], spec: Mapping[str, Any], warnings: list[str]
) -> dict[str, Any]:
    """Cost basis of a new card: the catalog's rental price, or its purchase price; without
    one the card is unpriced (its money unknown, never 0)."""
    if spec.get("cost_basis", "rental") == "purchase":
        capital = spec.get("capital_cost_per_card") or row["list_price"]
        if capital is None:
            return _unpriced_card(row["name"], "no list price in the catalog", warnings)
        return {
            "capital_cost_per_card": capital,
            "amortization_years": spec.get("amortization_years") or DEFAULT_AMORTIZATION_YEARS,
            "yearly_opex_per_card": spec.get("yearly_opex_per_card") or 0.0,
            "price_currency": row["currency"],
        }
    if row["rental_price_per_card_hour"] is None:
        return _unpriced_card(row["name"], "no rental price per card-hour in the catalog", warnings)
    return {
        "rental_price_per_card_hour": row["rental_price_per_card_hour"],
        "price_currency": row["currency"],
    }


def _unpriced_card(card: str, missing: str, warnings: list[str]) -> dict[str, Any]:
    """Option columns of a card without a price: unpriced, with the reason (see
    `without_unpriced_money`)."""
    reason = f"not priced: no price for {card} ({missing})"
    warnings.append(f"{card}: {missing}; its options are not priced.")
    return {"unpriced_reason": reason}


def _catalog_options(spec: Mapping[str, Any], warnings: list[str]) -> list[dict[str, Any]]:
    """New cards: every card model × card count (or deadline) × site."""
    keys = spec.get("accelerators") or []
    if not keys:
        return []
    sizes = (
        [{"cards": c} for c in spec["cards"]]
        if spec.get("cards")
        else [{"deadline_days": d} for d in spec.get("deadline_days") or []]
    )
    sites = spec.get("sites") or []
    count = len(keys) * len(sizes) * max(len(sites), 1)
    if count > MAX_OPTIONS:
        raise PlanInputError(
            {
                "options_spec": {
                    "accelerators": f"{len(keys)} card models × {len(sizes)} sizes × "
                    f"{max(len(sites), 1)} sites make {count:,} options; at most {MAX_OPTIONS:,}."
                }
            }
        )
    accelerators = _resolve_accelerators(keys)
    site_rows = _resolve_sites(sites)
    if not site_rows:
        warnings.append(
            "No site given: PUE is the default for air cooling and energy is not priced."
        )
        site_rows = [{"site": "", "site_id": None}]
    shared = {"source": "catalog", "card_granularity": spec.get("card_granularity", 1)}
    if spec.get("cards_per_node"):
        shared["cards_per_node"] = spec["cards_per_node"]
    rows = []
    for accelerator in accelerators:
        card = {
            **_catalog_columns(accelerator),
            **_catalog_price_columns(accelerator, spec, warnings),
        }
        for size in sizes:
            for site in site_rows:
                rows.append({**shared, **card, **size, **site})
    return rows


def _history_windows(
    cluster_ids: list[int], end: dt.datetime, days: float
) -> dict[int, tuple[dt.datetime, dt.datetime]]:
    """Per cluster, the last `days` before `end` trimmed to the span its usage records cover
    (one query); clusters with no records there, or less than a day of them, are left out."""
    spans = record_spans(cluster_ids, end - dt.timedelta(days=days), end)
    return {cid: window for cid, window in spans.items() if window[1] - window[0] >= MIN_HISTORY}


def _measured_mtbf(failures: Any, exposure_card_hours: Any) -> dict[str, Any]:
    """Per-card MTBF from a pool's node failures (jobs ending NODE_FAIL; accounting counts
    them in one groupby) over its jobs' card-hours, or a note why the default stays: too
    few card-hours, or no failures (only a lower bound, exposure ÷ 1, which we do not use)."""
    if exposure_card_hours is None or not np.isfinite(exposure_card_hours):
        return {}
    failures, exposure = int(failures or 0), float(exposure_card_hours)
    counted = f"{failures} node failure{'' if failures == 1 else 's'}"
    if exposure < MIN_FAILURE_EXPOSURE_CARD_HOURS:
        return {
            "mtbf_note": f"{counted} in {exposure:,.0f} card-hours of jobs: "
            f"fewer than {MIN_FAILURE_EXPOSURE_CARD_HOURS:,.0f} card-hours, not used"
        }
    if failures == 0:
        return {
            "mtbf_note": f"no node failures in {exposure:,.0f} card-hours of jobs: the MTBF is "
            f"at least {exposure:,.0f} h, a bound, not used"
        }
    return {
        "mtbf_card_hours": exposure / failures,
        "mtbf_basis": f"measured: {counted} in {exposure:,.0f} card-hours",
    }


def _measured_history(
    groups: pd.DataFrame, end: dt.datetime, days: float
) -> tuple[pd.DataFrame, dict[int, dict[str, Any]]]:
    """Accounting's measured values for pools with usage history (as analyses use them).

    Returns the node groups with MFU filled from jobs that carry one, and per pool the
    measured utilization and job-log effective time with the window they cover.
    """
    frame = groups.rename(
        columns={"node_count": "nodes", "accelerator__name": "accelerator"}
    ).assign(mfu=groups["mfu"].astype(float))
    windows = _history_windows(frame["pool__cluster_id"].unique().tolist(), end, days)
    measured: dict[int, dict[str, Any]] = {}
    filled = []
    for cluster_id, part in frame.groupby("pool__cluster_id", sort=False):
        if cluster_id not in windows:
            filled.append(part)
            continue
        start, stop = windows[cluster_id]
        hours = (stop - start).total_seconds() / 3600.0
        pools = pd.DataFrame({"pool_id": part["pool_id"].unique(), "duration_h": hours})
        pools, part = apply_measured_usage(pools, part, int(cluster_id), start, stop)
        filled.append(part)
        for pool in pools.to_dict("records"):
            values: dict[str, Any] = {"measured_from": start, "measured_to": stop}
            utilization = pool.get("utilization_measured")
            if utilization is not None and utilization > 0:  # 0 is no history, not a factor
                values["utilization"] = min(float(utilization), 1.0)
            productive, wall = pool.get("productive_h"), pool.get("wall_h")
            if wall is not None and wall > 0 and productive is not None and productive > 0:
                values["effective_time"] = min(float(productive) / float(wall), 1.0)
            values.update(
                _measured_mtbf(pool.get("failure_count"), pool.get("failure_exposure_card_hours"))
            )
            measured[int(pool["pool_id"])] = values
    groups = pd.concat(filled).rename(
        columns={"nodes": "node_count", "accelerator": "accelerator__name"}
    )
    return groups, measured


def _pool_options(
    pool_ids: list[int],
    warnings: list[str],
    history: tuple[dt.datetime, float] | None = None,
) -> list[dict[str, Any]]:
    """Existing pools: one option per (pool, card model) at the pool's size, with the site's
    energy figures, the cluster's fabric and ownership terms and the pool's MFU and planned
    utilization; with `history` = (end, days), accounting's measured utilization, effective
    time and MFU replace the modeled ones for pools with usage records in that window."""
    if not pool_ids:
        return []
    pools = {
        row["id"]: row["name"] for row in Pool.objects.filter(pk__in=pool_ids).values("id", "name")
    }
    missing = sorted(set(pool_ids) - set(pools))
    if missing:
        raise PlanInputError(
            {"options_spec": {"pools": f"No pool with id {', '.join(map(str, missing))}."}}
        )
    prefix = {f"accelerator__{name}": name for name in _CATALOG_FIELDS}
    site = {f"pool__cluster__site__{name}": name for name in _SITE_FIELDS}
    groups = pd.DataFrame.from_records(
        list(
            NodeGroup.objects.filter(pool_id__in=pool_ids, node_count__gt=0).values(
                "pool_id",
                "node_count",
                "cards_per_node",
                "mfu",
                "pool__name",
                "pool__planned_utilization",
                "pool__assumptions",
                "pool__cluster_id",
                "pool__cluster__name",
                "pool__cluster__fabric",
                "pool__cluster__inter_node_bandwidth_gbps_per_card",
                "pool__cluster__capital_cost_per_card",
                "pool__cluster__amortization_years",
                "pool__cluster__yearly_opex",
                "pool__cluster__rental_price_per_card_hour",
                "pool__cluster__assumptions",
                *site,
                *prefix,
            )
        )
    )
    empty = [pools[i] for i in pool_ids if groups.empty or i not in set(groups["pool_id"])]
    if empty:
        raise PlanInputError(
            {"options_spec": {"pools": f"These pools have no cards: {', '.join(empty)}."}}
        )
    # Opex per card on the one money path: the cluster's opex spread over all its cards.
    first_of_cluster = groups.drop_duplicates("pool__cluster_id").set_index("pool__cluster_id")
    per_card_opex = opex_per_card(
        first_of_cluster["pool__cluster__yearly_opex"],
        cluster_cards(first_of_cluster.index.tolist()).reindex(first_of_cluster.index),
    ).fillna(0.0)
    measured: dict[int, dict[str, Any]] = {}
    if history is not None:
        groups, measured = _measured_history(groups, *history)
    groups["cards"] = groups["node_count"] * groups["cards_per_node"]
    groups["mfu_cards"] = groups["mfu"].astype(float) * groups["cards"]
    groups["cards_with_mfu"] = groups["cards"].where(groups["mfu"].notna(), 0)
    rows = []
    for (pool_id, _), part in groups.groupby(["pool_id", "accelerator__id"], sort=False):
        first = part.iloc[0].to_dict()
        cards = int(part["cards"].sum())
        with_mfu = float(part["cards_with_mfu"].sum())
        cluster = first["pool__cluster_id"]
        row = {
            "source": "pool",
            "pool_id": int(pool_id),
            "pool": first["pool__name"],
            "cluster_id": int(cluster),
            "cluster": first["pool__cluster__name"],
            **_catalog_columns({name: first[key] for key, name in prefix.items()}),
            **_site_columns({name: first[key] for key, name in site.items()}),
            "cards": cards,
            "cards_per_node": int(part["cards_per_node"].max()),
            "fabric": first["pool__cluster__fabric"],
            "inter_node_bandwidth_gbps_per_card": first[
                "pool__cluster__inter_node_bandwidth_gbps_per_card"
            ],
            "capital_cost_per_card": first["pool__cluster__capital_cost_per_card"],
            "amortization_years": first["pool__cluster__amortization_years"],
            "yearly_opex_per_card": float(per_card_opex[cluster]),
            "rental_price_per_card_hour": first["pool__cluster__rental_price_per_card_hour"],
            "price_currency": first["pool__cluster__site__currency"],
            **_mapped_assumptions(
                first["pool__cluster__site__assumptions"],
                first["pool__cluster__assumptions"],
                first["pool__assumptions"],
            ),
        }
        if with_mfu > 0:  # card-weighted mean of the entered (else job-measured) MFU
            row["mfu"] = float(part["mfu_cards"].sum()) / with_mfu
            row["mfu_provenance"] = "measured"
        # As in analyses: the pool's field beats its site's and cluster's assumptions, and
        # only the pool's own assumptions beat the field.
        pool_assumes = "utilization_planned" in (first["pool__assumptions"] or {})
        if first["pool__planned_utilization"] is not None and not pool_assumes:
            row["utilization"] = first["pool__planned_utilization"]
            row["utilization_provenance"] = "modeled"  # a planning assumption, as in analyses
        history_of_pool = measured.get(int(pool_id))
        if history_of_pool:
            # Measured usage beats planning assumptions, as in analyses; overrides still win.
            for factor in ("utilization", "effective_time"):
                if factor in history_of_pool:
                    row[factor] = history_of_pool[factor]
                    row[f"{factor}_provenance"] = "measured"
            for column in ("mtbf_card_hours", "mtbf_basis", "mtbf_note"):
                if column in history_of_pool:
                    row[column] = history_of_pool[column]
            if "mtbf_card_hours" in history_of_pool:
                row["mtbf_provenance"] = "measured"
            row["measured_from"] = history_of_pool["measured_from"].isoformat()
            row["measured_to"] = history_of_pool["measured_to"].isoformat()
        if row["capital_cost_per_card"] is None and row["rental_price_per_card_hour"] is None:
            warnings.append(
                f"Pool {row['pool']}: its cluster has no ownership or rental terms; "
                "its options are not priced."
            )
            row["unpriced_reason"] = (
                f"not priced: no price for {row['accelerator']} in pool {row['pool']} "
                "(its cluster has no capital cost or rental price)"
            )
        rows.append(row)
    return rows


def _apply_overrides(frame: pd.DataFrame, overrides: Mapping[str, Any]) -> pd.DataFrame:
    """Plan-wide overrides win over inventory and measured figures (provenance `override`)."""
    for column, value in overrides.items():
        if column == "max_cards" or value is None:
            continue
        frame[column] = value
        if column in FACTOR_OVERRIDES:
            frame[PROVENANCE_COLUMN.get(column, f"{column}_provenance")] = OVERRIDE
        if column == "mtbf_card_hours":  # beats a measured MTBF too, and says so
            frame["mtbf_provenance"], frame["mtbf_basis"] = OVERRIDE, "plan override"
            frame["mtbf_note"] = np.nan
    # MFU and achieved TFLOP/s are one factor: an override of either replaces both.
    if overrides.get("mfu") is not None and "achieved_tflops_per_card" in frame:
        frame["achieved_tflops_per_card"] = np.nan
    if overrides.get("achieved_tflops_per_card") is not None and "mfu" in frame:
        frame["mfu"] = np.nan
    return frame


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column as text with "" for missing (it may be all-NaN, hence float)."""
    values = frame[column].astype(object)
    return values.where(values.notna(), "").astype(str)


def _labels(frame: pd.DataFrame) -> pd.Series:
    """Human label per option, e.g. "H100 SXM5 80GB × 1,024 cards at Frankfurt DC1"."""
    size = np.where(
        frame["cards"].notna(),
        frame["cards"].map(lambda c: f"{c:,.0f} cards" if pd.notna(c) else ""),
        frame["deadline_days"].map(lambda d: f"≤ {d:g} days" if pd.notna(d) else ""),
    )
    site, pool = _text(frame, "site"), _text(frame, "pool")
    place = np.where(
        frame["source"] == "pool",
        " in pool " + pool,
        np.where(site != "", " at " + site, ""),
    )
    return _text(frame, "accelerator") + " × " + size + place


CARD_PRICE_COLUMNS = ("rental_price_per_card_hour", "capital_cost_per_card", "yearly_opex_per_card")


def _card_prices_in_site_currency(
    frame: pd.DataFrame, on: dt.date, warnings: list[str], rates_used: list[dict[str, Any]]
) -> pd.DataFrame:
    """A card price in another currency than the site's energy is converted with the dated
    exchange rate (an entered one, else the shipped ECB reference rate); without either the
    option stays unpriced (two currencies are never added). Each rate used goes to
    ``rates_used`` (what a later rate change checks to mark the plan stale)."""
    price_currency = frame["price_currency"].astype(object)
    foreign = price_currency.notna() & (price_currency != frame["currency"])
    pairs = frame[foreign].groupby(["price_currency", "currency"]).groups
    targets = {target for _, target in pairs}
    rates = {
        t: conversions({s for s, t2 in pairs if t2 == t}, t, on, reference=True) for t in targets
    }
    for (source, target), rows in pairs.items():
        conversion = rates[target][source]
        if conversion is None:
            frame.loc[rows, "unpriced_reason"] = (
                f"not priced: card price in {source}, site energy in {target} and no "
                f"{source}→{target} exchange rate, entered or in the shipped ECB reference "
                "rates (admin → exchange rates)"
            )
            continue
        for column in (c for c in CARD_PRICE_COLUMNS if c in frame):
            frame.loc[rows, column] = frame.loc[rows, column].astype(float) * conversion.rate
        frame.loc[rows, "price_currency"] = target
        rates_used.append(conversion.as_record())
        replace = (
            f" Enter a {source}→{target} rate (admin → exchange rates) to use your own."
            if conversion.provenance == REFERENCE
            else ""
        )
        warnings.append(f"Card prices in {source} at {target} sites: {conversion.note}.{replace}")
    return frame


def without_unpriced_money(evaluated: pd.DataFrame) -> pd.DataFrame:
    """Options without a price in one currency: infeasible with the reason, their money unknown."""
    rows = evaluated["unpriced_reason"].notna() if "unpriced_reason" in evaluated else None
    if rows is None or not rows.any():
        return evaluated
    evaluated.loc[rows, "feasible"] = False
    evaluated.loc[rows, "reason"] = evaluated.loc[rows, "unpriced_reason"]
    money = [
        c for c in evaluated.columns if c.endswith("_cost") or c.startswith(("cost_per", "cost_"))
    ]
    evaluated.loc[rows, money] = np.nan
    return evaluated


def build_options(
    spec: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    history_end: dt.datetime | None = None,
    rates_used: list[dict[str, Any]] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The engine's option frame (index = option id) and warnings about missing figures.

    With `history_end`, existing pools use accounting's measured values over the
    `history_days` (default 90) before it; validation skips that (no accounting queries).
    `rates_used` collects the exchange rates the card prices were converted with.
    """
    warnings: list[str] = []
    days = spec.get("history_days", DEFAULT_HISTORY_DAYS)
    history = (history_end, float(days)) if history_end is not None and days else None
    rows = _catalog_options(spec, warnings) + _pool_options(
        list(spec.get("pools") or []), warnings, history
    )
    if not rows:
        raise PlanInputError({"options_spec": {"accelerators": "Give card models or pools."}})
    frame = pd.DataFrame.from_records(rows)
    for column in (
        "cards",
        "deadline_days",
        "pool",
        "pool_id",
        "cluster_id",
        "measured_from",
        "measured_to",
        "site",
        "site_id",
        "accelerator_id",
        "currency",
        "price_currency",
        "unpriced_reason",
    ):
        if column not in frame:
            frame[column] = np.nan
    frame["unpriced_reason"] = frame["unpriced_reason"].astype(object)  # text, set per row
    frame["site_kind"] = spec.get("site_kind") or DEFAULT_PRESET  # the effective-time preset
    frame = _apply_overrides(frame, overrides or {})
    frame["label"] = _labels(frame)
    # Energy is priced in the site's currency; without a site, in the card price's.
    currency = frame["currency"].astype(object)
    frame["currency"] = currency.where(currency.notna(), frame["price_currency"].astype(object))
    frame["currency"] = frame["currency"].where(frame["currency"].notna(), "USD")
    on = (history_end or timezone.now()).date()
    frame = _card_prices_in_site_currency(
        frame, on, warnings, rates_used if rates_used is not None else []
    )
    currencies = set(frame["currency"])
    if len(currencies) > 1:
        warnings.append(
            f"Options are priced in {' and '.join(sorted(currencies))}: they are ranked, and "
            "the cheapest and fastest named, within each currency."
        )
    frame.index = pd.RangeIndex(len(frame), name="option_id")
    return frame, warnings
