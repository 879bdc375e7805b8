"""Where the per-card model's fitted defaults come from: refit them and print the values.

Three fits, each from data the repository holds, none from a held-out run:

1. kernels: GEMM efficiency and per-call overhead (bf16 and FP8), the attention kernel's
   efficiency curve and HBM efficiency, from the committed GPU measurements
   (benchmarks/gpu/results/*.json: sections gemm, attention, memory);
2. traffic: the memory-bound traffic of each software stack, the FP8 cast traffic and the
   multi-card compute share, by coordinate descent on the mean |log(modeled ÷ published)| of
   the *calibration* runs of engine/data/published_training_runs.json (plain PyTorch constants
   on the plain PyTorch runs, the others on the Megatron-class runs);
3. band: the 10th and 90th percentile of published ÷ modeled over the calibration runs
   (model_ratio_p10, model_ratio_p90), with today's defaults.

It prints each fitted value beside the one in engine/defaults.py; copy a changed value there
(with its source) and run benchmarks/fidelity.py --write. Fits 1 and 3 take seconds, fit 2
about ten minutes.

Run from the repository root:
    .venv/bin/python benchmarks/calibrate.py [kernels] [traffic] [band]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a plain script

from engine import defaults  # noqa: E402
from engine.inference.band import conformal_quantile  # noqa: E402
from engine.track_record import load_runs, model_run  # noqa: E402

GPU_RESULTS = sorted((ROOT / "benchmarks" / "gpu" / "results").glob("*.json"))
MIN_GEMM_DIM = 2048  # smaller GEMMs are bound by Python's launch rate in the measurement loop
PLAIN = "plain_pytorch"
# Grids of the traffic fit: (key, candidate values, runs it is fitted on).
TRAFFIC_GRIDS: tuple[tuple[str, Sequence[float], str], ...] = (
    ("kernel_traffic_per_activation_byte_plain_pytorch", np.arange(4.0, 16.01, 0.5), PLAIN),
    ("multi_card_compute_share", np.arange(0.70, 0.951, 0.01), "megatron"),
    ("kernel_traffic_per_activation_byte_megatron", np.arange(0.0, 12.01, 1.0), "megatron"),
    ("fp8_cast_traffic_per_activation_byte", np.arange(0.0, 8.01, 0.5), "megatron"),
)


def _set(key: str, value: float) -> None:
    table = defaults.DEFAULTS
    assert isinstance(table, dict)
    table[key] = dataclasses.replace(table[key], value=float(value))


def _grid_fit(
    loss: Callable[[Sequence[float]], float], grids: Sequence[Iterable[float]]
) -> tuple[float, tuple[float, ...]]:
    """Brute force over the product of the grids: (least loss, its values)."""
    best: tuple[float, tuple[float, ...]] | None = None
    for values in (
        np.array(np.meshgrid(*[np.asarray(list(g)) for g in grids])).reshape(len(grids), -1).T
    ):
        candidate = (loss(values), tuple(float(v) for v in values))
        if best is None or candidate[0] < best[0]:
            best = candidate
    assert best is not None
    return best


def _mean_abs_log(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.mean(np.abs(np.log(predicted / measured))))


def _gpu_rows(section: str) -> list[tuple[dict[str, Any], Mapping[str, Any]]]:
    rows = []
    for path in GPU_RESULTS:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows += [(row, data["peaks"]) for row in data.get(section, []) if row["status"] == "ok"]
    return rows


def fit_gemm(dtype: str, peak_key: str) -> tuple[float, float, int]:
    """time = FLOPs ÷ (e · peak) + t over the large GEMMs of one dtype: (e, t in µs, rows)."""
    rows = [
        (row["flops"], row["time_ms"] * 1e-3, peaks[peak_key] * 1e12)
        for row, peaks in _gpu_rows("gemm")
        if row["dtype"] == dtype and min(row["m"], row["n"], row["k"]) >= MIN_GEMM_DIM
    ]
    flops, seconds, peak = (np.array(column) for column in zip(*rows, strict=True))
    _, (e, t_us) = _grid_fit(
        lambda v: _mean_abs_log(flops / (v[0] * peak) + v[1] * 1e-6, seconds),
        (np.arange(0.50, 0.80, 0.0025), np.arange(0.0, 10.01, 0.25)),
    )
    return e, t_us, len(rows)


def fit_attention() -> tuple[float, float, float, int]:
    """e_max · s/(s + s½) · d/(d + d½) over the fused causal forward + backward kernels."""
    rows = [
        (row["seq_len"], row["head_dim"], row["tflops"] / peaks["bf16_dense_tflops"])
        for row, peaks in _gpu_rows("attention")
        if row["backends"] == "default_fused" and row["mode"] == "fwd_bwd"
    ]
    s, d, share = (np.array(column, dtype=float) for column in zip(*rows, strict=True))
    _, (e_max, s_half, d_half) = _grid_fit(
        lambda v: _mean_abs_log(v[0] * s / (s + v[1]) * d / (d + v[2]), share),
        (np.arange(0.50, 0.90, 0.005), np.arange(200.0, 2000.0, 25.0), np.arange(0.0, 80.0, 1.0)),
    )
    return e_max, s_half, d_half, len(rows)


def fit_hbm() -> tuple[float, int]:
    """Median copy bandwidth over the data-sheet figure."""
    shares = [
        row["gb_s"] / (peaks["hbm_tb_s"] * 1e3)
        for row, peaks in _gpu_rows("memory")
        if row["op"] == "copy"
    ]
    return float(np.median(shares)), len(shares)


def _report(key: str, fitted: float, note: str = "") -> None:
    current = float(defaults.DEFAULTS[key].value)
    flag = "" if math.isclose(current, fitted, rel_tol=0.02, abs_tol=1e-9) else "  ← differs"
    print(f"{key:52s} fitted {fitted:9.4g}   in defaults {current:9.4g}{flag} {note}")


def kernels() -> None:
    e, t_us, n = fit_gemm("bf16", "bf16_dense_tflops")
    _report("gemm_efficiency_nvidia", e, f"({n} bf16 GEMMs)")
    _report("gemm_call_overhead_us", t_us)
    e8, _, n8 = fit_gemm("fp8_e4m3", "fp8_dense_tflops")
    _report("fp8_gemm_efficiency_ratio", e8 / e, f"({n8} FP8 GEMMs: {e8:.3f} of the FP8 peak)")
    e_max, s_half, d_half, n = fit_attention()
    _report("attention_efficiency_max", e_max, f"({n} kernels)")
    _report("attention_half_efficiency_tokens", s_half)
    _report("attention_half_efficiency_head_dim", d_half)
    share, n = fit_hbm()
    _report("hbm_efficiency", share, f"({n} copies)")


# --------------------------------------------------------------------------------------------
# Fits on the calibration runs
# --------------------------------------------------------------------------------------------


def calibration_runs() -> list[dict[str, Any]]:
    """The runs a fit may use: calibration role, modeled (never a held-out run)."""
    return [
        run for run in load_runs() if run["role"] == "calibration" and not run.get("not_modeled")
    ]


def _stack(run: Mapping[str, Any]) -> str:
    return str((run.get("training") or {}).get("software_stack", "megatron"))


def log_ratios(runs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """log(published ÷ modeled) per run (an unmodeled run counts as a factor e off)."""
    ratios = {}
    for run in runs:
        row = model_run(run)
        modeled = row["modeled"]
        ratios[row["id"]] = math.log(row["published"] / modeled) if modeled else 1.0
    return ratios


def traffic(rounds: int = 3) -> None:
    runs = calibration_runs()
    for _ in range(rounds):
        for key, grid, stack in TRAFFIC_GRIDS:
            fitted_on = [run for run in runs if (_stack(run) == PLAIN) == (stack == PLAIN)]
            losses = []
            for value in grid:
                _set(key, value)
                losses.append((float(np.mean(np.abs(list(log_ratios(fitted_on).values())))), value))
            loss, value = min(losses)
            _set(key, value)
            print(f"  {key} = {value:g} (mean |log ratio| {loss:.4f} on {len(fitted_on)} runs)")
    print("fitted (copy into engine/defaults.py):")
    for key, _, _ in TRAFFIC_GRIDS:
        print(f"  {key} = {float(defaults.DEFAULTS[key].value):g}")


def band() -> None:
    """The 10th and 90th percentile bounds of published ÷ modeled over the calibration runs,
    by split-conformal ranks, as the serving band (engine.inference.band.conformal_quantile,
    from above and from below): a band that holds at least 80 % of new runs whatever the
    residuals' distribution, with only 27 runs to go on."""
    logs = np.array(list(log_ratios(calibration_runs()).values()))
    high = math.exp(conformal_quantile(logs.tolist(), 0.10))
    low = math.exp(-conformal_quantile((-logs).tolist(), 0.10))
    plain = np.exp(np.percentile(logs, [10, 90]))
    print(
        f"published ÷ modeled over {logs.size} calibration runs: median "
        f"{math.exp(np.median(logs)):.3f}, conformal 10th/90th bounds {low:.3f} / {high:.3f} "
        f"(interpolated p·(n − 1): {plain[0]:.3f} / {plain[1]:.3f})"
    )
    _report("model_ratio_p10", low)
    _report("model_ratio_p90", high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "fits", nargs="*", choices=("kernels", "traffic", "band"), default=["kernels", "band"]
    )
    args = parser.parse_args(argv)
    steps = {"kernels": kernels, "traffic": traffic, "band": band}
    for name in args.fits:
        print(f"# {name}")
        steps[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
