"""How far are today's models from published runs? The track record, as two tables.

Runs every published run of engine/data/published_training_runs.json (the calibration runs
and the held-out ones, and our own single-GPU measurements) through the capacity planner with
only the workload and the cards given, and prints published, modeled, error, whether the
published figure is inside the planner's 10th-90th percentile band, the role and the source;
then the median and worst error, the mean signed error and the band's coverage, for all runs
and by role. With --write it also writes engine/data/track_record.json, the file the "How
accurate is the planner?" page reads (tests/engine/test_track_record.py fails until the file
matches the model again).

The second table is the serving model's (engine/inference/track_record.py): every figure of
engine/data/published_serving_runs.json (TensorRT-LLM, vLLM, gpt-fast, FasterTransformer and
this repository's GPU measurements) through evaluate_inference, with the error, the band and
the role; then median and worst error and band coverage for calibration and held-out rows.

Between them, the mixture-of-experts training runs (the file's "moe_runs": DeepSeek-V3 on
2,048 H800, the calibration check; DeepSeek-V2 and NVIDIA's NeMo / Megatron-Bridge tables,
held back) through the same planner, as their own group of the record ("moe"; engine/moe_runs.py);
the calibration check is the subset the one MoE constant is fitted on, by the rule of
docs/decisions/0016-moe-calibration.md. Then the FP4 (NVFP4) training runs (the file's
"fp4_runs": two calibration runs, one per model size, the rest held back;
engine/training_precision.py), dense runs through the same planner, as the record's "fp4"
part. With --write-fp4 only that part is rewritten: the file is read again just before
writing and every other part kept as it is.
With --write-serving only the file's "serving" part is rewritten (the training part is left
as it is), and the serving band's factors recomputed from the calibration rows are printed:
band.RATIO_FACTORS must hold them (engine/inference/band.py says how the band is made).

With --fit it repeats the search that fitted the serving engines' constants (engines.py): a
coordinate search in log space, from the committed values, minimising the mean |ln(modeled /
published)| over the calibration rows plus a penalty on rows off by more than 18 %; it prints
the constants it ends at and the errors, for a person to commit (nothing is written).

Run from the repository root:
    .venv/bin/python benchmarks/fidelity.py [--write | --write-serving | --write-fp4 | --fit]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a plain script

from engine.inference import band, engines
from engine.inference import track_record as serving
from engine.track_record import (
    TRACK_RECORD_PATH,
    compute_fp4_record,
    compute_track_record,
    dumps,
    format_fp4_table,
    format_moe_table,
    format_serving_table,
    format_table,
    load_track_record,
)

# The constants the search moves: (where, name); "shared" is engines.SHARED. The others are
# borrowed, as engines.py says: vLLM's compute and KV efficiencies are TensorRT-LLM's, the
# compiled loop's compute and KV efficiencies and plain PyTorch's all-reduce the other's.
SHARED_FIELDS = (
    "gemm_half_tokens", "gemm_half_hidden", "roofline_sharpness", "attention_unit_gbs",
    "allreduce_efficiency",
)  # fmt: skip
ENGINE_FIELDS = {
    "tensorrt-llm": ("bandwidth_efficiency", "compute_efficiency", "layer_overhead_us",
                     "step_overhead_us", "allreduce_latency_us", "kv_read_efficiency"),
    "vllm": ("bandwidth_efficiency", "layer_overhead_us", "step_overhead_us",
             "allreduce_latency_us"),
    "plain-pytorch": ("bandwidth_efficiency", "compute_efficiency", "layer_overhead_us",
                      "kv_read_efficiency"),
    "pytorch-compiled": ("bandwidth_efficiency", "layer_overhead_us", "allreduce_latency_us"),
}  # fmt: skip
SHARES = {"bandwidth_efficiency", "compute_efficiency", "kv_read_efficiency",
          "allreduce_efficiency", "fp8", "fp4", "int8", "int4"}  # fmt: skip
Constants = dict[tuple[str, str], float]


def current() -> Constants:
    values = {("shared", name): float(getattr(engines.SHARED, name)) for name in SHARED_FIELDS}
    values |= {("narrow", k): v for k, v in engines.SHARED.narrow_format_compute.items()}
    values |= {("dequant", k): v for k, v in engines.SHARED.dequant_bandwidth.items()}
    for engine, names in ENGINE_FIELDS.items():
        values |= {(engine, n): float(getattr(engines.ENGINES[engine], n)) for n in names}
    return values


def apply(values: Constants) -> None:
    """Put the constants into the engines module (the model reads them from there)."""
    engines.SHARED = dataclasses.replace(
        engines.SHARED,
        **{name: values[("shared", name)] for name in SHARED_FIELDS},
        narrow_format_compute={k: v for (w, k), v in values.items() if w == "narrow"},
        dequant_bandwidth={k: v for (w, k), v in values.items() if w == "dequant"},
    )
    for engine, names in ENGINE_FIELDS.items():
        moved = {n: values[(engine, n)] for n in names}
        engines.ENGINES[engine] = dataclasses.replace(engines.ENGINES[engine], **moved)
    trt, plain = engines.ENGINES["tensorrt-llm"], engines.ENGINES["plain-pytorch"]
    compiled = engines.ENGINES["pytorch-compiled"]
    engines.ENGINES["vllm"] = dataclasses.replace(
        engines.ENGINES["vllm"],
        compute_efficiency=trt.compute_efficiency,
        kv_read_efficiency=trt.kv_read_efficiency,
    )
    engines.ENGINES["pytorch-compiled"] = dataclasses.replace(
        compiled,
        compute_efficiency=plain.compute_efficiency,
        kv_read_efficiency=plain.kv_read_efficiency,
    )
    engines.ENGINES["plain-pytorch"] = dataclasses.replace(
        plain, allreduce_latency_us=compiled.allreduce_latency_us
    )
    vllm = engines.ENGINES["vllm"]
    engines.ENGINES["sglang"] = dataclasses.replace(
        engines.ENGINES["sglang"],
        **{n: getattr(vllm, n) for n in ENGINE_FIELDS["tensorrt-llm"]},
    )


def log_errors(values: Constants, runs: list[dict]) -> list[float]:
    apply(values)
    rows = [serving.model_run(run) for run in runs]
    return [abs(math.log(row["modeled"] / row["published"])) for row in rows if row["modeled"]]


def loss(values: Constants, runs: list[dict]) -> float:
    errors = log_errors(values, runs)
    penalty = sum(max(e - 0.18, 0.0) ** 2 for e in errors)
    return sum(errors) / len(errors) + 20.0 * penalty / len(errors)


def fit(sweeps: int = 3, step: float = 0.1) -> Constants:
    """Coordinate search: each constant up and down by `step` (in log), kept while it helps;
    the step shrinks by 0.6 a sweep. Shares stay in (0, 1]."""
    # The dense calibration rows: the mixture-of-experts rows never fit the constants.
    runs = [r for r in serving.load_runs() if r["role"] == "calibration" and not serving.is_moe(r)]
    values = current()
    best = loss(values, runs)
    for sweep in range(sweeps):
        for key in list(values):
            for direction in (1.0, -1.0):
                while True:
                    trial = dict(values)
                    trial[key] = values[key] * math.exp(direction * step)
                    if key[1] in SHARES:
                        trial[key] = min(trial[key], 1.0)
                    score = loss(trial, runs)
                    if trial[key] == values[key] or score >= best - 1e-5:
                        break
                    values, best = trial, score
        step *= 0.6
        print(f"sweep {sweep + 1}: loss {best:.4f}", flush=True)
    apply(values)
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help=f"write {TRACK_RECORD_PATH.name} for the page"
    )
    parser.add_argument(
        "--fit", action="store_true", help="search the serving constants again and print them"
    )
    parser.add_argument(
        "--write-serving",
        action="store_true",
        help=f"rewrite only the serving part of {TRACK_RECORD_PATH.name}",
    )
    parser.add_argument(
        "--write-fp4",
        action="store_true",
        help=f"rewrite only the FP4 training part of {TRACK_RECORD_PATH.name}",
    )
    args = parser.parse_args(argv)
    if args.write_serving:
        return write_serving()
    if args.write_fp4:
        return write_fp4()
    if args.fit:
        for (where, name), value in fit().items():
            print(f"{where} {name} = {value:.4g}")
    record = compute_track_record()
    print(format_table(record))
    print(
        "\nMixture of experts (the moe_runs of the runs file; the calibration check fits the one"
        " MoE constant, held-back runs are only compared)\n"
    )
    print(format_moe_table(record["moe"]))
    print("\nFP4 (NVFP4) training (the fp4_runs of the runs file; outside the summary above)\n")
    print(format_fp4_table(record["fp4"]))
    print("\nServing\n")
    print(format_serving_table(record["serving"]))
    if args.write:
        TRACK_RECORD_PATH.write_text(dumps(record), encoding="utf-8")
        print(f"\nwrote {TRACK_RECORD_PATH.relative_to(Path.cwd().resolve())}")
    return 0


def write_serving() -> int:
    """The serving part of the track record from today's model; the rest of the file kept."""
    record = load_track_record()
    record["serving"] = serving.compute_serving_record()
    print(format_serving_table(record["serving"]))
    calibration = [row for row in record["serving"]["rows"] if row["role"] == "calibration"]
    factors = serving.band_factors(calibration)
    print(f"\nband factors from the calibration rows: {factors}")
    if factors != band.RATIO_FACTORS:
        print(f"band.RATIO_FACTORS ({band.RATIO_FACTORS}) is out of step: commit these")
    TRACK_RECORD_PATH.write_text(dumps(record), encoding="utf-8")
    print(f"\nwrote the serving part of {TRACK_RECORD_PATH.relative_to(Path.cwd().resolve())}")
    return 0


def write_fp4() -> int:
    """The FP4 part of the track record from today's model. The file is read right before
    writing, so a part another run rewrote meanwhile (--write-serving) is kept, byte for byte."""
    fp4 = compute_fp4_record()
    print(format_fp4_table(fp4))
    record = load_track_record()
    record["fp4"] = fp4
    TRACK_RECORD_PATH.write_text(dumps(record), encoding="utf-8")
    print(f"\nwrote the FP4 part of {TRACK_RECORD_PATH.relative_to(Path.cwd().resolve())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
