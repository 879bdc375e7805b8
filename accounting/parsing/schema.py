"""The usage-record chunk every usage parser yields: column names, dtypes, job states.

One row is one job (or one accelerator kind of a job that held two kinds) on one cluster.
``record_key`` is unique per cluster and stable across re-imports, so the storage layer
upserts on ``(cluster, record_key)``.

Columns (dtype):
    cluster            str       cluster name
    job_id             str       scheduler job id (sacct: JobIDRaw, unique per cluster)
    job_label          str       job id as users see it (sacct JobID: ``123_4``, ``123+0``)
    parent_job_id      str       array/het parent (``123`` for ``123_4`` and ``123+0``)
    record_key         str       upsert key, unique per cluster (see each parser)
    account            str       account / team (NA when absent)
    user               str       user name (NA when absent)
    partition          str       partition (NA when absent)
    accelerator_model  str       catalog model (accelerators.csv ``model``), NA when unknown
    gres_type          str       gres type as written in the input (NA when untyped)
    mig_profile        str       MIG profile such as ``3g.20gb`` (NA unless MIG)
    cards              float64   cards held; fractional for MIG slices (3g -> 3/7)
    nodes              Int64     nodes held (NA when absent)
    node_list          str       Slurm NodeList, a hostlist like ``gpu[01-04]`` (NA when absent)
    submit             datetime64[us, UTC]  submit time (NaT when absent)
    start              datetime64[us, UTC]  start time
    end                datetime64[us, UTC]  end time; NaT while running
    duration_h         float64   wall hours held (running jobs: up to the export)
    card_hours         float64   cards * duration_h
    state              category  one of :data:`JOB_STATES`
    scheduler_state    str       the scheduler's word (``OUT_OF_MEMORY``, ``REQUEUED``, ...)
    gpu_utilization    float64   measured mean GPU utilization, fraction 0-1 (NaN if none)
    tokens_per_s       float64   measured training throughput of the job (NaN if none)
    model_params       float64   model parameter count N (NaN if none)
    mfu                float64   entered model-FLOPs utilization, fraction 0-1 (NaN if none)
    source_line        int64     1-based line (or sheet row) the record came from
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:  # pandas-stubs' name for the dtypes astype accepts
    from pandas._typing import AstypeArg

JOB_STATES: tuple[str, ...] = (
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "running",
)
JOB_STATE_DTYPE = pd.CategoricalDtype(categories=list(JOB_STATES), ordered=False)
# Figures beyond these are typos or garbage, not a job; they would also overflow the
# database's integer columns. Parsers reject them by line and column.
MAX_JOB_CARDS = 1_000_000
MAX_JOB_NODES = 1_000_000
# Card-hours of jobs ending in these states count as lost work (effective time).
LOST_WORK_STATES: tuple[str, ...] = ("failed", "node_fail", "preempted")

# Scheduler state word (upper case, first token) -> usage state. Words mapped to None never
# held cards (pending) and are skipped; any word missing here is a validation error.
SCHEDULER_STATES: dict[str, str | None] = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "SPECIAL_EXIT": "failed",
    "CANCELLED": "cancelled",
    "CANCELED": "cancelled",
    "REVOKED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "NODE_FAIL": "node_fail",
    # Launch failure on a node: a hardware fault, like NODE_FAIL.
    "BOOT_FAIL": "node_fail",
    "PREEMPTED": "preempted",
    # An earlier run of a requeued job (sacct --duplicates): its work was thrown away.
    "REQUEUED": "preempted",
    "REQUEUE_FED": "preempted",
    "REQUEUE_HOLD": "preempted",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "RESIZING": "running",
    "STOPPED": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "PENDING": None,
}

USAGE_DTYPES: dict[str, AstypeArg] = {
    "cluster": "str",
    "job_id": "str",
    "job_label": "str",
    "parent_job_id": "str",
    "record_key": "str",
    "account": "str",
    "user": "str",
    "partition": "str",
    "accelerator_model": "str",
    "gres_type": "str",
    "mig_profile": "str",
    "cards": "float64",
    "nodes": "Int64",
    "node_list": "str",
    "submit": "datetime64[us, UTC]",
    "start": "datetime64[us, UTC]",
    "end": "datetime64[us, UTC]",
    "duration_h": "float64",
    "card_hours": "float64",
    "state": JOB_STATE_DTYPE,
    "scheduler_state": "str",
    "gpu_utilization": "float64",
    "tokens_per_s": "float64",
    "model_params": "float64",
    "mfu": "float64",
    "source_line": "int64",
}
USAGE_COLUMNS: tuple[str, ...] = tuple(USAGE_DTYPES)


def empty_usage_frame() -> pd.DataFrame:
    """A zero-row usage chunk with the documented dtypes."""
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in USAGE_DTYPES.items()})


def conform_usage_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Order and cast columns to :data:`USAGE_DTYPES`; missing columns become all-NA."""
    length = len(frame)
    columns: dict[str, pd.Series] = {}
    for name, dtype in USAGE_DTYPES.items():
        if name in frame:
            columns[name] = frame[name].astype(dtype)
        else:
            columns[name] = pd.Series([None] * length, index=frame.index).astype(dtype)
    return pd.DataFrame(columns, index=frame.index).reset_index(drop=True)
