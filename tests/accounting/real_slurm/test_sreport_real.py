"""sreport from a real Slurm, read back to the workload's own figures (tests/support/slurm.py).

sreport reads slurmdbd's hourly rollups; the workload's hours are rolled once it has run
(`test-cluster roll-usage`). Per account, a report holds only the workload's jobs (its
accounts are its own): each job's GPUs as Slurm counts them (a MIG slice is one gres/gpu)
times how long it ran, the requeued job's first run, and the running job up to the end of
the rolled hours. The cluster report's Reported is the cards the nodes declare (8 H100 on
gpu01; 8 A100 and 4 MIG slices on gpu02) times the hours.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from accounting.parsing import read_sreport
from accounting.parsing.errors import UsageValidationError
from tests.support.slurm import Workload, slurm

NODE_GPUS = {"h100": 8, "a100": 8, "1g.10gb": 4}
FIXED_WIDTHS = "format=Cluster%16,Account%24,Login%8,Proper%8,TresName%16,Used%12"
SECONDS_PER = {"seconds": 1, "minutes": 60, "hours": 3600}


def report_hours(workload: Workload) -> tuple[datetime, datetime]:
    """Whole hours from the workload's first to the end of its last (all rolled up)."""
    start = datetime.fromisoformat(workload.started_at).replace(minute=0, second=0)
    end = datetime.fromisoformat(workload.finished_at).replace(minute=0, second=0)
    return start, end + timedelta(hours=1)


def sreport(
    workload: Workload, report: str, *options: str, unit: str = "seconds", teams: bool = False
) -> str:
    """``sreport [options] -t unit cluster report start=… end=…`` over the workload's hours;
    ``teams``: only the workload's accounts."""
    start, end = report_hours(workload)
    keywords = [f"start={start:%Y-%m-%dT%H:%M:%S}", f"end={end:%Y-%m-%dT%H:%M:%S}"]
    if teams:
        keywords.append(f"accounts={','.join(workload.accounts)}")
    formats = [option for option in options if option.startswith("format=")]
    flags = [option for option in options if not option.startswith("format=")]
    return slurm("sreport", *flags, "-t", unit, "cluster", report, *keywords, *formats)


def expected_seconds(
    workload: Workload, account: str, gres_type: str | None
) -> tuple[float, float]:
    """The account's GPU-seconds by the workload's own record: (low, high)."""
    low = high = 0.0
    for job in workload.jobs:
        if job.account != account:
            continue
        cards = sum(n for kind, n in job.gpus.items() if gres_type in (None, kind))
        if job.state == "running":
            _, end = report_hours(workload)
            started_low, started_high = workload.running_started
            low += cards * (end.timestamp() - started_high)
            high += cards * (end.timestamp() - started_low)
            continue
        low += cards * max(job.min_s - 1, 0)  # Slurm counts whole seconds
        high += cards * (job.max_s + 1)
    requeued = next(job for job in workload.jobs if job.label == workload.requeued_job_id)
    if requeued.account == account and gres_type in (None, *requeued.gpus):
        first_low, first_high = workload.requeued_first_run_s
        low += max(first_low - 1, 0)
        high += first_high + 1
    return low, high


def parse(text: str) -> pd.DataFrame:
    return read_sreport(io.BytesIO(text.encode()))


def used_by_account(frame: pd.DataFrame, tres: str) -> dict[str, float]:
    rows = frame[frame["tres_name"] == tres]
    return rows.groupby("account")["used_card_hours"].sum().to_dict()


@pytest.mark.parametrize("layout", ["-P", "fixed-width"])
def test_account_report_gives_each_teams_own_gpu_seconds(slurm_workload, layout):
    # Fixed width: sreport's default widths cut the cluster's name (9 characters), so the
    # widths are given, as the refusal of a cut table says to.
    args = ["-P"] if layout == "-P" else [FIXED_WIDTHS]
    text = sreport(
        slurm_workload, "AccountUtilizationByUser", *args,
        "-T", "gres/gpu,gres/gpu:h100,gres/gpu:a100", teams=True
    )  # fmt: skip
    frame = parse(text)
    for tres, gres_type in (
        ("gres/gpu", None),
        ("gres/gpu:h100", "h100"),
        ("gres/gpu:a100", "a100"),
    ):
        used = used_by_account(frame, tres)
        for account in slurm_workload.accounts:
            low, high = expected_seconds(slurm_workload, account, gres_type)
            assert low <= used.get(account, 0.0) * 3600 <= high, (tres, account, low, high)


