"""Long sequences: the attention kernel's speed, checked on NVIDIA's long-sequence tables.

NVIDIA publishes the same Megatron workload at 4K to 1,024K tokens (context parallelism
beyond 16K), so the attention core goes from a few percent of the work to nearly all of it.
On DGX-B200 (NeMo 25.04) the planner's kernel constants hold at every length; on DGX-H100
(NeMo 24.03.01) the modeled throughput drifts up with the sequence (+2 % at 4K, +28 % at 1M)
unless the stack's attention kernel runs at attention_kernel_ratio_megatron_2024 of the measured
one: the software stack "megatron_2024", or the option column attention_kernel_ratio. That
constant (engine/defaults.py) is the least-squares fit over the H100 table here, and nothing
else.

Source of both tables: NVIDIA NeMo, docs/source/performance/performance_long_sequence.md
("Long Sequence Performance": LLAMA3-8B (FP8) - B200, container NeMo 25.04.rc2; LLAMA2-7B (FP8)
- H100, container NeMo 24.03.01.framework), TFLOPS per GPU with context parallelism, FLOPs
counted by Megatron's formula (the runs file's "megatron_core" convention).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pandas as pd
import pytest

from engine.capacity import PlannerInputError, plan_capacity
from engine.defaults import default_value
from engine.track_record import load_runs, model_run, workload_of
from engine.track_record_rows import option_of

# (sequence in K tokens, GPUs, global batch in sequences, published TFLOPS per GPU)
H100_LLAMA2_7B_NEMO_2403 = [
    (4, 4, 1024, 768.0),
    (8, 8, 512, 730.0),
    (16, 16, 256, 660.0),
    (32, 32, 128, 610.0),
    (64, 64, 64, 574.0),
    (128, 128, 32, 555.0),
    (256, 256, 16, 549.0),
    (512, 512, 8, 549.0),
    (1024, 1024, 4, 536.0),
]
B200_LLAMA3_8B_NEMO_2504 = [
    (8, 2, 512, 1671.0),
    (16, 4, 256, 1717.0),
    (32, 8, 128, 1624.0),
    (64, 16, 64, 1600.0),
    (128, 32, 32, 1588.0),
    (256, 64, 16, 1590.0),
    (512, 128, 8, 1619.0),
    (1024, 256, 4, 1608.0),
]
# The runs file's rows of the same model, card and stack lend the shape and the cluster.
H100_BASE = "nemo2407-llama2-7b-8"
B200_BASE = "bridge2511-llama3-8b-b200-8"
RUNS = {run["id"]: run for run in load_runs()}
HOPPER_2024 = float(default_value("attention_kernel_ratio_megatron_2024"))


def table_runs(
    base_id: str, table: list[tuple[int, int, int, float]], ratio: float, stack: str = "megatron"
) -> list[dict[str, Any]]:
    """The table's rows as runs of the runs file: the base row at each length, batch, count."""
    runs = []
    for seq_k, gpus, batch, tflops in table:
        run = copy.deepcopy(RUNS[base_id])
        run["id"] = f"{base_id}-{seq_k}k"
        run["model"]["seq_len"] = seq_k * 1024
        run["cards"]["count"] = gpus
        run["global_batch_sequences"] = batch
        run["published"] = {
            "kind": "tflops_per_gpu",
            "value": tflops,
            "flops": {"convention": "megatron_core"},
        }
        run["planner_options"] = {"attention_kernel_ratio": ratio}
        run["training"] = {**(run.get("training") or {}), "software_stack": stack}
        runs.append(run)
    return runs


def errors_percent(
    base_id: str, table: list[tuple[int, int, int, float]], ratio: float, stack: str = "megatron"
) -> list[float]:
    rows = [model_run(run) for run in table_runs(base_id, table, ratio, stack)]
    return [
        math.nan if row["error_percent"] is None else float(row["error_percent"]) for row in rows
    ]


def log_squares(errors: list[float]) -> float:
    return sum(math.log(1.0 + e / 100.0) ** 2 for e in errors)


def test_hopper_2024_kernel_ratio_fits_the_h100_table() -> None:
    errors = errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, HOPPER_2024)
    assert all(abs(e) <= 5.0 for e in errors), errors


def test_hopper_2024_kernel_ratio_is_the_least_squares_fit() -> None:
    # Two decimals: the neighbours either side fit the table worse.
    at = log_squares(errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, HOPPER_2024))
    for step in (-0.01, 0.01):
        ratio = HOPPER_2024 + step
        assert log_squares(errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, ratio)) > at


def test_measured_kernel_drifts_up_with_the_sequence_on_the_2024_stack() -> None:
    errors = errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, 1.0)
    assert errors[0] < 5.0 and errors[-1] > 20.0, errors
    assert errors == sorted(errors), errors  # the drift grows with attention's share


def test_measured_kernel_holds_at_every_length_on_the_2025_stack() -> None:
    errors = errors_percent(B200_BASE, B200_LLAMA3_8B_NEMO_2504, 1.0)
    assert all(abs(e) <= 10.0 for e in errors), errors
    assert max(errors) - min(errors) <= 5.0, errors  # no drift with the sequence


def test_kernel_ratio_slows_only_the_attention_core() -> None:
    run = RUNS["llama3-405b-16384-8k"]
    workload = workload_of(run)

    def days(ratio: float, seq_len: int) -> float:
        option = {**option_of(run), "attention_kernel_ratio": ratio}
        batch = 16 * 1024 * 1024 // seq_len  # 16M-token batches, as Llama 3's
        shaped = dataclasses.replace(workload, seq_len=seq_len, global_batch_sequences=batch)
        return float(plan_capacity(shaped, pd.DataFrame([option])).iloc[0]["days"])

    short = days(0.5, 2048) / days(1.0, 2048)
    long = days(0.5, 32768) / days(1.0, 32768)
    assert 1.0 < short < long


def test_kernel_ratio_must_be_positive() -> None:
    run = RUNS["llama3-405b-16384-8k"]
    option = {**option_of(run), "attention_kernel_ratio": 0.0}
    with pytest.raises(PlannerInputError) as raised:
        plan_capacity(workload_of(run), pd.DataFrame([option]))
    assert "attention_kernel_ratio" in raised.value.errors


def test_the_2024_megatron_stack_is_that_kernel_ratio() -> None:
    """A user names the stack; the planner applies the fitted ratio (and Megatron's traffic)."""
    by_stack = errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, 1.0, stack="megatron_2024")
    by_option = errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, HOPPER_2024)
    assert by_stack == by_option
    assert by_stack != errors_percent(H100_BASE, H100_LLAMA2_7B_NEMO_2403, 1.0)


def test_llama3_rows_name_the_2024_megatron_stack() -> None:
    """Llama 3's rows (a 2024 H100 stack) name the stack, not a number of their own."""
    llama3 = [run for run_id, run in RUNS.items() if run_id.startswith("llama3-405b-")]
    assert len(llama3) == 3
    for run in llama3:
        assert run["training"]["software_stack"] == "megatron_2024"
        assert "attention_kernel_ratio" not in (run.get("planner_options") or {})
        assert "2024" in run["training"]["software_stack_why"]
