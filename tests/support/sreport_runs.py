"""sreport over the shared workload's hours, and the figures its jobs give by their own record.

sreport reads slurmdbd's hourly rollups; the workload's hours are rolled once it has run
(`test-cluster roll-usage`, tests/support/slurm.py). The workload's accounts are its own, so a
per-account report holds only its jobs: each job's cards times how long it ran by the
submitting clock, the requeued job's first run, and the running job up to the end of the
rolled hours. Fleetwise counts a MIG slice as its share of a card (1g.10gb: 1/7), where Slurm
counts it as one GPU.
"""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

import pandas as pd

from accounting.parsing import read_sreport
from tests.support.slurm import MIG_CARD_SHARE, Workload, slurm

# What the test cluster's nodes declare (platform/slurm/test-cluster): gpu01 gpu:h100:8,
# gpu02 gpu:a100:8 and gpu:1g.10gb:4.
NODE_GPUS = {"h100": 8, "a100": 8, "1g.10gb": 4}
GPU_TYPES = tuple(NODE_GPUS)
EVERY_GPU_TRES = ",".join(["gres/gpu", *(f"gres/gpu:{kind}" for kind in GPU_TYPES)])
# sreport's format= names (not the header's words: "TRES Name" is TresName, and Planned must be
# asked for as Reserved: format=Planned prints a second PLND Down).
FORMATS = {
    "utilization": "Cluster,TresName,Allocated,Down,PlannedDown,Idle,Reserved,Reported",
    "AccountUtilizationByUser": "Cluster,Accounts,Login,Proper,TresName,Used",
    "UserUtilizationByAccount": "Cluster,Login,Proper,Accounts,TresName,Used",
}
SECONDS_PER = {"seconds": 1, "minutes": 60, "hours": 3600}
# -t names sreport takes, and the unit each prints its figures in.
UNITS = {
    "seconds": "seconds",
    "minutes": "minutes",
    "hours": "hours",
    "secper": "seconds",
    "minper": "minutes",
    "hourper": "hours",
}
# Seconds past a report's end that sreport's clock is set to when the end is still ahead.
CLOCK_MARGIN_S = 120
ADVICE_RE = re.compile(r"format=\.\.\.,(?P<name>\w+)%(?P<width>\d+)")


def report_hours(workload: Workload) -> tuple[datetime, datetime]:
    """Whole hours from the workload's first to the end of its last (all rolled up)."""
    start = datetime.fromisoformat(workload.started_at).replace(minute=0, second=0)
    end = datetime.fromisoformat(workload.finished_at).replace(minute=0, second=0)
    return start, end + timedelta(hours=1)


def sreport(
    workload: Workload,
    report: str,
    *flags: str,
    unit: str | None = "seconds",
    tres: str = EVERY_GPU_TRES,
    teams: bool = False,
    fmt: str | None = None,
) -> str:
    """``sreport FLAGS [-t unit] -T tres cluster REPORT start=… end=… [accounts=…] [format=…]``
    over the workload's hours; ``unit=None`` is sreport's default (minutes); ``teams``: only
    the workload's accounts."""
    start, end = report_hours(workload)
    args = [*flags, *(["-t", unit] if unit else []), "-T", tres, "cluster", report]
    args += [f"start={start:%Y-%m-%dT%H:%M:%S}", f"end={end:%Y-%m-%dT%H:%M:%S}"]
    if teams:
        args.append(f"accounts={','.join(workload.accounts)}")
    if fmt:
        args.append(f"format={fmt}")
    return slurm(*clock_past(end), "sreport", *args)


def clock_past(end: datetime) -> list[str]:
    """sreport ends a period at the start of its clock's hour at the latest: a workload that ran
    into a new hour is reported as it will be once that hour is over (its hours are rolled
    already, under libfaketime's clock moved the same way: test-cluster roll-usage)."""
    ahead_s = int((end - datetime.now(UTC)).total_seconds()) + CLOCK_MARGIN_S
    return ["faketime", "-f", f"+{ahead_s}s"] if ahead_s > 0 else []


