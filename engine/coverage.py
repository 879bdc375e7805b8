"""Coverage of measured usage, and the one rule that picks measured or planned (pure).

Usage data covers a cluster over its *covered window*: from the UTC midnight at or before
its first usage record or sreport period to the as-of time of its latest export (the moment
the export saw the cluster), or, without one or past it, to the midnight at or after its last
record; clipped to the period and to the cards' time in service. Inside the window a day
without jobs is a measured idle day; outside it there is no data, never a zero.

The rule (docs/efficiency-model.md, "Coverage and provenance"): when the covered card-hours
are at least :data:`MIN_COVERED_SHARE` of the period's in-service card-hours, the measured
figures are used, computed over the covered card-hours only; otherwise the planned value is
used and the reason says how much was covered.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

# At least half of the period's card-days must be covered for measured figures to count.
MIN_COVERED_SHARE = 0.5
HOURS_PER_DAY = 24.0
WINDOW_COLUMNS = ("cluster", "covered_from", "covered_until")
SPAN_COLUMNS = ("cluster", "first", "last", "as_of")


def measured_applies(covered_card_hours: object, period_card_hours: object) -> np.ndarray:
    """The rule, element-wise: covered ÷ period card-hours >= MIN_COVERED_SHARE (0/0 → no)."""
    covered = np.asarray(covered_card_hours, dtype=float)
    period = np.asarray(period_card_hours, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(period > 0, covered / period, np.nan)
    return np.nan_to_num(share, nan=-1.0) >= MIN_COVERED_SHARE


@dataclass(frozen=True)
class Coverage:
    """How much of a scope's period the usage data covers (card-hours, days, clusters)."""

    covered_card_hours: float
    period_card_hours: float
    covered_days: float
    period_days: float
    clusters_covered: int
    clusters: int

    @property
    def share(self) -> float | None:
        """Covered ÷ period card-hours; None when the scope has no cards in the period."""
        return (
            self.covered_card_hours / self.period_card_hours if self.period_card_hours > 0 else None
        )

    @property
    def uses_measured(self) -> bool:
        return bool(measured_applies(self.covered_card_hours, self.period_card_hours))

    def text(self) -> str:
        """E.g. "usage covers 17 of 30 days, 4 of 5 clusters"."""
        days = f"{_days(self.covered_days)} of {_days(self.period_days)} days"
        if self.clusters <= 1:
            return f"usage covers {days}"
        return f"usage covers {days}, {self.clusters_covered} of {self.clusters} clusters"

    def reason(self, source: str = "") -> str:
        """Why the utilization is measured or planned, in one sentence; ``source`` names where
        the usage came from when not Slurm ("measured (Kubernetes)")."""
        if self.covered_card_hours <= 0:
            return "no usage records in the period: the planned value is used"
        share = self.share or 0.0
        if self.uses_measured:
            measured = f"measured ({source})" if source else "measured"
            return f"{measured} over the covered days: {self.text()} ({share:.0%} of card-days)"
        return (
            f"{self.text()} ({share:.0%} of card-days, below the "
            f"{MIN_COVERED_SHARE:.0%} rule): the planned value is used"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "covered_card_hours": self.covered_card_hours,
            "period_card_hours": self.period_card_hours,
            "share": self.share,
            "covered_days": self.covered_days,
            "period_days": self.period_days,
            "clusters_covered": self.clusters_covered,
            "clusters": self.clusters,
            "uses_measured": self.uses_measured,
            "text": self.text(),
            "reason": self.reason(),
        }


