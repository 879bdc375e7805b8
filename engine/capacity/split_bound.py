"""Deadline search's split bound: the most MFU × scaling any split of a card count can reach.

A split is (tp, pp, vp, cp, dp, micro-batch, ep) with n = tp·pp·cp·dp. Its step time
(engine.steptime.step_time_arrays) is

    compute + bubble + tp + cp + pp + dp + ep,   compute = m·μ + optimizer,

every term >= 0, where μ (one micro-batch's compute), the bubble μ·(pp − 1)/vp and the
pipeline transfers do not depend on dp or on m (micro-batches per replica), and the
tensor-parallel collectives grow as m (m × their per-micro-batch seconds). Dropping the
optimizer, context, data and expert parallel terms leaves a lower bound on the step:

    step >= m·(μ + tp₁) + bubble + pp,   so   mfu × scaling <= m·useful₁ / that,

with useful₁ the useful seconds of one micro-batch. These terms are computed once per option
and model-parallel shape (tp, pp, vp, cp, micro-batch, ep); for a card count only the
shapes whose tp·pp·cp divides it are joined, with the exact dp and m of each. Splits whose
bound misses what the deadline needs are dropped; the memory wall and the full step time
(the split search's own functions) decide the few left. The deadline search then runs the
split search only on counts where some fitting split may make it
(tests/engine/capacity/test_deadline_pruning.py checks the bound against every split and
the search against the exhaustive one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from engine.capacity.splits import (
    _memory,
    _seam_step_time,
    card_rates,
    nvlink_reach,
    step_workload,
)
from engine.capacity.workload import TrainingWorkload
from engine.defaults import FACTOR_FLOOR
from engine.parallelism import (
    CONTEXT_PARALLEL_CANDIDATES,
    MICRO_BATCH_CANDIDATES,
    MIN_TOKENS_PER_CONTEXT_RANK,
    VIRTUAL_STAGE_CANDIDATES,
    expert_parallel_candidates,
)
from engine.steptime import Split, card_compute, traffic_defaults

# Beyond this many (option, shape) rows the bound costs more than it saves: no bound.
MAX_SHAPE_ROWS = 400_000
# Relative slack on the bound: it and the exact search round differently.
BOUND_SLACK = 1e-6

SHAPE_COLUMNS = ("tp", "pp", "vp", "cp", "micro_batch", "ep")


@dataclass(frozen=True)
class ShapeTerms:
    """Per (option, model-parallel shape) step terms that dp and m leave unchanged, sorted by
    (tp·pp·cp group, option); `group_start[g]:group_start[g + 1]` are group g's rows."""

    option: NDArray[np.int64]
    shape: dict[str, NDArray[np.int64]]
    useful_s: NDArray[np.float64]  # useful seconds of one micro-batch
    per_micro_s: NDArray[np.float64]  # μ + tensor-parallel seconds of one micro-batch
    fixed_s: NDArray[np.float64]  # bubble + pipeline transfers of one step
    group_product: NDArray[np.int64]  # tp·pp·cp of each group
    group_start: NDArray[np.int64]


def _candidates(workload: TrainingWorkload) -> dict[str, list[int]]:
    """The degrees enumerate_splits tries (engine.parallelism), fixed ones alone."""
    fixed, shape, seq = workload.parallelism, workload.model_shape, workload.seq_len
    cps = [
        c for c in CONTEXT_PARALLEL_CANDIDATES if c == 1 or seq // c >= MIN_TOKENS_PER_CONTEXT_RANK
    ]
    return {
        "pp": [fixed.pp] if fixed.pp is not None else list(range(1, shape.layers + 1)),
        "vp": [fixed.vp] if fixed.vp else list(VIRTUAL_STAGE_CANDIDATES),
        "cp": [fixed.cp] if fixed.cp is not None else cps,
        "micro_batch": list(MICRO_BATCH_CANDIDATES)
        if workload.micro_batch is None
        else [workload.micro_batch],
        "ep": expert_parallel_candidates(workload.experts, fixed.ep),
    }


