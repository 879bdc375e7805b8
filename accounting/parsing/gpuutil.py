"""GPU utilization of a job from ``gres/gpuutil`` in its steps' TRES usage.

Slurm (acct_gather_gpu, NVML/RSMI) records ``gres/gpuutil`` per step, in percent:

* Since 24.05.1 it is the **sum over the step's GPUs** (8 busy GPUs print up to 800), so the
  per-card figure is the value divided by the GPUs the step held.
* Before 24.05.1 only one GPU per node was tracked: the value is that GPU's own percentage,
  a sample of one card, and dividing it by the GPU count under-reads it. Pass
  ``summed=False`` for such files.

Sites export it in ``TRESUsageInAve`` (the average over the step's tasks) or
``TRESUsageInTot`` (the total over its tasks); the first of :data:`GPUUTIL_COLUMNS` present is
read. A job's figure is the elapsed-weighted mean over its non-extern steps, capped at 100 %.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accounting.parsing.fields import number_after
from accounting.parsing.gres import gpu_entry_table

GPUUTIL_COLUMNS: tuple[str, ...] = ("tresusageinave", "tresusageintot")


def step_gpu_utilization(
    frame: pd.DataFrame,
    is_step: np.ndarray,
    step_name: np.ndarray,
    group: np.ndarray,
    elapsed_h: np.ndarray,
    summed: bool = True,
) -> np.ndarray:
    """Elapsed-weighted mean per-card utilization (fraction), indexed by allocation group.

    ``summed``: the value is a sum over the step's GPUs (Slurm >= 24.05.1, the default).
    """
    groups = int(group.max()) + 1 if len(group) else 1
    usage_column = next((c for c in GPUUTIL_COLUMNS if c in frame), None)
    if usage_column is None:
        return np.full(groups, np.nan)
    summed_pct = number_after(frame[usage_column], "gres/gpuutil=")
    summed_pct[step_name == "extern"] = np.nan  # extern only holds the allocation
    if not np.isfinite(summed_pct).any():
        return np.full(groups, np.nan)
    # GPUs of each line from its own AllocTRES (few distinct strings), else the job's.
    tres_codes, gpu_table, _ = gpu_entry_table(frame["alloctres"])
    gpus_per_code = np.bincount(
        gpu_table["_tres_code"], weights=gpu_table["_raw_count"], minlength=tres_codes.max() + 1
    )
    line_gpus = gpus_per_code[tres_codes]
    job_gpus = np.zeros(groups)
    job_gpus[group[~is_step]] = line_gpus[~is_step]
    gpus = np.where(line_gpus > 0, line_gpus, job_gpus[group])
    with np.errstate(divide="ignore", invalid="ignore"):
        per_card = np.minimum(summed_pct / (gpus if summed else 1.0) / 100.0, 1.0)
    measured = np.isfinite(per_card)
    # The tiny floor keeps zero-length steps when they are all there is.
    weight = np.where(measured, np.nan_to_num(elapsed_h) + 1e-9, 0.0)
    weighted = np.bincount(
        group, weights=np.where(measured, per_card, 0.0) * weight, minlength=groups
    )
    total_weight = np.bincount(group, weights=weight, minlength=groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total_weight > 0, weighted / total_weight, np.nan)
