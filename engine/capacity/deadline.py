"""Deadline mode: the fewest cards (in steps of the granularity) that meet each deadline."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from engine.capacity.split_bound import ShapeTerms, reaches, shape_terms
from engine.capacity.splits import (
    best_split_per_option,
    card_rates,
    effective_time_at_cards,
    step_workload,
)
from engine.capacity.workload import DEFAULT_MAX_CARDS, SECONDS_PER_DAY, TrainingWorkload
from engine.memory import (
    min_cards_for_state,
)
from engine.steptime import mfu_ceiling, traffic_defaults


def _feasible(best: pd.DataFrame, deadline_days: NDArray[np.float64]) -> NDArray[np.bool_]:
    days = best["days"].to_numpy(np.float64)
    return best["fits_memory"].to_numpy(bool) & (days <= deadline_days)


def _granularity(frame: pd.DataFrame, workload: TrainingWorkload) -> NDArray[np.int64]:
    fixed = workload.parallelism
    step = frame["card_granularity"].to_numpy(np.int64)
    granularity: NDArray[np.int64] = np.lcm(step, fixed.product)
    return granularity


# The deadline search checks every count from its lower bound up to the bisection's answer
# when that range is at most this many steps, in windows of DEADLINE_SCAN_WINDOW counts.
DEADLINE_EXACT_SCAN_LIMIT = 32_768
DEADLINE_SCAN_WINDOW = 2_048
# Fewer counts than this go straight to the split search: the split bound's fixed cost
# (one join per tp·pp·cp product) is more than a few counts' search.
SPLIT_BOUND_MIN_COUNTS = 8
# The scan searches the counts the cheap tests let through in rounds per option, this many
# first, four times more each next round: the split test's survivors are mostly feasible.
SCAN_FIRST_ROUND = 2


def _throughput_ceiling(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: ArrayLike
) -> NDArray[np.float64]:
    """The most MFU × scaling any split of `cards` cards reaches: the per-card ceiling (or the
    entered MFU) times the given scaling, else 1 (no bubble, no exposed communication), see
    engine.steptime.mfu_ceiling."""
    mfu = mfu_ceiling(
        step_workload(workload),
        card_rates(frame),
        traffic_defaults(workload.software_stack),
        cards,
    )
    ceiling: NDArray[np.float64] = mfu * frame["scaling"].fillna(1.0).to_numpy(np.float64)
    return ceiling


def _best_days(
    workload: TrainingWorkload,
    part: pd.DataFrame,
    cards: NDArray[np.float64],
    efficiency: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Days at `efficiency` (MFU × scaling) and the exact effective time of `cards` cards."""
    rate = (
        cards
        * part["peak_tflops"].to_numpy(np.float64)
        * 1e12
        * part["utilization"].to_numpy(np.float64)
        * efficiency
        * effective_time_at_cards(part, cards)
    )
    days: NDArray[np.float64] = workload.flops / rate / SECONDS_PER_DAY
    return days