def _shape_grid(workload: TrainingWorkload, frame: pd.DataFrame) -> pd.DataFrame | None:
    """Every (option, tp, pp, vp, cp, micro-batch, ep) that enumerate_splits' rules not
    involving the card count allow (None: more than MAX_SHAPE_ROWS)."""
    reach = nvlink_reach(frame)
    fixed, shape = workload.parallelism, workload.model_shape
    degrees = _candidates(workload)
    tps = [fixed.tp] if fixed.tp is not None else list(range(1, int(reach.max(initial=1)) + 1))
    domains = np.unique(reach)
    degrees["tp"] = [
        t for t in tps if shape.heads % t == 0 and ((t <= domains) & (domains % t == 0)).any()
    ]
    degrees["pp"] = [p for p in degrees["pp"] if p <= shape.layers]
    degrees["cp"] = [c for c in degrees["cp"] if workload.seq_len % c == 0]
    degrees["ep"] = [e for e in degrees["ep"] if workload.experts % e == 0]
    if np.prod([len(degrees[name]) for name in SHAPE_COLUMNS]) * len(frame) > 4 * MAX_SHAPE_ROWS:
        return None
    mesh = np.meshgrid(*(np.asarray(degrees[name], np.int64) for name in SHAPE_COLUMNS))
    base = {name: m.ravel() for name, m in zip(SHAPE_COLUMNS, mesh, strict=True)}
    p, v = base["pp"], base["vp"]
    keep = (v == 1) | ((p > 1) & (p * v <= shape.layers))
    base = {name: values[keep] for name, values in base.items()}
    row = np.repeat(np.arange(len(frame)), keep.sum())
    t, node = np.tile(base["tp"], len(frame)), reach[row]
    valid = (t <= node) & (node % t == 0)
    if valid.sum() > MAX_SHAPE_ROWS:
        return None
    columns = {"row": row, **{name: np.tile(base[name], len(frame)) for name in SHAPE_COLUMNS}}
    return pd.DataFrame({name: values[valid] for name, values in columns.items()})


def shape_terms(workload: TrainingWorkload, frame: pd.DataFrame) -> ShapeTerms | None:
    """The bound's per-shape terms for every prepared option of `frame` (None: too many)."""
    grid = _shape_grid(workload, frame)
    if grid is None or grid.empty:
        return None
    grid["dp"] = 2  # any dp > 1: every card of a multi-card job runs at the shared speed
    grid["micro_batches"] = 1
    step = _seam_step_time(workload, frame, grid)
    row = grid["row"].to_numpy()
    tp, pp, vp, cp, dp, mb, m = (
        grid[name].to_numpy(np.float64)
        for name in ("tp", "pp", "vp", "cp", "dp", "micro_batch", "micro_batches")
    )
    split: Split = (tp, pp, vp, cp, dp, mb, m)
    micro_s = card_compute(
        step_workload(workload),
        split,
        card_rates(frame, row),
        traffic_defaults(workload.software_stack),
        grid["ep"].to_numpy(np.float64),
    ).micro_batch_s
    product = (grid["tp"] * grid["pp"] * grid["cp"]).to_numpy()
    order = np.lexsort((row, product))
    start = np.flatnonzero(np.r_[True, product[order][1:] != product[order][:-1]])
    return ShapeTerms(
        option=row[order],
        shape={name: grid[name].to_numpy()[order] for name in SHAPE_COLUMNS},
        useful_s=step.useful_s[order],
        per_micro_s=(micro_s + step.tp_s)[order],
        fixed_s=(step.bubble_s + step.pp_s)[order],
        group_product=product[order][start],
        group_start=np.r_[start, order.size],
    )


