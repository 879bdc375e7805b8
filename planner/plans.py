"""Capacity plans (spec §6): stored inputs → option frame from the inventory → engine → results.

The lifecycle follows the analyses in `planner.services`: a plan is created and queued after
the transaction commits, every write of a run is guarded by its `run_id` (a superseded or
redelivered task cannot overwrite a newer result), and a failed run keeps the last result.

The option frame is built with one query per inventory table (catalog, sites, pools with their
node groups, clusters' card totals), never one query per option.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from django.db import transaction
from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone

from access.roles import ADMIN, has_role
from accounting.models import UsageRecord
from accounting.selectors import apply_measured_usage
from config.dispatch import send_or_defer
from config.frames import json_rows
from inventory.models import AcceleratorModel, NodeGroup, Pool, Site
from planner.engine.capacity import (
    DEFAULT_MAX_CARDS,
    PlannerInputError,
    TrainingWorkload,
    estimate_training,
    plan_capacity,
    prepare_options,
)
from planner.engine.defaults import default_value
from planner.engine.memory import ModelShape
from planner.engine.parallelism import FixedParallelism
from planner.engine.sensitivity import Lever, lever_roi, sensitivity
from planner.estimates import EstimateInputError
from planner.inputs import cluster_cards, opex_per_card
from planner.models import AnalysisStatus, Plan
from planner.ranking import first_by, rank_options, ranked

MAX_OPTIONS = 5_000  # a bigger grid is rarely a question anyone asks, and the JSON grows fast
MIN_OPTIONS_PER_CHUNK = 64  # below this, progress reporting costs more than it tells
MAX_CHUNKS = 10
SHORTLIST_PER_RANKING = 10  # sensitivity and levers cover the Pareto front plus the top few
DEFAULT_AMORTIZATION_YEARS = 5.0  # planning convention for purchased cards (as the demo fleet)
MAX_COMPARED_PLANS = 10
GB = 1e9
DEFAULT_HISTORY_DAYS = 90  # a quarter of accounting: recent enough, long enough to smooth weeks
MIN_HISTORY = dt.timedelta(days=1)  # less than a day of records says little about a pool

# Inventory assumptions keys (site → cluster → pool overrides) that are planner columns.
ASSUMPTION_COLUMNS = {
    "mtbf_card_h": "mtbf_card_hours",
    "checkpoint_save_h": "checkpoint_save_hours",
    "restart_h": "restart_hours",
    "checkpoint_interval_rule": "checkpoint_interval_rule",
    "dp_overlap_share": "comm_overlap_share",
    "utilization_planned": "utilization",
}
FACTOR_OVERRIDES = (
    "mfu",
    "achieved_tflops_per_card",
    "scaling",
    "effective_time",
    "utilization",
    "pue",
)
# Where a factor override's provenance lives (achieved TFLOP/s sets the MFU, PUE the energy).
PROVENANCE_COLUMN = {"achieved_tflops_per_card": "mfu_provenance", "pue": "energy_provenance"}
OVERRIDE = "override"  # provenance of a value entered for this plan: it beats measured ones

# Results and export: (column name with its unit, engine column, scale).
OPTION_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("option_id", "option_id", 1),
    ("label", "label", 1),
    ("source", "source", 1),
    ("accelerator", "accelerator", 1),
    ("accelerator_id", "accelerator_id", 1),
    ("site", "site", 1),
    ("site_id", "site_id", 1),
    ("pool", "pool", 1),
    ("pool_id", "pool_id", 1),
    ("cooling_type", "cooling_type", 1),
    ("precision", "precision", 1),
    ("feasible", "feasible", 1),
    ("reason", "reason", 1),
    ("deadline_days", "deadline_days", 1),
    ("cards", "cards", 1),
    ("tp", "tp", 1),
    ("pp", "pp", 1),
    ("dp", "dp", 1),
    ("micro_batches", "micro_batches", 1),
    ("days", "days", 1),
    ("running_days", "running_days", 1),
    ("card_hours", "card_hours", 1),
    ("allocated_card_hours", "allocated_card_hours", 1),
    ("peak_tflops_per_card", "peak_tflops", 1),
    ("effective_utilization", "effective_utilization", 1),
    ("energy", "energy", 1),
    ("mfu", "mfu", 1),
    ("scaling", "scaling", 1),
    ("effective_time", "effective_time", 1),
    ("utilization", "utilization", 1),
    ("pue", "pue", 1),
    ("energy_provenance", "energy_provenance", 1),
    ("mfu_provenance", "mfu_provenance", 1),
    ("scaling_provenance", "scaling_provenance", 1),
    ("effective_time_provenance", "effective_time_provenance", 1),
    ("utilization_provenance", "utilization_provenance", 1),
    ("state_gb", "state_bytes", 1 / GB),
    ("state_per_card_gb", "state_bytes_per_card", 1 / GB),
    ("activations_per_card_gb", "activation_bytes_per_card", 1 / GB),
    ("memory_per_card_gb", "memory_per_card_bytes", 1 / GB),
    ("usable_memory_per_card_gb", "usable_memory_per_card_bytes", 1 / GB),
    ("min_cards_memory", "min_cards_memory", 1),
    ("it_energy_mwh", "it_energy_mwh", 1),
    ("facility_energy_mwh", "facility_energy_mwh", 1),
    ("co2_tonnes", "co2_tonnes", 1),
    ("currency", "currency", 1),
    ("cost_basis", "cost_basis", 1),
    ("compute_cost", "compute_cost", 1),
    ("energy_cost", "energy_cost", 1),
    ("energy_overhead_cost", "energy_overhead_cost", 1),
    ("idle_cost", "idle_cost", 1),
    ("total_cost", "total_cost", 1),
    ("peak_pflop_days", "peak_pflop_days", 1),
    ("effective_pflop_days", "effective_pflop_days", 1),
    ("cost_per_effective_pflop_day", "cost_per_effective_pflop_day", 1),
    ("rank_by_cost", "rank_by_cost", 1),
    ("rank_by_days", "rank_by_days", 1),
    ("on_pareto_front", "on_pareto_front", 1),
)
OPTION_COLUMN_NAMES = tuple(name for name, _, _ in OPTION_COLUMNS)
WHOLE_NUMBER_COLUMNS = (
    "option_id",
    "accelerator_id",
    "site_id",
    "pool_id",
    "cards",
    "tp",
    "pp",
    "dp",
    "micro_batches",
    "min_cards_memory",
    "rank_by_cost",
    "rank_by_days",
)
# Headline figures of an option (plan summaries and the compare view).
HEADLINE_COLUMNS = (
    "option_id",
    "label",
    "accelerator",
    "site",
    "cards",
    "days",
    "card_hours",
    "total_cost",
    "currency",
    "facility_energy_mwh",
    "co2_tonnes",
    "effective_utilization",
)


class PlanInputError(ValueError):
    """Bad plan inputs; `errors` maps each field (nested per input section) to why."""

    def __init__(self, errors: Mapping[str, Any]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{key}: {value}" for key, value in self.errors.items()))


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

# API field → TrainingWorkload field, where they differ.
_WORKLOAD_API_NAMES = {"params": "model_params"}


def build_workload(spec: Mapping[str, Any]) -> TrainingWorkload:
    """The engine workload of a validated workload spec; errors name the spec's fields."""
    shape = None
    if spec.get("layers"):
        shape = ModelShape(
            layers=int(spec["layers"]),
            hidden=int(spec["hidden_size"]),
            heads=int(spec["attention_heads"]),
        )
    try:
        return TrainingWorkload(
            params=float(spec["model_params"]),
            tokens=spec.get("tokens"),
            total_flops=spec.get("total_flops"),
            flops_per_param_token=int(spec.get("flops_per_param_token", 6)),
            precision=spec.get("precision", "bf16"),
            seq_len=int(spec.get("seq_len", 2048)),
            global_batch_sequences=int(spec.get("global_batch_sequences", 1536)),
            micro_batch=int(spec.get("micro_batch", 1)),
            zero_stage=int(spec.get("zero_stage", 1)),
            recompute=spec.get("recompute"),
            sequence_parallel=bool(spec.get("sequence_parallel", True)),
            shape=shape,
            parallelism=FixedParallelism(
                tp=spec.get("tp_degree"), pp=spec.get("pp_degree"), dp=spec.get("dp_degree")
            ),
            usable_memory_share=float(spec.get("usable_memory_share", 0.9)),
        )
    except PlannerInputError as exc:
        raise PlanInputError(
            {"workload": {_WORKLOAD_API_NAMES.get(k, k): v for k, v in exc.errors.items()}}
        ) from exc
    except ValueError as exc:  # FixedParallelism's own checks
        raise PlanInputError({"workload": {"parallelism": str(exc)}}) from exc