def _may_meet(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    cards: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """Cheap necessary condition: the deadline is met at the scaling ceiling and the (exact)
    effective time of that many cards; counts failing it need no split search."""
    part = frame.iloc[idx]
    cards = np.asarray(cards, dtype=np.float64)
    best_days = _best_days(workload, part, cards, _throughput_ceiling(workload, part, cards))
    deadline_days = part["deadline_days"].to_numpy(np.float64) * (1 + 1e-9)
    may_meet: NDArray[np.bool_] = best_days <= deadline_days
    return may_meet


def _may_meet_splits(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    terms: ShapeTerms,
    idx: NDArray[np.int64],
    cards: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """Tighter necessary condition: some fitting split's bound (engine.capacity.split_bound)
    reaches the MFU × scaling the deadline needs, where the option's scaling is modeled; an
    entered scaling, and counts below 2 cards (a card alone runs faster), are not bounded."""
    part = frame.iloc[idx]
    cards = np.asarray(cards, dtype=np.float64)
    may: NDArray[np.bool_] = np.ones(idx.size, dtype=bool)
    rows = np.flatnonzero(part["scaling"].isna().to_numpy() & (cards >= 2))
    if rows.size:
        days_at_one = _best_days(workload, part.iloc[rows], cards[rows], np.ones(rows.size))
        deadline_days = part["deadline_days"].to_numpy(np.float64)[rows] * (1 + 1e-9)
        needed = days_at_one / deadline_days
        may[rows] = reaches(workload, frame, terms, idx[rows], cards[rows].astype(np.int64), needed)
    return may


def _may_feasible(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    cards: NDArray[np.float64],
    terms: ShapeTerms | None,
) -> NDArray[np.bool_]:
    """The cheap necessary conditions: the ceiling, then (given `terms`, for enough counts
    to pay for it) the split bound. False proves the count misses the deadline."""
    ok = _may_meet(workload, frame, idx, cards)
    if terms is not None and ok.sum() >= SPLIT_BOUND_MIN_COUNTS:
        search = np.flatnonzero(ok)
        ok[search] = _may_meet_splits(
            workload, frame, terms, idx[search], np.asarray(cards, dtype=np.float64)[search]
        )
    return ok


def _searched(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    cards: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """Whether each (option idx, count) meets the deadline with its best split (full search)."""
    best = best_split_per_option(workload, frame.iloc[idx], np.asarray(cards).astype(np.int64))
    feasible: NDArray[np.bool_] = _feasible(best, frame["deadline_days"].to_numpy(np.float64)[idx])
    return feasible


def _feasible_at(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    cards: NDArray[np.float64],
    terms: ShapeTerms | None = None,
) -> NDArray[np.bool_]:
    """Whether each (option idx, count) meets the deadline: the cheap tests, then the full
    split search for the counts they let through."""
    ok = _may_feasible(workload, frame, idx, cards, terms)
    if ok.any():
        search = np.flatnonzero(ok)
        ok[search] = _searched(workload, frame, idx[search], np.asarray(cards)[search])
    return ok


def _ideal_cards(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: float
) -> NDArray[np.float64]:
    """Cards the deadline needs at the throughput ceiling of `cards` cards (a lower bound)."""
    rate = (
        frame["peak_tflops"].to_numpy(np.float64)
        * 1e12
        * _throughput_ceiling(workload, frame, cards)
        * frame["effective_time"].fillna(1.0).to_numpy(np.float64)
        * frame["utilization"].to_numpy(np.float64)
    )
    deadline_s = frame["deadline_days"].to_numpy(np.float64) * SECONDS_PER_DAY
    ideal: NDArray[np.float64] = workload.flops / (deadline_s * rate)
    return ideal


def cards_for_deadline(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    *,
    max_cards: int = DEFAULT_MAX_CARDS,
    exhaustive: bool = False,
) -> NDArray[np.float64]:
    """Smallest card count (in steps of the granularity g) meeting each option's deadline.

    Feasible(n): the best split of n cards fits in memory and days(n) <= deadline. Since
    scaling and effective time depend on n (and whole splits exist only for some n),
    feasibility is not monotone in n, so the search
    1. starts from a lower bound lo that cannot make it (scaling = effective time = 1),
    2. doubles hi until feasible, then bisects, keeping lo infeasible and hi feasible,
    3. scans the counts from the lower bound upwards (when at most DEADLINE_EXACT_SCAN_LIMIT
       steps below hi) and keeps the first feasible one: the true smallest count.
    So days(n) <= deadline and n - g misses the deadline (or does not fit), always; n is the
    smallest such count unless the exact scan was skipped for a very wide range.
    Counts that cannot meet the deadline even at their split bound
    (engine.capacity.split_bound) skip the split search; `exhaustive` searches every count
    the ceiling lets through instead (the same answers, slower: for tests).
    Returns NaN where no count <= max_cards meets the deadline.
    """
    terms = None if exhaustive else shape_terms(workload, frame)
    g = _granularity(frame, workload)
    # In units of g; infeasible by the bound above (the margin absorbs float rounding). A card
    # alone runs faster than one of many (multi_card_compute_share): one card may still do.
    alone = _ideal_cards(workload, frame, 1.0) * (1 - 1e-9) <= 1.0
    lo = np.where(alone, 0.0, np.ceil(_ideal_cards(workload, frame, 2.0) * (1 - 1e-9) / g) - 1)
    known_infeasible = lo.copy()
    memory_floor = min_cards_for_state(
        workload.params,
        frame["memory_gb"].to_numpy(np.float64),
        workload.usable_memory_share,
        **workload.state_bytes,
    )
    hi = np.maximum(lo + 1, np.ceil(memory_floor / g))
    max_units = np.floor(max_cards / g)
    found = np.zeros(len(frame), dtype=bool)
    active = np.isfinite(hi) & (hi <= max_units)
    while active.any():  # doubling: each infeasible probe becomes the new lo
        idx = np.flatnonzero(active)
        ok = _feasible_at(workload, frame, idx, hi[idx] * g[idx], terms)
        found[idx[ok]] = True
        failed = idx[~ok]
        lo[failed] = hi[failed]
        hi[failed] = np.minimum(hi[failed] * 2, np.maximum(max_units[failed], hi[failed] + 1))
        active[:] = False
        active[failed] = lo[failed] < max_units[failed]
    active = found & (hi - lo > 1)
    while active.any():  # bisection between infeasible lo and feasible hi
        idx = np.flatnonzero(active)
        mid = np.floor((lo[idx] + hi[idx]) / 2)
        ok = _feasible_at(workload, frame, idx, mid * g[idx], terms)
        hi[idx[ok]] = mid[ok]
        lo[idx[~ok]] = mid[~ok]
        active = found & (hi - lo > 1)
    _scan_up(workload, frame, np.flatnonzero(found), (known_infeasible, hi, g), terms)
    return np.where(found, hi * g, np.nan)


def _scan_up(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    bounds: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]],
    terms: ShapeTerms | None,
) -> None:
    """Lower hi (in place) to the first feasible count above the known-infeasible bound lo.

    Windows of candidates are evaluated for all options at once; an option stops at its
    first feasible count (its predecessor failed: lo or an earlier candidate).
    """
    lo, hi, g = bounds
    idx = idx[(hi[idx] - lo[idx] - 1 > 0) & (hi[idx] - lo[idx] - 1 <= DEADLINE_EXACT_SCAN_LIMIT)]
    start = lo[idx] + 1
    while idx.size:
        counts = np.minimum(hi[idx] - start, DEADLINE_SCAN_WINDOW).astype(np.int64)
        owner = np.repeat(np.arange(idx.size), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        units = start[owner] + offsets
        first = _first_feasible(workload, frame, (idx, owner, units, g), terms)
        done = np.isfinite(first)
        hi[idx[done]] = first[done]
        start = start + counts
        keep = ~done & (start < hi[idx])
        idx, start = idx[keep], start[keep]


def _first_feasible(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    window: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]],
    terms: ShapeTerms | None,
) -> NDArray[np.float64]:
    """The first feasible count (in units) of each option's window (inf: none).

    `window` is (options, owner, units, g): candidate k is units[k] of option
    options[owner[k]], ascending per option. The cheap tests run on the whole window, the
    split search in growing rounds (SCAN_FIRST_ROUND candidates per option first), so that the
    counts above an option's first feasible one are not searched.
    """
    idx, owner, units, g = window
    option = idx[owner]
    may = np.flatnonzero(_may_feasible(workload, frame, option, units * g[option], terms))
    first = np.full(idx.size, np.inf)
    if not may.size:
        return first
    starts = np.r_[True, owner[may][1:] != owner[may][:-1]]
    rank = np.arange(may.size) - np.maximum.accumulate(np.where(starts, np.arange(may.size), 0))
    start, size = 0, SCAN_FIRST_ROUND if terms is not None else DEADLINE_SCAN_WINDOW
    while start <= rank.max():
        pick = may[(rank >= start) & (rank < start + size)]
        pick = pick[~np.isfinite(first[owner[pick]])]
        if not pick.size:
            break
        ok = _searched(workload, frame, option[pick], units[pick] * g[option[pick]])
        np.minimum.at(first, owner[pick], np.where(ok, units[pick], np.inf))
        start, size = start + size, size * 4
    return first