def _reaching(
    terms: ShapeTerms,
    largest_batch: int,
    candidates: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]],
) -> ShapeTerms:
    """The shapes whose bound may reach what some candidate of their option needs: at most
    `largest_batch` // (dp × micro-batch) micro-batches, dp at least the option's fewest
    cards ÷ tp·pp·cp (the bound grows with m)."""
    option, cards, needed = candidates
    size = int(max(terms.option.max(initial=0), option.max(initial=0))) + 1
    least, fewest = np.full(size, np.inf), np.full(size, np.inf)
    np.minimum.at(least, option, needed)
    np.minimum.at(fewest, option, cards.astype(np.float64))
    product = np.repeat(terms.group_product, np.diff(terms.group_start))
    dp = np.maximum(np.ceil(fewest[terms.option] / product), 1.0)
    m = np.floor(largest_batch / (dp * terms.shape["micro_batch"]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        most = m * terms.useful_s / (m * terms.per_micro_s + terms.fixed_s)
    most = np.maximum(np.nan_to_num(most, nan=np.inf), FACTOR_FLOOR) * (1.0 + BOUND_SLACK)
    keep = most >= least[terms.option]
    product = product[keep]
    start = np.flatnonzero(np.r_[True, product[1:] != product[:-1]]) if product.size else product
    return ShapeTerms(
        option=terms.option[keep],
        shape={name: values[keep] for name, values in terms.shape.items()},
        useful_s=terms.useful_s[keep],
        per_micro_s=terms.per_micro_s[keep],
        fixed_s=terms.fixed_s[keep],
        group_product=product[start],
        group_start=np.r_[start, product.size],
    )


def _pairs(
    terms: ShapeTerms, option: NDArray[np.int64], cards: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(candidate, shape row) pairs whose tp·pp·cp divides the candidate's card count and whose
    option is the candidate's."""
    found_candidate: list[NDArray[np.int64]] = []
    found_row: list[NDArray[np.int64]] = []
    for g, product in enumerate(terms.group_product):
        j = np.flatnonzero(cards % product == 0)
        if not j.size:
            continue
        lo, hi = terms.group_start[g], terms.group_start[g + 1]
        options = terms.option[lo:hi]
        first = np.searchsorted(options, option[j], side="left")
        counts = np.searchsorted(options, option[j], side="right") - first
        candidate = np.repeat(j, counts)
        offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        found_candidate.append(candidate)
        found_row.append(lo + np.repeat(first, counts) + offset)
    if not found_candidate:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(found_candidate), np.concatenate(found_row)


def _data_parallel(
    workload: TrainingWorkload, terms: ShapeTerms, cards: NDArray[np.int64], row: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """dp, micro-batches per replica and validity of each pair, as enumerate_splits has them."""
    shape = terms.shape
    tp, pp, cp, mb, ep = (shape[name][row] for name in ("tp", "pp", "cp", "micro_batch", "ep"))
    dp = cards // (tp * pp * cp)
    rule = workload.batch_rule
    keep = dp * mb <= rule.largest
    batch = np.full(row.size, rule.sequences, dtype=np.int64)
    if rule.max_sequences:
        wanted = np.ceil(dp * mb * pp * rule.per_stage).astype(np.int64)
        batch = np.clip(wanted, rule.sequences, max(rule.max_sequences, rule.sequences))
    keep &= (dp >= 1) & (dp * mb <= batch) & (dp % ep == 0)
    if workload.parallelism.dp is not None:
        keep &= dp == workload.parallelism.dp
    micro_batches = batch // np.maximum(dp * mb, 1)
    return dp, micro_batches, keep


def reaches(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    terms: ShapeTerms,
    option: NDArray[np.int64],
    cards: NDArray[np.int64],
    needed: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """Whether some split of `cards[i]` cards (>= 2) of option `option[i]` (a position in
    `frame`) that fits in memory may reach modeled MFU × scaling `needed[i]`: False proves
    none does. The memory wall and the full step time are computed only for the splits whose
    bound reaches `needed`."""
    option = np.asarray(option, dtype=np.int64)
    cards = np.asarray(cards, dtype=np.int64)
    needed = np.asarray(needed, dtype=np.float64)
    terms = _reaching(terms, workload.batch_rule.largest, (option, cards, needed))
    candidate, row = _pairs(terms, option, cards)
    dp, micro_batches, keep = _data_parallel(workload, terms, cards[candidate], row)
    m = micro_batches.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        efficiency = m * terms.useful_s[row] / (m * terms.per_micro_s[row] + terms.fixed_s[row])
    # The reported factors are floored at FACTOR_FLOOR: no split reports less.
    bound = np.maximum(efficiency, FACTOR_FLOOR) * (1.0 + BOUND_SLACK)
    keep &= bound >= needed[candidate]
    candidate, row, dp, micro_batches = (x[keep] for x in (candidate, row, dp, micro_batches))
    pairs = pd.DataFrame({"row": terms.option[row], "dp": dp, "micro_batches": micro_batches})
    for name in SHAPE_COLUMNS:
        pairs[name] = terms.shape[name][row]
    _memory(workload, frame, pairs)
    fits = pairs["fits_memory"].to_numpy(bool)
    pairs, candidate = pairs[fits], candidate[fits]
    # The pairs left are few: their modeled step time (as the split search has it) decides.
    step = _seam_step_time(workload, frame, pairs)
    efficiency = step.mfu * step.scaling * (1.0 + BOUND_SLACK)
    may: NDArray[np.bool_] = np.zeros(cards.size, dtype=bool)
    may[candidate[efficiency >= needed[candidate]]] = True
    return may
