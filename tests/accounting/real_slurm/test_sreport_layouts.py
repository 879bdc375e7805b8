"""Every sreport layout a person prints, from the real Slurm, read back to the jobs' own figures.

The reports: cluster AccountUtilizationByUser and UserUtilizationByAccount over the
workload's accounts (checked against its jobs: cards asked for times seconds run, see
tests/support/sreport_runs.py), and cluster utilization (checked against what the nodes
declare and what
the per-account report of every account adds up to). The layouts: -P, -p (a trailing |),
-n (no banner, no header: the columns, unit and period are passed), the fixed-width table
(its cut values refused naming sreport's format= width, which then reads), every -t unit.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from accounting.parsing.errors import UsageValidationError
from accounting.parsing.layouts import SREPORT_PRESETS
from tests.support.slurm import MIG_CARD_SHARE
from tests.support.sreport_runs import (
    EVERY_GPU_TRES,
    FORMATS,
    GPU_TYPES,
    NODE_GPUS,
    SECONDS_PER,
    UNITS,
    bannerless_options,
    card_seconds,
    expected_card_seconds,
    follow_the_advice,
    parse,
    report_hours,
    retried,
    sreport,
)

TEAM_REPORTS = ("AccountUtilizationByUser", "UserUtilizationByAccount")
TRES = ("gres/gpu", *(f"gres/gpu:{kind}" for kind in GPU_TYPES))
# A column wide enough for every value of the test cluster (sreport cuts the rest with "+").
WIDE = {
    "AccountUtilizationByUser": "Cluster%20,Accounts%24,Login,Proper,TresName%20,Used%12",
    "UserUtilizationByAccount": "Cluster%20,Login,Proper,Accounts%24,TresName%20,Used%12",
}


def team_layout(workload, report: str, layout: str) -> tuple[str, dict]:
    """The text of ``report`` over the workload's accounts in ``layout``, and the reader's
    options for it."""
    if layout == "-P":
        return sreport(workload, report, "-P", teams=True), {}
    if layout == "-p":
        return sreport(workload, report, "-p", teams=True), {}
    if layout == "-P -n":
        text = sreport(workload, report, "-P", "-n", teams=True)
        columns = "Cluster,Account,Login,Proper Name,TRES Name,Used"
        if report == "UserUtilizationByAccount":
            columns = "Cluster,Login,Proper Name,Account,TRES Name,Used"
        return text, bannerless_options(workload, columns, "seconds")
    return sreport(workload, report, teams=True, fmt=WIDE[report]), {}


def assert_the_teams_own_card_seconds(used: dict, workload, slack_s: float = 1.0) -> None:
    """Each account's card-seconds per TRES within the jobs' own range (a MIG slice at its
    share of a card; ``slack_s``: sreport's rounding of each printed figure)."""
    for account in workload.accounts:
        for tres in TRES:
            low, high = expected_card_seconds(workload, account, tres)
            figure = used.get((account, tres), 0.0)
            assert low - slack_s <= figure <= high + slack_s, (account, tres, low, figure, high)


@pytest.mark.parametrize("report", TEAM_REPORTS)
@pytest.mark.parametrize("layout", ["-P", "-p", "-P -n", "fixed-width"])
def test_each_team_layout_gives_each_teams_own_card_seconds(slurm_workload, report, layout):
    text, options = team_layout(slurm_workload, report, layout)
    frame = parse(text, **options)
    assert set(frame["user"]) == {"root"}, "user lines only: account lines are tree sums"
    assert set(frame["account"]) <= set(slurm_workload.accounts)
    assert_the_teams_own_card_seconds(card_seconds(frame, "used_card_hours"), slurm_workload)


def test_a_slice_is_its_share_of_a_card_and_the_gpu_line_gives_it_back(slurm_workload):
    """Slurm counts the MIG slice as one gres/gpu; read with its typed line it is 1/7 card,
    and the gres/gpu line holds the typed lines' sum: every card-second counted once."""
    frame = parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P", teams=True))
    used = card_seconds(frame, "used_card_hours")
    for account in slurm_workload.accounts:
        typed = sum(used.get((account, f"gres/gpu:{kind}"), 0.0) for kind in GPU_TYPES)
        assert used[(account, "gres/gpu")] == pytest.approx(typed, abs=1e-6)
    (serving,) = {job.account for job in slurm_workload.jobs if "1g.10gb" in job.gpus}
    low, high = expected_card_seconds(slurm_workload, serving, "gres/gpu:1g.10gb")
    assert 0 < low <= used[(serving, "gres/gpu:1g.10gb")] <= high + 1
    assert high < 100 * MIG_CARD_SHARE["1g.10gb"] + 1  # not the slice's 60-100 GPU-seconds


def test_without_the_slice_line_the_gpu_line_keeps_slurms_count(slurm_workload):
    """-T gres/gpu alone: nothing says how many of its GPUs were slices."""
    text = sreport(slurm_workload, "AccountUtilizationByUser", "-P", tres="gres/gpu", teams=True)
    used = card_seconds(parse(text), "used_card_hours")
    for account in slurm_workload.accounts:
        low, high = expected_card_seconds(slurm_workload, account, slice_share={})
        assert low - 1 <= used.get((account, "gres/gpu"), 0.0) <= high + 1, account


def rounding_card_s(tres: str, unit_s: float) -> float:
    """How far a figure printed in whole units may be from its seconds: half a unit per
    printed figure, the gres/gpu line's slices taken off at 6/7 of theirs."""
    slice_share = MIG_CARD_SHARE["1g.10gb"]
    if tres == "gres/gpu":
        return unit_s / 2 * (1 + (1 - slice_share)) + 1
    return unit_s / 2 * (slice_share if tres.endswith("1g.10gb") else 1) + 1


@pytest.mark.parametrize("unit", [None, *UNITS])
def test_every_time_unit_reads_to_the_same_card_hours(slurm_workload, unit):
    """sreport rounds each figure to whole units (minutes without -t); -t hourper and its
    kind add "(12.06%)", which is left out."""
    in_seconds = card_seconds(
        parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P", teams=True)),
        "used_card_hours",
    )
    in_unit = card_seconds(
        parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P", teams=True, unit=unit)),
        "used_card_hours",
    )
    unit_s = SECONDS_PER[UNITS.get(unit or "minutes", "minutes")]
    assert set(in_unit) == set(in_seconds)
    for (account, tres), figure in in_seconds.items():
        assert in_unit[(account, tres)] == pytest.approx(
            figure, abs=rounding_card_s(tres, unit_s)
        ), (account, tres)


@pytest.mark.parametrize("report", ["utilization", "AccountUtilizationByUser"])
def test_a_percent_report_is_refused_naming_the_unit_to_use(slurm_workload, report):
    text = sreport(slurm_workload, report, "-P", unit="percent")
    assert "Percentage of Total" in text
    with pytest.raises(UsageValidationError, match="use -t hours"):
        parse(text)


def test_a_percent_report_without_its_banner_is_refused_too(slurm_workload):
    """-n leaves the banner (which says percent) out: the figures ("12.06%") still say it."""
    text = sreport(slurm_workload, "utilization", "-P", "-n", unit="percent")
    columns = ",".join(SREPORT_PRESETS["default"])
    with pytest.raises(UsageValidationError, match="unknown time unit.*-t hours"):
        parse(text, **{**bannerless_options(slurm_workload, columns, "hours"), "time_unit": None})
    with pytest.raises(UsageValidationError) as refused:
        parse(text, **bannerless_options(slurm_workload, columns, "hours"))
    first = refused.value.issues[0]
    assert first.line == 1 and "is a percentage" in first.reason and "-t hours" in first.reason


@pytest.mark.parametrize("report", ["utilization", *TEAM_REPORTS])
def test_sreports_default_widths_are_refused_naming_widths_that_read(slurm_workload, report):
    """The default table cuts the cluster's name (9 characters: "fleetwis+"), the slice's TRES
    name (14) and the accounts' (15): each refusal names sreport's format= field and a width,
    and the table printed with them reads to the -P figures."""
    teams = report != "utilization"
    default = sreport(slurm_workload, report, teams=teams)
    assert "fleetwis+" in default and "gres/gpu:1g.1+" in default
    text, advice = follow_the_advice(slurm_workload, report, teams=teams)
    assert {"Cluster%24", "TresName%30"} <= set(advice)
    assert all(name.split("%")[0] in FORMATS[report].split(",") for name in advice)
    figure = "allocated_card_hours" if report == "utilization" else "used_card_hours"
    by = "cluster" if report == "utilization" else "account"

    def reads_as_parsable() -> None:
        text, _ = follow_the_advice(slurm_workload, report, teams=teams)
        parsable = parse(sreport(slurm_workload, report, "-P", teams=teams))
        assert card_seconds(parse(text), figure, by) == card_seconds(parsable, figure, by)

    retried(reads_as_parsable)


def test_a_fixed_width_table_without_its_header_is_refused_naming_p(slurm_workload):
    """sreport -n without -P: no header and no dashed line, so no column has a place."""
    text = sreport(slurm_workload, "AccountUtilizationByUser", "-n", teams=True)
    options = bannerless_options(slurm_workload, FORMATS["AccountUtilizationByUser"], "seconds")
    with pytest.raises(UsageValidationError, match="without its header.*re-run with -P"):
        parse(text, **options)


def test_format_planned_is_refused_naming_reserved(slurm_workload):
    """sreport reads format=Planned as PlannedDown: a second PLND Down, and no Planned."""
    fmt = FORMATS["utilization"].replace("Reserved", "Planned")
    text = sreport(slurm_workload, "utilization", "-P", fmt=fmt)
    assert text.count("PLND Down") == 2
    with pytest.raises(UsageValidationError, match="ask for the Planned column as Reserved"):
        parse(text)


# -- cluster utilization ------------------------------------------------------------------------


def utilization(workload, *flags: str, **options) -> dict[str, dict[str, float]]:
    """Each TRES's figures in card-seconds: ``{tres: {allocated: …, reported: …}}``."""
    text = sreport(workload, "utilization", *flags)
    rows = parse(text, **options).set_index("tres_name")
    return {
        tres: {
            name.removesuffix("_card_hours"): float(row[name]) * 3600
            for name in rows.columns
            if name.endswith("_card_hours")
        }
        for tres, row in rows.iterrows()
    }


@pytest.mark.parametrize("layout", ["-P", "-p", "-P -n"])
def test_each_utilization_layout_reads_the_same(slurm_workload, layout):
    flags = layout.split()
    options = {}
    if "-n" in flags:
        columns = ",".join(SREPORT_PRESETS["default"])
        options = bannerless_options(slurm_workload, columns, "seconds")

    def reads_as_parsable() -> None:
        assert utilization(slurm_workload, *flags, **options) == utilization(slurm_workload, "-P")

    retried(reads_as_parsable)


def test_reported_is_the_nodes_cards_over_the_same_seconds_the_cluster_existed(slurm_workload):
    """Slurm's Reported is each TRES's count on the nodes times the seconds the cluster was
    registered in the period: one number of seconds for every TRES, at least since the
    workload's first job (it ran there) and at most the period."""
    start, end = report_hours(slurm_workload)
    rows = utilization(slurm_workload, "-P")
    cards = {f"gres/gpu:{kind}": n * MIG_CARD_SHARE.get(kind, 1.0) for kind, n in NODE_GPUS.items()}
    cards["gres/gpu"] = sum(cards.values())
    existed_s = rows["gres/gpu:h100"]["reported"] / cards["gres/gpu:h100"]
    first_job = datetime.fromisoformat(slurm_workload.started_at)
    assert (end - first_job).total_seconds() - 1 <= existed_s
    assert existed_s <= (end - start).total_seconds()
    for tres, count in cards.items():
        assert rows[tres]["reported"] == pytest.approx(count * existed_s, abs=1e-6), tres


def test_the_parts_add_up_to_reported(slurm_workload):
    for tres, row in utilization(slurm_workload, "-P").items():
        parts = ("allocated", "down", "planned_down", "idle", "planned")
        assert sum(row[part] for part in parts) == pytest.approx(row["reported"], abs=1), tres


def test_allocated_holds_the_workload_and_is_the_sum_of_every_accounts_lines(slurm_workload):
    """Allocated is every job's (other tests' too): at least the workload's, and what the
    per-account report of every account adds up to."""

    def adds_up() -> None:
        rows = utilization(slurm_workload, "-P")
        every_account = parse(sreport(slurm_workload, "AccountUtilizationByUser", "-P"))
        by_tres = every_account.groupby("tres_name")["used_card_hours"].sum() * 3600
        for tres in TRES:
            workload_low = sum(
                expected_card_seconds(slurm_workload, account, tres)[0]
                for account in slurm_workload.accounts
            )
            assert rows[tres]["allocated"] >= workload_low - 2, tres
            assert rows[tres]["allocated"] == pytest.approx(by_tres[tres], abs=1e-6), tres

    retried(adds_up)


def test_gpu02s_downtime_is_its_a100s_and_its_slices(slurm_workload):
    """The workload set gpu02 down (its node-failure job): both of its card types were down
    for the same seconds, and the untyped line has them (the slices at their share)."""
    rows = utilization(slurm_workload, "-P")
    down_s = rows["gres/gpu:a100"]["down"] / NODE_GPUS["a100"]
    slice_cards = NODE_GPUS["1g.10gb"] * MIG_CARD_SHARE["1g.10gb"]
    assert down_s > 0
    assert rows["gres/gpu:1g.10gb"]["down"] == pytest.approx(slice_cards * down_s, abs=1e-6)
    typed_down = sum(rows[f"gres/gpu:{kind}"]["down"] for kind in GPU_TYPES)
    assert rows["gres/gpu"]["down"] == pytest.approx(typed_down, abs=1e-6)


def test_the_report_period_is_the_rolled_hours(slurm_workload):
    start, end = report_hours(slurm_workload)
    frame = parse(sreport(slurm_workload, "utilization", "-P", tres=EVERY_GPU_TRES))
    assert set(frame["period_start"]) == {pd.Timestamp(start).tz_convert("UTC")}
    assert set(frame["period_end"]) == {pd.Timestamp(end).tz_convert("UTC")}
