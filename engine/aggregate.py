"""Waste attribution and aggregation across scopes (pool → cluster → site → fleet).

Formulas: docs/efficiency-model.md, "Waste attribution" and "Aggregation".

Attribution: the lost share ``1 − Π f`` is split over the factors in proportion to
``−ln f`` (order-independent; the shares add up to the lost share exactly) and expressed
in card-hours, peak PFLOP-days and money.

Aggregation weights every pool by its **peak-FLOP card-hours** (peak PFLOP/s of all its
cards × hours in the period), never by a plain average. Two headline numbers are kept:

* ``aggregate_of_products``: weighted mean of each pool's product = effective PFLOP-days
  ÷ peak PFLOP-days of the scope. This is the exact share of peak compute delivered and
  the number to quote.
* ``product_of_aggregates``: product of the weighted-mean factors. Use it with the
  per-factor bars; it differs slightly from the exact number when factors vary together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from engine.defaults import PROVENANCES
from engine.factors import FACTOR_NAMES
from engine.segments import Segments


def attribute_waste_arrays(factors: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of factors (n, k) in (0, 1] → ``(product, lost_share, shares (n, k))``.

    ``shares[:, j] = lost_share · (−ln f_j) / Σ_i (−ln f_i)``; zero where nothing is lost.
    """
    matrix = np.asarray(factors, dtype=float)
    product = np.prod(matrix, axis=-1)
    lost = 1.0 - product
    logs = -np.log(matrix)
    total = logs.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(total > 0, lost[..., np.newaxis] * logs / total, 0.0)
    return product, lost, shares


@dataclass(frozen=True)
class FactorWaste:
    factor: str
    share: float  # of available peak compute
    card_hours: float
    pflop_days: float
    money: float | None


@dataclass(frozen=True)
class WasteAttribution:
    product: float
    lost_share: float
    factors: tuple[FactorWaste, ...]


def attribute_waste(
    factors: Mapping[str, float],
    *,
    card_hours: float,
    peak_pflop_days: float,
    cost_per_card_hours: float | None = None,
) -> WasteAttribution:
    """Attribute one scope's lost share to its factors (any names, values in (0, 1])."""
    values = np.array(list(factors.values()), dtype=float)
    if values.size == 0 or ((values <= 0) | (values > 1)).any():
        raise ValueError("factors must be a non-empty mapping of values in (0, 1]")
    product, lost, shares = attribute_waste_arrays(values)
    return WasteAttribution(
        product=float(product),
        lost_share=float(lost),
        factors=tuple(
            FactorWaste(
                factor=name,
                share=float(share),
                card_hours=float(share * card_hours),
                pflop_days=float(share * peak_pflop_days),
                money=None
                if cost_per_card_hours is None
                else float(share * card_hours * cost_per_card_hours),
            )
            for name, share in zip(factors, shares, strict=True)
        ),
    )


def _scope_codes(
    results: pd.DataFrame, by: str | Sequence[str] | None
) -> tuple[np.ndarray, pd.DataFrame]:
    if by is None or (not isinstance(by, str) and len(by) == 0):
        return np.zeros(len(results), dtype=np.int64), pd.DataFrame(index=pd.RangeIndex(1))
    columns = [by] if isinstance(by, str) else list(by)
    missing = [c for c in columns if c not in results.columns]
    if missing:
        raise KeyError(f"results have no scope column(s) {missing}")
    per_column = [pd.factorize(results[column], sort=True) for column in columns]
    if any((codes < 0).any() for codes, _ in per_column):
        raise ValueError(f"scope column(s) {columns} contain missing values")
    combined = np.zeros(len(results), dtype=np.int64)
    for codes, uniques in per_column:
        combined = combined * len(uniques) + codes
    scope_codes, scope_keys = pd.factorize(combined, sort=True)
    keys: dict[str, np.ndarray] = {}
    for column, (_, uniques) in zip(reversed(columns), reversed(per_column), strict=True):
        scope_keys, position = np.divmod(scope_keys, len(uniques))
        keys[column] = np.asarray(uniques)[position]
    keys_frame = pd.DataFrame({column: keys[column] for column in columns})
    return scope_codes.astype(np.int64), keys_frame