def test_user_report_by_account_gives_the_same_team_figures(slurm_workload):
    """``cluster UserUtilizationByAccount``: user lines only, Login before Account."""
    options = ("-P", "-T", "gres/gpu")
    by_account = sreport(slurm_workload, "AccountUtilizationByUser", *options, teams=True)
    by_user = sreport(slurm_workload, "UserUtilizationByAccount", *options, teams=True)
    assert used_by_account(parse(by_user), "gres/gpu") == used_by_account(
        parse(by_account), "gres/gpu"
    )


@pytest.mark.parametrize("unit", ["seconds", "minutes", "hours"])
def test_every_time_unit_reads_to_the_same_card_hours(slurm_workload, unit):
    """sreport prints whole units: each figure is within half a unit of the seconds."""
    in_seconds = used_by_account(
        parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P", "-T", "gres/gpu",
                      teams=True)),
        "gres/gpu",
    )  # fmt: skip
    in_unit = used_by_account(
        parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P", "-T", "gres/gpu",
                      teams=True, unit=unit)),
        "gres/gpu",
    )  # fmt: skip
    half_unit_h = SECONDS_PER[unit] / 2 / 3600
    for account, card_hours in in_seconds.items():
        assert in_unit.get(account, 0.0) == pytest.approx(card_hours, abs=half_unit_h + 1e-9)


def test_cluster_report_declares_the_nodes_cards_and_holds_the_workload(slurm_workload):
    start, end = report_hours(slurm_workload)
    hours = (end - start).total_seconds() / 3600
    text = sreport(
        slurm_workload, "utilization", "-P",
        "-T", "gres/gpu,gres/gpu:h100,gres/gpu:a100,gres/gpu:1g.10gb",
    )  # fmt: skip
    rows = parse(text).set_index("tres_name")
    # Reported: the declared cards times the seconds the cluster existed in the period (a
    # fresh cluster counts from its registration), one span for every type.
    spans_h = {
        gres_type: rows.loc[f"gres/gpu:{gres_type}", "reported_card_hours"] / cards
        for gres_type, cards in NODE_GPUS.items()
    }
    span_h = spans_h["h100"]
    since_workload_s = (end - datetime.fromisoformat(slurm_workload.started_at)).total_seconds()
    assert since_workload_s / 3600 - 0.01 <= span_h <= hours + 0.01
    assert all(value == pytest.approx(span_h, abs=0.01) for value in spans_h.values())
    assert rows.loc["gres/gpu", "reported_card_hours"] == pytest.approx(
        sum(NODE_GPUS.values()) * span_h, abs=0.05
    )
    workload_low = sum(
        expected_seconds(slurm_workload, a, None)[0] for a in slurm_workload.accounts
    )
    allocated = rows.loc["gres/gpu", "allocated_card_hours"]
    assert allocated * 3600 >= workload_low - 1  # other tests' jobs may add to it
    parts = ["allocated", "down", "planned_down", "idle", "planned"]
    assert sum(rows.loc["gres/gpu", f"{p}_card_hours"] for p in parts) == pytest.approx(
        rows.loc["gres/gpu", "reported_card_hours"], abs=0.01
    )


def test_a_percent_report_is_refused_naming_the_unit_to_use(slurm_workload):
    text = sreport(slurm_workload, "utilization", "-P", "-T", "gres/gpu", unit="percent")
    with pytest.raises(UsageValidationError, match="-t hours"):
        parse(text)


def test_a_fixed_width_report_with_a_cut_value_is_refused_naming_the_width(slurm_workload):
    """sreport's default widths cut the cluster's name (9 characters) and gres/gpu:1g.10gb
    (TRES Name, 14)."""
    text = sreport(slurm_workload, "utilization", "-T", "gres/gpu:1g.10gb")
    assert "fleetwis+" in text and "gres/gpu:1g.1+" in text
    with pytest.raises(UsageValidationError) as refused:
        parse(text)
    assert "Cluster%" in str(refused.value)


def test_the_report_period_is_the_rolled_hours(slurm_workload):
    start, end = report_hours(slurm_workload)
    frame = parse(sreport(slurm_workload, "utilization", "-P", "-T", "gres/gpu"))
    assert frame["period_start"].iloc[0] == pd.Timestamp(start).tz_convert(UTC)
    assert frame["period_end"].iloc[0] == pd.Timestamp(end).tz_convert(UTC)