# --------------------------------------------------------------------------------------------
# Options from the inventory (one query per table)
# --------------------------------------------------------------------------------------------

_CATALOG_FIELDS = (
    "id",
    "name",
    "vendor",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "memory_gb",
    "tdp_w",
    "intra_node_interconnect_gbs",
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
        "memory_gb": row["memory_gb"],
        "tdp_w": row["tdp_w"],
        "intra_node_interconnect_gbs": row["intra_node_interconnect_gbs"],
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
    """Cost basis of a new card: the catalog's rental price, or its purchase price."""
    if spec.get("cost_basis", "rental") == "purchase":
        capital = spec.get("capital_cost_per_card") or row["list_price"]
        if capital is None:
            warnings.append(f"{row['name']}: no list price in the catalog, compute cost left at 0.")
            return {}
        return {
            "capital_cost_per_card": capital,
            "amortization_years": spec.get("amortization_years") or DEFAULT_AMORTIZATION_YEARS,
            "yearly_opex_per_card": spec.get("yearly_opex_per_card") or 0.0,
            "price_currency": row["currency"],
        }
    if row["rental_price_per_card_hour"] is None:
        warnings.append(f"{row['name']}: no rental price in the catalog, compute cost left at 0.")
        return {}
    return {
        "rental_price_per_card_hour": row["rental_price_per_card_hour"],
        "price_currency": row["currency"],
    }


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
    start = end - dt.timedelta(days=days)
    spans = (
        UsageRecord.objects.filter(cluster_id__in=cluster_ids, start__lt=end)
        .filter(Q(end__gt=start) | Q(end__isnull=True))
        .values("cluster_id")
        .annotate(
            first=Min("start"),
            last_start=Max("start"),
            last_end=Max("end"),
            running=Count("pk", filter=Q(end__isnull=True)),
        )
        .order_by()
    )
    windows = {}
    for span in spans:
        ends = [t for t in (span["last_start"], span["last_end"]) if t is not None]
        last = end if span["running"] else max(ends)
        window = (max(start, span["first"]), min(end, last))
        if window[1] - window[0] >= MIN_HISTORY:
            windows[span["cluster_id"]] = window
    return windows


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
            row["measured_from"] = history_of_pool["measured_from"].isoformat()
            row["measured_to"] = history_of_pool["measured_to"].isoformat()
        if row["capital_cost_per_card"] is None and row["rental_price_per_card_hour"] is None:
            warnings.append(f"Pool {row['pool']}: its cluster has no ownership or rental terms.")
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


def build_options(
    spec: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    history_end: dt.datetime | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The engine's option frame (index = option id) and warnings about missing figures.

    With `history_end`, existing pools use accounting's measured values over the
    `history_days` (default 90) before it; validation skips that (no accounting queries).
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
    ):
        if column not in frame:
            frame[column] = np.nan
    frame = _apply_overrides(frame, overrides or {})
    frame["label"] = _labels(frame)
    currencies = set(frame["currency"].dropna()) | set(frame["price_currency"].dropna())
    if len(currencies) > 1:
        warnings.append(
            f"Prices are in several currencies ({', '.join(sorted(currencies))}) and are not "
            "converted: compare costs with care."
        )
    # Energy is priced in the site's currency; without a site, in the card price's.
    currency = frame["currency"].astype(object)
    frame["currency"] = currency.where(currency.notna(), frame["price_currency"].astype(object))
    frame["currency"] = frame["currency"].where(frame["currency"].notna(), "USD")
    frame.index = pd.RangeIndex(len(frame), name="option_id")
    return frame, warnings


def validate_inputs(
    workload: Mapping[str, Any], options_spec: Mapping[str, Any], overrides: Mapping[str, Any]
) -> tuple[TrainingWorkload, pd.DataFrame]:
    """Check the inputs against the inventory and the engine before queueing (400, not a
    failed run); raises PlanInputError naming the field."""
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
# Computation
# --------------------------------------------------------------------------------------------


def option_rows(plan: pd.DataFrame) -> list[dict[str, Any]]:
    """Flat, JSON-safe option rows with units in the column names."""
    table = pd.DataFrame(index=plan.index)
    for name, column, scale in OPTION_COLUMNS:
        values = plan[column] if column in plan else pd.Series(np.nan, index=plan.index)
        table[name] = values * scale if scale != 1 else values
    for name in WHOLE_NUMBER_COLUMNS:
        table[name] = table[name].astype("Int64")
    table["feasible"] = table["feasible"].astype(bool)
    table["on_pareto_front"] = table["on_pareto_front"].astype(bool)
    return json_rows(table)


def build_levers(specs: Iterable[Mapping[str, Any]]) -> list[Lever]:
    levers = []
    for spec in specs:
        name, cost = spec["name"], float(spec["one_off_cost"])
        if name == "liquid_cooling":
            levers.append(Lever.liquid_cooling(cost, pue=spec.get("pue")))
        elif name == "faster_checkpoints":
            levers.append(
                Lever.faster_checkpoints(
                    cost,
                    checkpoint_save_hours=spec["checkpoint_save_hours"],
                    restart_hours=spec["restart_hours"],
                )
            )
        elif name == "mfu_upgrade":
            levers.append(Lever.mfu_upgrade(cost, mfu=spec["mfu"]))
        elif name == "colocation":
            levers.append(Lever.colocation(cost, utilization=spec.get("utilization", 0.9)))
    return levers


def _shortlist(plan: pd.DataFrame) -> pd.Index:
    """Options worth a tornado chart: the Pareto front and the best few on each ranking."""
    keep = (
        plan["on_pareto_front"]
        | (plan["rank_by_cost"] <= SHORTLIST_PER_RANKING)
        | (plan["rank_by_days"] <= SHORTLIST_PER_RANKING)
    )
    return plan.index[keep.fillna(False).to_numpy(dtype=bool)]


def _headline(rows_by_id: Mapping[int, dict], option_id: Any) -> dict[str, Any] | None:
    if option_id is None:
        return None
    row = rows_by_id[int(option_id)]
    return {column: row[column] for column in HEADLINE_COLUMNS}


def _measured_history_rows(plan: pd.DataFrame) -> list[dict[str, Any]]:
    """Pool options with usage records in the window: the window and the factors (of those
    accounting measures) that are measured."""
    pools = plan[plan["measured_from"].notna()]
    factors = ("mfu", "effective_time", "utilization")
    return [
        {
            "option_id": int(option_id),
            "pool_id": int(row["pool_id"]),
            "pool": row["pool"],
            "measured_from": row["measured_from"],
            "measured_to": row["measured_to"],
            "measured_factors": [f for f in factors if row[f"{f}_provenance"] == "measured"],
        }
        for option_id, row in pools.iterrows()
    ]


def compute(
    plan: Plan, on_progress: Callable[[int], None] = lambda percent: None
) -> tuple[dict, dict, dict]:
    """Evaluate a plan: (results, summary, input snapshot). Progress 10 → 95 percent."""
    workload = build_workload(plan.workload)
    now = timezone.now()
    options, warnings = build_options(plan.options_spec, plan.overrides, history_end=now)
    on_progress(10)
    max_cards = int((plan.overrides or {}).get("max_cards") or DEFAULT_MAX_CARDS)
    chunks = max(1, min(MAX_CHUNKS, math.ceil(len(options) / MIN_OPTIONS_PER_CHUNK)))
    parts = []
    for done, positions in enumerate(np.array_split(np.arange(len(options)), chunks), 1):
        parts.append(plan_capacity(workload, options.iloc[positions], max_cards=max_cards))
        on_progress(10 + int(70 * done / chunks))
    evaluated = rank_options(pd.concat(parts))
    shortlist = evaluated.loc[_shortlist(evaluated)]
    tornado = sensitivity(shortlist, workload.flops)
    on_progress(88)
    levers = lever_roi(shortlist, build_levers(plan.levers or []), workload.flops)
    on_progress(95)

    rows = option_rows(evaluated)
    rows_by_id = {row["option_id"]: row for row in rows}
    cheapest, fastest = first_by(evaluated, "rank_by_cost"), first_by(evaluated, "rank_by_days")
    pareto_ids = (
        evaluated[evaluated["on_pareto_front"]].sort_values(["days", "total_cost"]).index.tolist()
    )
    shape = workload.model_shape
    summary = {
        "total_flops": workload.flops,
        "options": len(rows),
        "feasible": int(evaluated["feasible"].sum()),
        "pareto": len(pareto_ids),
        "cheapest": _headline(rows_by_id, cheapest),
        "fastest": _headline(rows_by_id, fastest),
    }
    results = {
        "computed_at": now.isoformat(),
        "history_days": (plan.options_spec or {}).get("history_days", DEFAULT_HISTORY_DAYS),
        "measured_history": _measured_history_rows(evaluated),
        "total_flops": workload.flops,
        "model_shape": {"layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads},
        "state_gb": float(evaluated["state_bytes"].iloc[0]) / GB,
        "summary": summary,
        "columns": list(OPTION_COLUMN_NAMES),
        "options": rows,
        # Per currency, then by rank within it (one list per ranking, currencies apart).
        "ranking": {
            "by_cost": ranked(evaluated, "rank_by_cost"),
            "by_days": ranked(evaluated, "rank_by_days"),
        },
        "pareto_front": pareto_ids,
        "sensitivity_option_ids": shortlist[shortlist["feasible"]].index.tolist(),
        "sensitivity": json_rows(tornado),
        "levers": json_rows(levers),
        "warnings": warnings,
    }
    snapshot = {"options": json_rows(options.drop(columns=["label"]).reset_index())}
    return results, summary, snapshot


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
    plan.run_id = uuid.uuid4()
    plan.status = AnalysisStatus.QUEUED
    plan.progress = 0
    plan.error = ""
    plan.queued_at = timezone.now()
    plan.started_at = plan.finished_at = None


def _queue(plan: Plan) -> None:
    # After commit; a broker outage leaves it queued and marked, sent when the broker is back.
    send_or_defer(plan)


def current_run(plan_id: int, run_id: str) -> QuerySet[Plan]:
    """The plan row of this run only: empty once a newer run superseded it."""
    return Plan.objects.filter(pk=plan_id, run_id=run_id)


def mark_running(plan_id: int, run_id: str) -> bool:
    return bool(
        current_run(plan_id, run_id)
        .filter(status__in=[AnalysisStatus.QUEUED, AnalysisStatus.RUNNING])
        .update(status=AnalysisStatus.RUNNING, started_at=timezone.now(), progress=5)
    )


def record_progress(plan_id: int, run_id: str, percent: int) -> None:
    current_run(plan_id, run_id).update(progress=max(0, min(99, int(percent))))


def finish(plan_id: int, run_id: str, *, results: dict, summary: dict, snapshot: dict) -> bool:
    now = timezone.now()
    with transaction.atomic():
        plan = current_run(plan_id, run_id).select_for_update().first()
        if plan is None:
            return False
        plan.results = results
        plan.summary = summary
        plan.input_snapshot = snapshot
        plan.inventory_refs = inventory_refs(snapshot.get("options") or [])
        # An edit after this run began may have been missed by it: the plan stays stale.
        changed, began = plan.inventory_changed_at, plan.started_at
        plan.stale = bool(changed and (began is None or changed >= began))
        plan.status = AnalysisStatus.SUCCEEDED
        plan.progress = 100
        plan.error = ""
        plan.finished_at = plan.succeeded_at = now
        plan.duration_s = (now - (plan.started_at or now)).total_seconds()
        plan.save()
    return True


def fail(plan_id: int, run_id: str, reason: str) -> None:
    """Record why a run failed; `results` keeps the last successful run's numbers."""
    current_run(plan_id, run_id).update(
        status=AnalysisStatus.FAILED, error=reason[:4000], finished_at=timezone.now()
    )


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


COMPARE_METRICS: tuple[tuple[str, str], ...] = (
    ("total_flops", "total_flops"),
    ("options", "options"),
    ("feasible", "feasible"),
    ("pareto", "pareto"),
    *((f"cheapest.{c}", c) for c in HEADLINE_COLUMNS if c != "option_id"),
    *((f"fastest.{c}", c) for c in HEADLINE_COLUMNS if c != "option_id"),
)


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
    metrics = []
    for metric, column in COMPARE_METRICS:
        values = []
        for plan in plans:
            summary = plan.summary or {}
            if "." in metric:
                headline = summary.get(metric.split(".")[0]) or {}
                values.append(headline.get(column))
            else:
                values.append(summary.get(column))
        metrics.append({"metric": metric, "values": values})
    return {"plans": entries, "metrics": metrics}


# --------------------------------------------------------------------------------------------
# Stateless training estimate (POST /api/v1/estimates/training/)
# --------------------------------------------------------------------------------------------

_ESTIMATE_PASSTHROUGH = (
    "model_params",
    "tokens",
    "total_flops",
    "flops_per_param_token",
    "precision",
    "cards",
    "deadline_days",
    "mfu",
    "achieved_tflops_per_card",
    "scaling",
    "effective_time",
    "utilization",
    "pue",
    "cooling_type",
    "tariff_per_kwh",
    "grid_carbon_g_per_kwh",
    "price_per_card_hour",
    "capital_cost_per_card",
    "amortization_years",
    "zero_stage",
    "dp_degree",
    "seq_len",
    "global_batch_sequences",
)


def estimate_training_for(data: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar estimate with the accelerator's catalog figures (a validated payload whose
    `accelerator` is an AcceleratorModel). Without a price, the catalog's rental price is used.
    """
    accelerator: AcceleratorModel = data["accelerator"]
    payload = {key: data[key] for key in _ESTIMATE_PASSTHROUGH if data.get(key) is not None}
    payload["accelerator"] = {
        "name": accelerator.name,
        "dense_bf16_tflops": accelerator.dense_bf16_tflops,
        "dense_fp8_tflops": accelerator.dense_fp8_tflops,
        "memory_gb": accelerator.memory_gb,
        "tdp_w": accelerator.tdp_w,
        "intra_node_interconnect_gbs": accelerator.intra_node_interconnect_gbs,
        "default_training_mfu": accelerator.default_training_mfu,
    }
    price_source = None
    if "price_per_card_hour" in payload or "capital_cost_per_card" in payload:
        price_source = "entered"
    elif accelerator.rental_price_per_card_hour is not None:
        payload["price_per_card_hour"] = accelerator.rental_price_per_card_hour
        price_source = "catalog"
    try:
        result = estimate_training(payload)
    except PlannerInputError as exc:
        raise EstimateInputError(exc.errors) from exc
    result["accelerator"] = {"id": accelerator.pk, "name": accelerator.name}
    result["cost"]["price_source"] = price_source
    result["cost"]["currency"] = accelerator.currency
    return result