def _days(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _utc(values: object) -> pd.Series:
    return pd.Series(pd.to_datetime(pd.Series(values), utc=True)).astype("datetime64[us, UTC]")


def window_end(last: pd.Series, as_of: pd.Series) -> pd.Series:
    """Where each covered window ends: the as-of instant when it is at or after the last
    record (the export saw the cluster up to then, not to midnight), else the midnight at or
    after the last record (no as-of time, or records the latest export does not vouch for)."""
    last_utc = _utc(last)
    as_of_utc = _utc(as_of)
    as_of_utc.index = last_utc.index
    vouched = as_of_utc.notna() & (as_of_utc >= last_utc)
    return as_of_utc.where(vouched, last_utc.dt.ceil("D"))


def covered_windows(
    spans: pd.DataFrame, period_start: dt.datetime, period_end: dt.datetime
) -> pd.DataFrame:
    """Each cluster's covered window inside the period, from ``cluster, first, last[, as_of]``.

    ``first``/``last`` are the earliest start and the latest end (or start, while running)
    of the cluster's usage records and sreport periods; ``as_of`` the latest as-of time of
    its imports (NaT or absent: none). ``first`` snaps down to UTC midnight, the end is
    :func:`window_end`; both clip to the period; clusters whose window misses it are left out.
    """
    if spans.empty:
        return pd.DataFrame(columns=list(WINDOW_COLUMNS))
    start = pd.Timestamp(period_start).tz_convert("UTC")
    end = pd.Timestamp(period_end).tz_convert("UTC")
    as_of = spans["as_of"] if "as_of" in spans else pd.Series(pd.NaT, index=spans.index)
    first = _utc(spans["first"]).dt.floor("D").clip(lower=start)
    until = window_end(spans["last"], as_of)
    last = until.where(until <= end, end)
    windows = pd.DataFrame(
        {
            "cluster": spans["cluster"].to_numpy(),
            "covered_from": first.to_numpy(),
            "covered_until": last.to_numpy(),
        }
    )
    windows = windows[windows["covered_until"] > windows["covered_from"]]
    return windows.reset_index(drop=True)


def _service_bounds(
    inventory: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp
) -> tuple[pd.Series, pd.Series]:
    """Each inventory row's time in service inside [start, end) (open ends → the period)."""
    begin = (
        _utc(inventory["in_service_from"]).fillna(start)
        if "in_service_from" in inventory
        else pd.Series(start, index=inventory.index)
    )
    until = (
        _utc(inventory["in_service_until"]).fillna(end)
        if "in_service_until" in inventory
        else pd.Series(end, index=inventory.index)
    )
    begin.index = inventory.index
    until.index = inventory.index
    # pandas-stubs type clip's bounds as numbers or arrays; a Timestamp bounds a datetime Series.
    return begin.clip(lower=start), until.clip(upper=end)  # type: ignore[call-overload]


def clip_inventory(inventory: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Inventory rows whose time in service is cut to their cluster's covered window.

    Rows of clusters without a window keep their cards but get no hours in service, so the
    measured utilization of the uncovered time is "no data" (0 ÷ 0), never 0 %.
    """
    if inventory.empty:
        return inventory
    by_cluster = windows.set_index("cluster") if len(windows) else None
    frame = inventory.copy()
    never = pd.Timestamp("1970-01-01", tz="UTC")
    if by_cluster is None:
        window_from = pd.Series(never, index=frame.index)
        window_until = window_from
    else:
        window_from = _utc(frame["cluster"].map(by_cluster["covered_from"])).fillna(never)
        window_until = _utc(frame["cluster"].map(by_cluster["covered_until"])).fillna(never)
        window_from.index = frame.index
        window_until.index = frame.index
    begin, until = _service_bounds(frame, window_from.min(), window_until.max())
    start_at = np.maximum(begin, window_from)
    end_at = np.minimum(until, window_until)
    frame["in_service_from"] = start_at
    frame["in_service_until"] = np.maximum(end_at, start_at)
    return frame


def union_hours(begin: pd.Series, until: pd.Series) -> float:
    """Hours of the union of intervals [begin, until) (overlaps counted once)."""
    spans = sorted(zip(begin.tolist(), until.tolist(), strict=True))
    total = 0.0
    current_start, current_end = None, None
    for left, right in spans:
        if right <= left:
            continue
        if current_end is None or left > current_end:
            if current_end is not None:
                total += (current_end - current_start).total_seconds()
            current_start, current_end = left, right
        else:
            current_end = max(current_end, right)
    if current_end is not None:
        total += (current_end - current_start).total_seconds()
    return total / 3600.0


def coverage_of(
    inventory: pd.DataFrame,
    windows: pd.DataFrame,
    period_start: dt.datetime,
    period_end: dt.datetime,
) -> Coverage:
    """Coverage of ``inventory`` (``cluster``, ``cards``, in-service times) by ``windows``."""
    start = pd.Timestamp(period_start).tz_convert("UTC")
    end = pd.Timestamp(period_end).tz_convert("UTC")
    period_days = (end - start).total_seconds() / 3600.0 / HOURS_PER_DAY
    if inventory.empty:
        return Coverage(0.0, 0.0, 0.0, period_days, 0, 0)
    begin, until = _service_bounds(inventory, start, end)
    cards = inventory["cards"].astype("float64")
    period_h = ((until - begin).dt.total_seconds() / 3600.0).clip(lower=0.0)
    clipped = clip_inventory(inventory, windows)
    c_begin, c_until = _service_bounds(clipped, start, end)
    covered_h = ((c_until - c_begin).dt.total_seconds() / 3600.0).clip(lower=0.0)
    clusters = inventory["cluster"].nunique()
    covered_clusters = inventory.loc[covered_h > 0, "cluster"].nunique()
    # Days count from the cards' commissioning, as the card-hours do: not from the period's start.
    in_service_days = union_hours(begin[period_h > 0], until[period_h > 0]) / HOURS_PER_DAY
    return Coverage(
        covered_card_hours=float((cards * covered_h).sum()),
        period_card_hours=float((cards * period_h).sum()),
        covered_days=union_hours(c_begin[covered_h > 0], c_until[covered_h > 0]) / HOURS_PER_DAY,
        period_days=in_service_days if (period_h > 0).any() else period_days,
        clusters_covered=int(covered_clusters),
        clusters=int(clusters),
    )
