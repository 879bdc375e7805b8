"""Benchmark: the whole efficiency core over 100,000 synthetic pools of mixed cards.

Times ``evaluate_pools`` + ``aggregate_scopes`` (cluster, site, fleet) on DataFrames, then
the same arithmetic written as bare numpy on pre-extracted arrays (no validation,
provenance, defaults bookkeeping or frames), checks that both give the same numbers and
prints both timings and their ratio.

Run from the repository root: ``.venv/bin/python benchmarks/engine.py [--pools 100000]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.aggregate import aggregate_scopes
from engine.defaults import COOLING_TYPES, DEFAULTS, FABRICS, FACTOR_FLOOR
from engine.evaluate import evaluate_pools

# (accelerator, vendor, dense BF16 TFLOP/s, NVLink GB/s both directions, catalog MFU or NaN)
CATALOG = [
    ("V100 SXM2 32GB", "NVIDIA", 125.0, 300.0, np.nan),
    ("A100 SXM4 80GB", "NVIDIA", 312.0, 600.0, 0.55),
    ("H100 SXM5 80GB", "NVIDIA", 989.0, 900.0, 0.50),
    ("H20 96GB", "NVIDIA", 148.0, 900.0, np.nan),
    ("MI300X", "AMD", 1307.0, 896.0, np.nan),
    ("Ascend 910B", "Huawei", 320.0, 392.0, np.nan),
    ("Gaudi 3", "Intel", 1835.0, 1200.0, np.nan),
]
VENDOR_CODE = {"NVIDIA": 0, "AMD": 1, "Huawei": 2, "Intel": 3}


def synthetic_inputs(
    n_pools: int, seed: int = 7
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Node groups (1-3 per pool, ~15% of pools mixed), pools and speed-up tables for ~10%."""
    rng = np.random.default_rng(seed)
    groups_per_pool = rng.choice([1, 2, 3], size=n_pools, p=[0.85, 0.12, 0.03])
    pool = np.repeat(np.arange(n_pools), groups_per_pool)
    card = rng.integers(0, len(CATALOG), size=pool.size)
    node_groups = pd.DataFrame(
        {
            "pool_id": pool,
            "accelerator": np.array([c[0] for c in CATALOG])[card],
            "vendor": np.array([c[1] for c in CATALOG])[card],
            "peak_tflops": np.array([c[2] for c in CATALOG])[card],
            "nodes": rng.integers(1, 257, size=pool.size),
            "cards_per_node": rng.choice([4, 8], size=pool.size, p=[0.1, 0.9]),
            "nvlink_bidir_gbs": np.array([c[3] for c in CATALOG])[card],
            "default_mfu": np.array([c[4] for c in CATALOG])[card],
        }
    )
    pools = pd.DataFrame(
        {
            "pool_id": np.arange(n_pools),
            "site_id": rng.integers(0, 50, size=n_pools),
            "cluster_id": rng.integers(0, 500, size=n_pools),
            "cooling": rng.choice(COOLING_TYPES, size=n_pools),
            "fabric": rng.choice(FABRICS, size=n_pools),
            "pue": np.where(rng.random(n_pools) < 0.3, rng.uniform(1.05, 1.6, n_pools), np.nan),
            "utilization_measured": np.where(
                rng.random(n_pools) < 0.5, rng.uniform(0.2, 0.95, n_pools), np.nan
            ),
            "duration_h": 730.0,
            "cost_per_card_hours": rng.uniform(0.8, 3.0, size=n_pools),
        }
    )
    with_table = np.flatnonzero(rng.random(n_pools) < 0.1)
    sizes = np.array([8.0, 64.0, 512.0, 4096.0])
    efficiency = np.array([1.0, 0.95, 0.9, 0.8])
    speedup = pd.DataFrame(
        {
            "pool_id": np.repeat(with_table, sizes.size),
            "cards": np.tile(sizes, with_table.size),
            "throughput": np.tile(sizes * efficiency, with_table.size),
        }
    )
    return node_groups, pools, speedup