def _provenance_codes(column: pd.Series) -> np.ndarray:
    """Codes into ``PROVENANCES`` (fast path for the engine's categorical columns)."""
    if (
        isinstance(column.dtype, pd.CategoricalDtype)
        and tuple(column.cat.categories) == PROVENANCES
    ):
        return column.cat.codes.to_numpy()
    return pd.Index(PROVENANCES).get_indexer(pd.Index(column.astype(str)))


def aggregate_factors(results: pd.DataFrame, by: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Aggregate :func:`~engine.evaluate.evaluate_pools` output by scope column(s).

    ``by=None`` aggregates everything (the fleet). Output, one row per scope:

    * ``pools``, ``cards``, ``card_hours``, ``peak_pflop_days``, ``effective_pflop_days`` (sums);
    * ``<factor>``: peak-FLOP card-hour weighted mean; ``<factor>_share_<provenance>``:
      weight share of pools whose factor had that provenance; ``<factor>_provenance``:
      the provenance holding the largest weight;
    * ``product_of_aggregates`` and ``aggregate_of_products`` (see the module docstring);
    * ``lost_share``, ``lost_share_<factor>``, ``lost_<factor>_card_hours``,
      ``lost_<factor>_pflop_days``, ``lost_<factor>_money``: sums of the pools' attributions,
      so ``Σ lost_share_<factor> = lost_share = 1 − aggregate_of_products``.
    """
    codes, keys = _scope_codes(results, by)
    segments = Segments(codes, len(keys))
    weight = results["peak_pflop_days"].to_numpy(dtype=float)
    total_weight = segments.sum(weight)
    out: dict[str, np.ndarray | pd.Categorical[str]] = {
        "pools": segments.counts,
        "cards": segments.sum(results["cards"].to_numpy(dtype=float)),
        "card_hours": segments.sum(results["card_hours"].to_numpy(dtype=float)),
        "peak_pflop_days": total_weight,
        "effective_pflop_days": segments.sum(results["effective_pflop_days"].to_numpy(dtype=float)),
    }
    aggregated = []
    for name in FACTOR_NAMES:
        value = segments.sum(weight * results[name].to_numpy(dtype=float)) / total_weight
        aggregated.append(value)
        out[name] = value
        provenance = _provenance_codes(results[f"{name}_provenance"])
        shares = np.column_stack(
            [
                segments.sum(weight * (provenance == code)) / total_weight
                for code in range(len(PROVENANCES))
            ]
        )
        for position, kind in enumerate(PROVENANCES):
            out[f"{name}_share_{kind}"] = shares[:, position]
        out[f"{name}_provenance"] = pd.Categorical.from_codes(
            np.argmax(shares, axis=1), categories=pd.Index(list(PROVENANCES))
        )
    out["product_of_aggregates"] = np.prod(np.column_stack(aggregated), axis=1)
    aggregate_of_products = (
        segments.sum(weight * results["product"].to_numpy(dtype=float)) / total_weight
    )
    out["aggregate_of_products"] = aggregate_of_products
    out["lost_share"] = 1.0 - aggregate_of_products
    for name in FACTOR_NAMES:
        lost_pflop_days = segments.sum(results[f"lost_{name}_pflop_days"].to_numpy(dtype=float))
        out[f"lost_share_{name}"] = lost_pflop_days / total_weight
        out[f"lost_{name}_card_hours"] = segments.sum(
            results[f"lost_{name}_card_hours"].to_numpy(dtype=float)
        )
        out[f"lost_{name}_pflop_days"] = lost_pflop_days
        money = results[f"lost_{name}_money"].to_numpy(dtype=float)
        priced = segments.any(~np.isnan(money))
        out[f"lost_{name}_money"] = np.where(priced, segments.sum(np.nan_to_num(money)), np.nan)
    frame = pd.DataFrame(out)
    return pd.concat([keys.reset_index(drop=True), frame], axis=1)


DEFAULT_LEVELS: Mapping[str, Sequence[str]] = {
    "cluster": ("site_id", "cluster_id"),
    "site": ("site_id",),
    "fleet": (),
}


def aggregate_scopes(
    results: pd.DataFrame, levels: Mapping[str, Sequence[str]] = DEFAULT_LEVELS
) -> dict[str, pd.DataFrame]:
    """Aggregate pools to every level at once; each level is computed from the pools directly."""
    return {level: aggregate_factors(results, list(columns)) for level, columns in levels.items()}
