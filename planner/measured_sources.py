"""Measured pool factors from apps above the planner: a provider hook the analyses read.

The layers forbid the planner importing telemetry (telemetry sits above it), so telemetry
registers ``telemetry.selectors.measured_factors`` here in ``TelemetryConfig.ready``, the way
apps register their job kinds with ``core.jobs.registry``. A provider answers
``(pool_ids, first_day, last_day)`` (local days, inclusive) with, per pool, at least
``mfu_allocated`` (MFU proxy over allocated time or None), ``mfu_reason`` and
``covered_gpu_hours``, and for measured energy ``it_energy_kwh`` with
``energy_covered_gpu_hours``; pools it has no data for are absent.

The coverage rule is the one of usage records (:func:`engine.coverage.measured_applies`):
telemetry covering less than half of a pool's card-hours in the period is not used, and
``mfu_telemetry_reason`` / ``it_energy_reason`` say so (docs/telemetry.md, "Telemetry in analyses").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
from django.conf import settings

from engine.coverage import MIN_COVERED_SHARE, measured_applies

Provider = Callable[[Iterable[int], dt.date, dt.date], dict[int, dict[str, Any]]]
TELEMETRY = "telemetry"
# What `apply_telemetry` adds to each pool row of an analysis.
TELEMETRY_COLUMNS = ("mfu_telemetry_reason", "telemetry_coverage_share", "it_energy_reason")

_PROVIDERS: dict[str, Provider] = {}


def register_provider(name: str, provider: Provider) -> None:
    """Add (or replace: ``ready`` may run twice in tests) the provider called ``name``."""
    _PROVIDERS[name] = provider


def local_days(period_start: dt.datetime, period_end: dt.datetime) -> tuple[dt.date, dt.date]:
    """First and last local day (DJANGO_TIME_ZONE, the telemetry rollups' days) of a period."""
    zone = ZoneInfo(settings.TIME_ZONE)
    last = period_end - dt.timedelta(microseconds=1)
    return period_start.astimezone(zone).date(), last.astimezone(zone).date()


def _reason(factor: dict[str, Any] | None, share: float, applies: bool) -> str | None:
    """Why the pool's MFU does or does not use its telemetry proxy, in one sentence."""
    if factor is None:
        return None  # no telemetry for this pool: nothing to say, nothing changes
    covered = f"DCGM telemetry covers {min(share, 1.0):.0%} of the pool's card-hours"
    if not applies:
        return f"{covered}, below the {MIN_COVERED_SHARE:.0%} rule: the MFU proxy is not used"
    proxy = factor.get("mfu_allocated")
    if proxy is None or not 0 < proxy <= 1:
        return f"{covered}; {factor.get('mfu_reason') or 'the MFU proxy is not in (0, 1]'}"
    return (
        f"{covered}: MFU proxy {proxy:.3f} (tensor activity × SM clock ÷ max clock over "
        "allocated time), used unless a card-model or job MFU is given"
    )


def _figure(pools: pd.DataFrame, factors: dict[int, dict[str, Any]], key: str) -> pd.Series:
    """One provider figure per pool row, as floats (NaN: no telemetry or not measured)."""
    values = pools["pool_id"].map(lambda pk: (factors.get(pk) or {}).get(key))
    return pd.to_numeric(values, errors="coerce").astype("float64")


def _measured_energy(
    pools: pd.DataFrame, factors: dict[int, dict[str, Any]], period_card_hours: pd.Series
) -> tuple[np.ndarray, list[str | None]]:
    """IT energy of the period from the GPUs' energy counters, when the GPUs with a counter
    cover enough of it (their kWh scaled from their hours to the pool's card-hours)."""
    hours = _figure(pools, factors, "energy_covered_gpu_hours").fillna(0.0)
    it_kwh = _figure(pools, factors, "it_energy_kwh")
    applies = measured_applies(hours.to_numpy(), period_card_hours.to_numpy()) & it_kwh.notna()
    measured = np.where(applies, it_kwh * period_card_hours / hours.where(hours > 0), np.nan)
    share = (hours / period_card_hours.where(period_card_hours > 0)).fillna(0.0)
    counters = "DCGM energy counters × (1 + the source's node overhead)"
    reasons = [
        None
        if pk not in factors
        else f"measured: {counters} over {min(s, 1.0):.0%} of the card-hours, scaled to the period"
        if a
        else f"{counters} cover {min(s, 1.0):.0%} of the pool's card-hours, below the "
        f"{MIN_COVERED_SHARE:.0%} rule: nameplate power is used"
        for pk, s, a in zip(pools["pool_id"], share, applies, strict=True)
    ]
    return measured, reasons


def apply_telemetry(
    pools: pd.DataFrame, groups: pd.DataFrame, period_start: dt.datetime, period_end: dt.datetime
) -> pd.DataFrame:
    """The pool frame with ``mfu_telemetry`` (engine input) and ``measured_it_kwh`` (money
    path input) where telemetry covers enough of the period, and ``TELEMETRY_COLUMNS``."""
    provider = _PROVIDERS.get(TELEMETRY)
    if provider is None or pools.empty:
        return pools
    factors = provider(pools["pool_id"].tolist(), *local_days(period_start, period_end))
    cards = (groups["nodes"] * groups["cards_per_node"]).groupby(groups["pool_id"]).sum()
    period_card_hours = pools["pool_id"].map(cards).fillna(0.0) * pools["duration_h"].astype(float)
    covered = _figure(pools, factors, "covered_gpu_hours").fillna(0.0)
    applies = measured_applies(covered.to_numpy(), period_card_hours.to_numpy())
    share = (covered / period_card_hours.where(period_card_hours > 0)).fillna(0.0)
    proxy = _figure(pools, factors, "mfu_allocated")
    usable = applies & (proxy > 0).to_numpy() & (proxy <= 1).to_numpy()
    reasons = [
        _reason(factors.get(pk), s, bool(a))
        for pk, s, a in zip(pools["pool_id"], share, applies, strict=True)
    ]
    it_kwh, it_reasons = _measured_energy(pools, factors, period_card_hours)
    return pools.assign(
        mfu_telemetry=np.where(usable, proxy, np.nan),
        mfu_telemetry_reason=reasons,
        telemetry_coverage_share=np.where([r is None for r in reasons], np.nan, share),
        measured_it_kwh=it_kwh,
        it_energy_reason=it_reasons,
    )