def core(
    node_groups: pd.DataFrame, pools: pd.DataFrame, speedup: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The engine as the Django side calls it: per-pool results and the scope roll-ups."""
    results = evaluate_pools(node_groups, pools, speedup)
    return {"pool": results, **aggregate_scopes(results)}


def table(key: str) -> float:
    return float(DEFAULTS[key].value)


def bare_arrays(
    node_groups: pd.DataFrame, pools: pd.DataFrame, speedup: pd.DataFrame
) -> dict[str, np.ndarray]:
    """Pre-extract the inputs as plain arrays (not timed: the numpy baseline starts here)."""
    return {
        "pool": node_groups["pool_id"].to_numpy(),
        "model": pd.factorize(node_groups["accelerator"])[0],
        "vendor": node_groups["vendor"].map(VENDOR_CODE).to_numpy(),
        "peak": node_groups["peak_tflops"].to_numpy(float),
        "cards": (node_groups["nodes"] * node_groups["cards_per_node"]).to_numpy(float),
        "node": node_groups["cards_per_node"].to_numpy(float),
        "nvlink": node_groups["nvlink_bidir_gbs"].to_numpy(float),
        "catalog_mfu": node_groups["default_mfu"].to_numpy(float),
        "cooling": pd.Index(COOLING_TYPES).get_indexer(pools["cooling"]),
        "fabric": pd.Index(FABRICS).get_indexer(pools["fabric"]),
        "pue": pools["pue"].to_numpy(float),
        "utilization": pools["utilization_measured"].to_numpy(float),
        "duration": pools["duration_h"].to_numpy(float),
        "cost": pools["cost_per_card_hours"].to_numpy(float),
        "site": pools["site_id"].to_numpy(),
        "cluster": pools["cluster_id"].to_numpy(),
        "table_pool": speedup["pool_id"].to_numpy(),
        "table_cards": speedup["cards"].to_numpy(float),
        "table_throughput": speedup["throughput"].to_numpy(float),
    }


def _scaling(n, speed, node, nvlink, fabric_bytes_s):
    """Scaling model, default job shape: compute, comm and bubble seconds per step."""
    t = np.maximum(1.0, np.minimum(np.minimum(table("tensor_parallel"), node), n))
    p = np.maximum(1.0, np.minimum(table("pipeline_parallel"), np.floor(n / t)))
    d = n / (t * p)
    m = table("microbatches_per_replica")
    params, k = table("model_params"), table("flops_per_param_token")
    tokens = m * d * table("micro_batch_tokens")
    compute = k * params * tokens / (n * speed * 1e12)
    hidden = np.cbrt(128.0 * params / 12.0)
    nvlink_bytes_s = nvlink / 2.0 * 1e9
    tp = 4.0 * (t - 1.0) / t * tokens * params / (3.0 * hidden * d * p)
    tp = tp / np.where(t > node, fabric_bytes_s, nvlink_bytes_s)
    gradient = params * table("gradient_bytes_per_param") / (t * p)
    dp = 2.0 * (d - 1.0) / d * gradient / np.where(n <= node, nvlink_bytes_s, fabric_bytes_s)
    comm = tp + (1.0 - table("dp_overlap_share")) * dp
    bubble = compute * (p - 1.0) / m
    return compute, comm, bubble, m * d


def _effective_time(n, mtbf_card):
    save, restart = table("checkpoint_save_h"), table("restart_h")
    mtbf = mtbf_card / n
    tau = np.sqrt(2.0 * save * mtbf)
    return np.clip(1.0 - (save / tau + (tau / 2.0 + restart) / mtbf), FACTOR_FLOOR, 1.0)


def _by_pool_max(codes, values, n):
    order = np.argsort(codes, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(codes, minlength=n))[:-1]]
    return np.maximum.reduceat(values[order], starts), order, starts


def bare_numpy(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same arithmetic as the engine, straight on arrays, default settings only."""
    pool, n_pools = a["pool"], a["cooling"].size
    cooling = a["cooling"]
    vendor_mfu = np.array(
        [table(f"mfu_default_{v}") for v in ("nvidia", "amd", "huawei", "intel", "other")]
    )
    per_cooling = {
        name: np.array([table(f"{name}_{c}") for c in COOLING_TYPES])
        for name in ("pue", "cooling_performance", "failure_rate")
    }
    base = np.where(np.isnan(a["catalog_mfu"]), vendor_mfu[a["vendor"]], a["catalog_mfu"])
    mfu_group = np.clip(base * per_cooling["cooling_performance"][cooling][pool], FACTOR_FLOOR, 1.0)
    cards, speed = a["cards"], a["peak"] * mfu_group
    n = np.bincount(pool, cards, n_pools)
    peak = np.bincount(pool, cards * a["peak"], n_pools)
    ideal = np.bincount(pool, cards * speed, n_pools)
    mfu = ideal / peak
    pue = np.where(np.isnan(a["pue"]), per_cooling["pue"][cooling], a["pue"])
    energy = 1.0 / pue

    fabric_eff = np.array([table(f"fabric_efficiency_{f}") for f in FABRICS])[a["fabric"]]
    fabric_bytes_s = table("inter_node_gbit_s_per_card") * 1e9 / 8.0 * fabric_eff
    pool_node, order, starts = _by_pool_max(pool, -a["node"], n_pools)
    pool_node = -pool_node
    pool_nvlink = np.minimum.reduceat(a["nvlink"][order], starts)
    compute, comm, bubble, microbatches = _scaling(
        n, ideal / n, pool_node, pool_nvlink, fabric_bytes_s
    )

    # Card-model groups: bucket effect and split jobs.
    n_models = int(a["model"].max()) + 1
    keys, inverse = np.unique(pool * n_models + a["model"], return_inverse=True)
    model_pool = keys // n_models
    model_cards = np.bincount(inverse, cards)
    model_speed = np.bincount(inverse, cards * speed) / model_cards
    m_order = np.argsort(inverse, kind="stable")
    m_starts = np.r_[0, np.cumsum(np.bincount(inverse))[:-1]]
    model_node = np.minimum.reduceat(a["node"][m_order], m_starts)
    model_nvlink = np.minimum.reduceat(a["nvlink"][m_order], m_starts)
    model_vendor = np.minimum.reduceat(a["vendor"][m_order], m_starts)
    models = np.bincount(model_pool, minlength=n_pools)
    vendors = np.bincount(np.unique(model_pool * 8 + model_vendor) // 8, minlength=n_pools)
    mix = np.where(models <= 1, 0, np.where(vendors <= 1, 1, 2))
    penalty = np.array(
        [1.0, table("mixing_penalty_same_vendor"), table("mixing_penalty_cross_vendor")]
    )[mix]
    weight = model_cards * model_speed
    micro = np.maximum(1.0, np.floor(np.rint(microbatches)))
    exact = micro[model_pool] * weight / ideal[model_pool]
    floor = np.floor(exact)
    leftover = np.rint(micro - np.bincount(model_pool, floor, n_pools))
    by_remainder = np.lexsort((-(exact - floor), model_pool))
    group_starts = np.r_[0, np.cumsum(models)[:-1]]
    rank = np.empty_like(model_pool)
    rank[by_remainder] = np.arange(model_pool.size) - group_starts[model_pool[by_remainder]]
    rounded = floor + (rank < leftover[model_pool])
    step, _, _ = _by_pool_max(model_pool, rounded / weight, n_pools)
    balance = (micro / ideal) / step
    min_speed = -_by_pool_max(model_pool, -model_speed, n_pools)[0]
    equal = n * min_speed / ideal
    h = np.column_stack(
        [
            equal * penalty,
            np.maximum(balance, equal) * penalty,
            table("granularity_penalty") * penalty,
        ]
    )
    mtbf_card = table("mtbf_card_hours") / per_cooling["failure_rate"][cooling]
    time_joint = _effective_time(n, mtbf_card)
    joint_scaling = np.clip(
        compute[:, None] / h / (compute[:, None] / h + comm[:, None] + bubble[:, None] / h),
        FACTOR_FLOOR,
        1.0,
    )
    m_compute, m_comm, m_bubble, _ = _scaling(
        model_cards, model_speed, model_node, model_nvlink, fabric_bytes_s[model_pool]
    )
    m_scaling = np.clip(m_compute / (m_compute + m_comm + m_bubble), FACTOR_FLOOR, 1.0)
    m_time = _effective_time(model_cards, mtbf_card[model_pool])
    split_scaled = np.bincount(model_pool, weight * m_scaling, n_pools)
    split_delivered = np.bincount(model_pool, weight * m_scaling * m_time, n_pools)
    delivered = np.column_stack(
        [ideal[:, None] * h * joint_scaling * time_joint[:, None], split_delivered]
    )
    near_best = delivered >= delivered.max(axis=1, keepdims=True) * (1 - 1e-9)
    strategy = np.where(mix == 0, 0, np.argmax(near_best, axis=1))
    is_split = strategy == 3
    column = np.minimum(strategy, 2)[:, None]
    model_scaling = np.where(
        is_split, split_scaled / ideal, np.take_along_axis(joint_scaling, column, 1)[:, 0]
    )
    h_used = np.where(is_split, 1.0, np.take_along_axis(h, column, 1)[:, 0])
    scaling = np.clip(model_scaling * h_used, FACTOR_FLOOR, 1.0)
    effective_time = np.clip(
        np.where(is_split, split_delivered / split_scaled, time_joint), FACTOR_FLOOR, 1.0
    )

    # Measured speed-up tables win (sorted by pool then cards in the synthetic data).
    t_pool, t_cards, t_thr = a["table_pool"], a["table_cards"], a["table_throughput"]
    first = np.r_[True, t_pool[1:] != t_pool[:-1]]
    start_row = np.flatnonzero(first)
    counts = np.diff(np.r_[start_row, t_pool.size])
    eff_points = t_thr / (t_cards * np.repeat(t_thr[start_row] / t_cards[start_row], counts))
    tabled = t_pool[start_row]
    x = np.clip(n[tabled], t_cards[start_row], t_cards[start_row + counts - 1])
    left = start_row + np.sum(t_cards.reshape(-1, counts[0]) <= x[:, None], axis=1) - 1
    right = np.minimum(left + 1, start_row + counts - 1)
    width = t_cards[right] - t_cards[left]
    frac = np.where(width > 0, (x - t_cards[left]) / np.where(width > 0, width, 1.0), 0.0)
    scaling[tabled] = np.clip(
        eff_points[left] + frac * (eff_points[right] - eff_points[left]), FACTOR_FLOOR, 1.0
    )

    utilization = np.clip(
        np.where(np.isnan(a["utilization"]), table("utilization_planned"), a["utilization"]),
        FACTOR_FLOOR,
        1.0,
    )
    factors = np.column_stack([energy, mfu, scaling, effective_time, utilization])
    product = factors.prod(axis=1)
    logs = -np.log(factors)
    shares = (1 - product)[:, None] * logs / logs.sum(axis=1, keepdims=True)
    card_hours = n * a["duration"]
    peak_pflop_days = peak / 1000.0 * a["duration"] / 24.0
    lost_card_hours = shares * card_hours[:, None]
    lost_money = lost_card_hours * a["cost"][:, None]

    rollups = {}
    for level, codes in (
        ("cluster", a["site"] * 1000 + a["cluster"]),
        ("site", a["site"]),
        ("fleet", np.zeros(n_pools, dtype=np.int64)),
    ):
        scope = np.unique(codes, return_inverse=True)[1]
        total = np.bincount(scope, peak_pflop_days)
        aggregated = (
            np.column_stack([np.bincount(scope, peak_pflop_days * f) for f in factors.T])
            / total[:, None]
        )
        rollups[level] = np.bincount(scope, peak_pflop_days * product) / total
        rollups[level + "_factors"] = aggregated
        rollups[level + "_money"] = np.column_stack([np.bincount(scope, c) for c in lost_money.T])
    return {
        "product": product,
        "scaling": scaling,
        "effective_time": effective_time,
        "strategy": strategy,
        "lost_card_hours": lost_card_hours,
        **rollups,
    }


def best_of(repeats: int, run: Callable[[], object]) -> tuple[float, object]:
    timings, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        timings.append(time.perf_counter() - start)
    return min(timings), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    node_groups, pools, speedup = synthetic_inputs(args.pools)
    arrays = bare_arrays(node_groups, pools, speedup)
    core_s, outputs = best_of(args.repeats, lambda: core(node_groups, pools, speedup))
    numpy_s, bare = best_of(args.repeats, lambda: bare_numpy(arrays))

    results = outputs["pool"]  # type: ignore[index]
    np.testing.assert_allclose(results["product"].to_numpy(), bare["product"], rtol=1e-9)  # type: ignore[index]
    np.testing.assert_allclose(results["scaling"].to_numpy(), bare["scaling"], rtol=1e-9)  # type: ignore[index]
    fleet = outputs["fleet"].iloc[0]  # type: ignore[index]
    assert abs(fleet["aggregate_of_products"] - bare["fleet"][0]) < 1e-12  # type: ignore[index]

    mixed = int((results["card_models"] > 1).sum())
    print(
        f"pools: {args.pools:,} ({len(node_groups):,} node groups, {mixed:,} mixed pools, "
        f"{speedup.pool_id.nunique():,} with speed-up tables); best of {args.repeats}"
    )
    print(
        f"engine (DataFrames, evaluate_pools + aggregate_scopes): {core_s:.3f} s, "
        f"{args.pools / core_s:,.0f} pools/s"
    )
    print(
        f"bare numpy (same arithmetic on arrays):                {numpy_s:.3f} s, "
        f"{args.pools / numpy_s:,.0f} pools/s"
    )
    print(f"ratio engine / bare numpy: {core_s / numpy_s:.2f}x (results agree to 1e-9)")


if __name__ == "__main__":
    main()
