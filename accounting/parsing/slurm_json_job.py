"""One Slurm JSON job record -> one row of sacct's columns (accounting.parsing.slurm_json).

Reads both shapes of each field: data_parser v0.0.38's plain numbers and strings, and the
later ``{"set", "infinite", "number"}`` numbers and ``state.current`` lists.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from accounting.parsing.errors import IssueCollector
from accounting.parsing.fields import LATEST_TIME, SLURM_TIME_FORMAT
from accounting.parsing.sacct import SacctStats
from accounting.parsing.schema import SCHEDULER_STATES

# Slurm's job_state_string(): these flags are printed instead of the base state, in this order
# (only the ones with a usage state; CONFIGURING and the like fall back to the base state).
STATE_FLAG_ORDER: tuple[str, ...] = tuple(
    word
    for word in (
        "COMPLETING",
        "STAGE_OUT",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SPECIAL_EXIT",
        "STOPPED",
        "REVOKED",
        "SIGNALING",
    )
    if word in SCHEDULER_STATES
)
LATEST_EPOCH_S = int((LATEST_TIME - pd.Timestamp("1970-01-01")).total_seconds())
FRAME_COLUMNS: tuple[str, ...] = (
    "jobid",
    "jobidraw",
    "cluster",
    "partition",
    "account",
    "user",
    "submit",
    "start",
    "end",
    "elapsedraw",
    "state",
    "nnodes",
    "alloctres",
    "nodelist",
    "source_line",
)
_TIME_FIELDS = ("submission", "start", "end")


# -- one job record -> one row of sacct's columns ------------------------------------------------


class _Bad:
    """A value that is not of the field's type (the reason is said by the caller)."""


BAD = _Bad()


def _whole(value: Any) -> int | None | _Bad:
    """A whole number, plain or ``{"set", "infinite", "number"}`` (unset or infinite: None)."""
    if isinstance(value, dict) and "number" in value:
        if value.get("set") is False or value.get("infinite") is True:
            return None
        value = value["number"]
    if value is None:
        return None
    if isinstance(value, bool):
        return BAD
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return BAD


def _text(value: Any) -> str | _Bad:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")  # no database text holds NUL
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return BAD