def parse(text: str, **options) -> pd.DataFrame:
    return read_sreport(io.BytesIO(text.encode()), **options)


def bannerless_options(workload: Workload, columns: str, unit: str) -> dict:
    """What ``-n`` output needs to be read: its columns, its unit and its period."""
    start, end = report_hours(workload)
    return {
        "columns": [name.strip() for name in columns.split(",")],
        "time_unit": unit,
        "period_start": start,
        "period_end": end,
    }


def card_seconds(frame: pd.DataFrame, figure: str, by: str = "account") -> dict:
    """``{(by value, tres_name): card-seconds}`` summed over the frame's rows."""
    sums = frame.groupby([by, "tres_name"])[figure].sum() * 3600
    return {key: float(value) for key, value in sums.items()}


def job_weight(gpus: dict[str, int], tres: str, slice_share: dict[str, float]) -> float:
    """Cards of a job counted in ``tres`` (``gres/gpu`` or ``gres/gpu:TYPE``)."""
    kind = tres.removeprefix("gres/gpu").removeprefix(":")
    return sum(n * slice_share.get(k, 1.0) for k, n in gpus.items() if kind in ("", k))


def expected_card_seconds(
    workload: Workload,
    account: str,
    tres: str = "gres/gpu",
    slice_share: dict[str, float] = MIG_CARD_SHARE,
) -> tuple[float, float]:
    """The account's card-seconds in ``tres`` by the workload's own record: (low, high).

    ``slice_share``: what a MIG slice counts as; ``{}`` for Slurm's own count (one GPU), which
    an untyped gres/gpu line keeps when the report has no line of the slice type.
    """
    _, end = report_hours(workload)
    low = high = 0.0
    for job in workload.jobs:
        if job.account != account:
            continue
        cards = job_weight(job.gpus, tres, slice_share)
        if job.state == "running":
            started_low, started_high = workload.running_started
            low += cards * (end.timestamp() - started_high)
            high += cards * (end.timestamp() - started_low)
            continue
        low += cards * max(job.min_s - 1, 0)  # Slurm counts whole seconds
        high += cards * (job.max_s + 1)
        if job.label == workload.requeued_job_id:  # and its first run, before the requeue
            first_low, first_high = workload.requeued_first_run_s
            low += cards * max(first_low - 1, 0)
            high += cards * (first_high + 1)
    return low, high


def follow_the_advice(workload: Workload, report: str, **options) -> tuple[str, list[str]]:
    """The fixed-width table as sreport prints it, re-run with the widths each refusal names
    until it reads; the readable text and the advice taken."""
    from accounting.parsing.errors import UsageValidationError

    widths: dict[str, str] = {}
    taken: list[str] = []
    fmt = None
    for _ in range(4):
        text = sreport(workload, report, fmt=fmt, **options)
        try:
            parse(text)
            return text, taken
        except UsageValidationError as refused:
            advice = {m["name"]: m["width"] for m in ADVICE_RE.finditer(str(refused))}
            if not advice or advice.items() <= widths.items():
                raise
            taken += [f"{name}%{width}" for name, width in advice.items() if name not in widths]
            widths.update(advice)
        fmt = ",".join(
            f"{name}%{widths[name]}" if name in widths else name
            for name in FORMATS[report].split(",")
        )
    raise AssertionError(f"still refused after {taken}")


def retried(check, attempts: int = 3) -> None:
    """Run ``check`` (which runs sreport more than once and compares) until it passes.

    Other tests' jobs started in the rolled hours make slurmdbd roll them again at its next
    hourly run: a cluster-wide figure may change between two sreport runs, never for long.
    """
    for attempt in range(attempts):
        try:
            check()
            return
        except AssertionError:
            if attempt == attempts - 1:
                raise