def _state_word(value: Any) -> str | _Bad:
    """``"COMPLETED"`` (dbv0.0.38) or ``["PENDING", "REQUEUED"]`` (v0.0.40+) -> the word
    sacct's text prints: a flag Slurm prints before the base state, else the base state."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
        words = [word.upper() for word in value]
        return next((flag for flag in STATE_FLAG_ORDER if flag in words), words[0])
    return BAD


def _gpu_tres(value: Any) -> str | _Bad:
    """``tres.allocated`` -> its GPU entries as AllocTRES text (``gres/gpu:h100=2,...``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return BAD
    entries = []
    for entry in value:
        if not isinstance(entry, dict):
            return BAD
        name = entry.get("name")
        if entry.get("type") != "gres" or not isinstance(name, str):
            continue
        if name != "gpu" and not name.startswith("gpu:"):
            continue
        count = _whole(entry.get("count"))
        shown = str(count) if isinstance(count, int) else _shown(entry.get("count"))
        # Slurm's gres names hold neither; kept out so the AllocTRES reader sees one entry.
        entries.append(f"gres/{name.replace(',', ';').replace('=', ':')}={shown}")
    return ",".join(entries)


@dataclasses.dataclass
class _Job:
    """Reads the fields of one record; a field of the wrong type is an issue at its line."""

    record: dict[str, Any]
    line: int
    issues: IssueCollector
    ok: bool = True

    def node(self, path: str) -> Any:
        value: Any = self.record
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def whole(self, path: str, *, minimum: int = 0) -> int | None:
        value = _whole(self.node(path))
        if isinstance(value, _Bad) or (value is not None and value < minimum):
            self.problem(path, f"{_shown(self.node(path))} is not a whole number (>= {minimum})")
            return None
        return value

    def text(self, *paths: str) -> str:
        """The first of ``paths`` that holds text ("" when none does)."""
        for path in paths:
            value = _text(self.node(path))
            if isinstance(value, _Bad):
                self.problem(path, f"{_shown(self.node(path))} is not text")
                return ""
            if value:
                return value
        return ""

    def epoch(self, key: str) -> int | None:
        """``time.<key>`` in Unix seconds; 0 and unset mean no time (Slurm's Unknown)."""
        seconds = self.whole(f"time.{key}")
        if seconds is not None and seconds > LATEST_EPOCH_S:
            self.problem(f"time.{key}", f"{seconds} is not a time (Unix seconds before 2200)")
            return None
        return seconds or None

    def problem(self, path: str, reason: str) -> None:
        self.ok = False
        self.issues.add(self.line, path, reason)


def _shown(value: Any) -> str:
    return repr(value)[:80]


def job_row(record: Any, line: int, issues: IssueCollector, stats: SacctStats) -> list[Any] | None:
    """The record as the allocation line sacct would print (None when it is malformed)."""
    if not isinstance(record, dict):
        issues.add(line, "jobs", f"a job record is not a JSON object ({_shown(record)})")
        return None
    job = _Job(record, line, issues)
    job_id = job.whole("job_id")
    if job_id is None and job.ok:
        job.problem("job_id", "missing: every job record has one")
    label = str(job_id)
    array_job, het_job = job.whole("array.job_id"), job.whole("het.job_id")
    if array_job:
        task = job.whole("array.task_id")
        # A pending array's own record (no task id) reads "123_[0-9]", as sacct prints it.
        tasks = str(task) if task is not None else f"[{job.text('array.task')}]"
        label = f"{array_job}_{tasks}"
    elif het_job:
        offset = job.whole("het.job_offset")
        label = f"{het_job}+{offset}" if offset is not None else label
    state = _state_word(job.node("state.current"))
    if isinstance(state, _Bad):
        job.problem("state.current", f"{_shown(job.node('state.current'))} is not a job state")
    tres = _gpu_tres(job.node("tres.allocated"))
    if isinstance(tres, _Bad):
        job.problem("tres.allocated", "not a list of TRES entries (type, name, count)")
    submit, start, end = (job.epoch(key) for key in _TIME_FIELDS)
    elapsed = job.whole("time.elapsed")
    nodes = job.whole("allocation_nodes")
    row = [
        label,
        str(job_id),
        job.text("cluster", "association.cluster"),
        job.text("partition"),
        job.text("account", "association.account"),
        job.text("user", "association.user"),
        submit,
        start,
        end,
        "" if elapsed is None else str(elapsed),
        state,
        "" if nodes is None else str(nodes),
        tres,
        job.text("nodes"),
        line,
    ]
    steps = record.get("steps")
    stats.step_lines += len(steps) if isinstance(steps, list) else 0
    return row if job.ok else None


def _local_text(seconds: pd.Series, timezone: str) -> pd.Series:
    """Unix seconds -> wall-clock text in ``timezone`` as sacct prints it; None -> Unknown."""
    present = seconds.notna().to_numpy()
    text = pd.Series("Unknown", index=seconds.index, dtype="str")
    if present.any():
        stamps = pd.to_datetime(seconds[present].astype("int64"), unit="s", utc=True)
        if timezone.upper() != "UTC":
            stamps = stamps.dt.tz_convert(timezone)
        text[present] = stamps.dt.strftime(SLURM_TIME_FORMAT)
    return text


def rows_frame(rows: list[list[Any]], timezone: str) -> pd.DataFrame:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FRAME_COLUMNS)
    frame = pd.DataFrame(
        {
            name: pd.Series(values, dtype="object")
            for name, values in zip(FRAME_COLUMNS, columns, strict=True)
        }
    )
    for name in ("submit", "start", "end"):
        frame[name] = _local_text(frame[name], timezone)
    for name in FRAME_COLUMNS:
        if name not in ("submit", "start", "end", "source_line"):
            frame[name] = frame[name].astype("str")
    frame["source_line"] = frame["source_line"].astype("int64")
    frame["_group"] = np.arange(len(frame), dtype="int64")
    return frame
