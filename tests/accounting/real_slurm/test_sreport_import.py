"""The real Slurm's sreport through ``manage.py import_usage --kind sreport`` into the database,
checked against the jobs' own figures (tests/support/sreport_runs.py) and the test cluster's
inventory.

The inventory is the test cluster as a manager enters it (tests/support/slurm.py): gpu01 with
8 H100 SXM5 80GB and gpu02 with 8 A100 SXM4 40GB, commissioned the day before the workload.
gpu02's 4 MIG slices (gres type 1g.10gb, an alias of the A100) are not cards of their own:
each counts as 1/7 of an A100, so the cluster's 8 H100 + 8 A100 + 4 slices are 16.57 cards'
worth, within the 5% the import allows above the inventory's 16.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from accounting.models import ImportJob, SreportUtilization, UsageRecord
from accounting.parsing.layouts import SREPORT_PRESETS
from core.jobs.status import JobStatus
from tests.support.slurm import CLUSTER_NAME, MIG_CARD_SHARE, inventory_of_the_test_cluster
from tests.support.sreport_runs import (
    FORMATS,
    GPU_TYPES,
    NODE_GPUS,
    SECONDS_PER,
    UNITS,
    expected_card_seconds,
    report_hours,
    retried,
    sreport,
)

pytestmark = pytest.mark.django_db
_files = itertools.count()
MODELS = {"h100": "H100 SXM5 80GB", "a100": "A100 SXM4 40GB", "1g.10gb": "A100 SXM4 40GB"}
WIDE_TEAMS = "Cluster%20,Accounts%24,Login,Proper,TresName%20,Used%12"


@pytest.fixture
def test_cluster(slurm_workload):
    return inventory_of_the_test_cluster()


def import_report(tmp_path, text: str, *options: str) -> ImportJob:
    """``manage.py import_usage FILE --kind sreport --cluster fleetwise-test OPTIONS``."""
    path = tmp_path / f"sreport-{next(_files)}.txt"
    path.write_text(text)
    call_command(
        "import_usage", str(path), "--kind", "sreport", "--cluster", CLUSTER_NAME,
        "--no-progress", *options,
    )  # fmt: skip
    return ImportJob.objects.latest("pk")


def period_options(workload) -> list[str]:
    start, end = report_hours(workload)
    return ["--period-start", start.isoformat(), "--period-end", end.isoformat()]


def team_text(workload, layout: str, unit: str | None = "seconds") -> tuple[str, list[str]]:
    """The workload's accounts' AccountUtilizationByUser (or UserUtilizationByAccount) in
    ``layout``, and the command's options for it."""
    if layout == "-P":
        return sreport(workload, "AccountUtilizationByUser", "-P", teams=True, unit=unit), []
    if layout == "UserUtilizationByAccount -p":
        return sreport(workload, "UserUtilizationByAccount", "-p", teams=True, unit=unit), []
    if layout == "fixed-width":
        text = sreport(workload, "AccountUtilizationByUser", teams=True, fmt=WIDE_TEAMS, unit=unit)
        return text, []
    text = sreport(workload, "AccountUtilizationByUser", "-P", "-n", teams=True, unit=unit)
    options = ["--columns-preset", "account-by-user", "--time-unit", unit or "minutes"]
    return text, options + period_options(workload)


def stored_card_seconds(cluster) -> dict[tuple[str, str], float]:
    """``{(account, accelerator model): card-seconds}`` of the stored usage records."""
    sums: dict[tuple[str, str], float] = defaultdict(float)
    for record in UsageRecord.objects.filter(cluster=cluster).select_related("accelerator"):
        model = record.accelerator.name if record.accelerator else ""
        sums[(record.account, model)] += record.card_hours * 3600
    return dict(sums)


def expected_by_model(workload, account: str) -> dict[str, tuple[float, float]]:
    """The account's card-seconds per catalog model: H100, and A100 with the slices' share."""
    ranges: dict[str, tuple[float, float]] = {}
    for kind in GPU_TYPES:
        low, high = expected_card_seconds(workload, account, f"gres/gpu:{kind}")
        before = ranges.get(MODELS[kind], (0.0, 0.0))
        ranges[MODELS[kind]] = (before[0] + low, before[1] + high)
    return ranges


@pytest.mark.parametrize("layout", ["-P", "UserUtilizationByAccount -p", "fixed-width", "-P -n"])
def test_a_team_report_is_stored_as_each_teams_own_card_hours(
    slurm_workload, test_cluster, tmp_path, layout
):
    text, options = team_text(slurm_workload, layout)
    job = import_report(tmp_path, text, *options)
    assert job.status == JobStatus.SUCCEEDED
    start, end = report_hours(slurm_workload)
    records = UsageRecord.objects.filter(cluster=test_cluster)
    assert records.exists()
    for record in records.select_related("accelerator"):
        assert (record.account in slurm_workload.accounts, record.user) == (True, "root")
        assert (record.start, record.end) == (start, end)
        # Every card-second is in a typed line: no untyped remainder without a card model.
        assert record.accelerator is not None, record.record_key
        assert record.cards == pytest.approx(record.card_hours / record.duration_h)
    stored = stored_card_seconds(test_cluster)
    for account in slurm_workload.accounts:
        low, high = expected_card_seconds(slurm_workload, account)
        total = sum(seconds for (team, _), seconds in stored.items() if team == account)
        assert low - 1 <= total <= high + 1, (account, low, total, high)
        for model, (low, high) in expected_by_model(slurm_workload, account).items():
            figure = stored.get((account, model), 0.0)
            assert low - 2 <= figure <= high + 2, (account, model, low, figure, high)


def test_a_slice_is_stored_as_its_share_of_an_a100(slurm_workload, test_cluster, tmp_path):
    text, _ = team_text(slurm_workload, "-P")
    import_report(tmp_path, text)
    (slice_job,) = [job for job in slurm_workload.jobs if "1g.10gb" in job.gpus]
    record = UsageRecord.objects.get(cluster=test_cluster, gres_type="1g.10gb")
    assert (record.account, record.mig_profile) == (slice_job.account, "1g.10gb")
    assert record.accelerator.name == "A100 SXM4 40GB"
    share = MIG_CARD_SHARE["1g.10gb"]
    assert share * (slice_job.min_s - 1) <= record.card_hours * 3600 <= share * slice_job.max_s + 1


def test_the_same_figures_imported_again_in_another_layout_change_nothing(
    slurm_workload, test_cluster, tmp_path
):
    """A record per account, user and card type over the period: -P, the user-first report
    and the fixed-width table are the same records."""
    first = import_report(tmp_path, team_text(slurm_workload, "-P")[0])
    stored = {r.record_key: r.card_hours for r in UsageRecord.objects.filter(cluster=test_cluster)}
    for layout in ("UserUtilizationByAccount -p", "fixed-width"):
        again = import_report(tmp_path, team_text(slurm_workload, layout)[0])
        assert (again.records_created, again.records_updated) == (0, 0), layout
        assert again.records_unchanged == first.records_created == len(stored)
    after = {r.record_key: r.card_hours for r in UsageRecord.objects.filter(cluster=test_cluster)}
    assert after == stored


@pytest.mark.parametrize("unit", [None, "seconds", "minutes", "secper", "minper"])
def test_every_time_unit_stores_the_teams_card_hours(slurm_workload, test_cluster, tmp_path, unit):
    """sreport rounds each printed figure to its unit (minutes without -t)."""
    import_report(tmp_path, team_text(slurm_workload, "-P", unit=unit)[0])
    unit_s = SECONDS_PER[UNITS.get(unit or "minutes", "minutes")]
    stored = stored_card_seconds(test_cluster)
    for account in slurm_workload.accounts:
        low, high = expected_card_seconds(slurm_workload, account)
        total = sum(seconds for (team, _), seconds in stored.items() if team == account)
        # Half a unit per typed line (one per card type), the slice's at its share.
        slack = unit_s / 2 * (2 + MIG_CARD_SHARE["1g.10gb"]) + 1
        assert low - slack <= total <= high + slack, (account, low, total, high)


def test_cluster_utilization_is_stored_as_the_cards_and_checked_against_the_inventory(
    slurm_workload, test_cluster, tmp_path
):
    """Each TRES's row; the untyped one is the 16 cards plus the slices' share (within the
    inventory's 16 + 5%), Reported the same seconds for every row."""
    text = sreport(slurm_workload, "utilization", "-P")
    job = import_report(tmp_path, text)
    rows = {row.tres_name: row for row in SreportUtilization.objects.filter(cluster=test_cluster)}
    assert job.records_created == len(rows) == 4
    assert rows["gres/gpu"].accelerator is None
    for kind in GPU_TYPES:
        assert rows[f"gres/gpu:{kind}"].accelerator.name == MODELS[kind], kind
    start, end = report_hours(slurm_workload)
    assert {(row.period_start, row.period_end) for row in rows.values()} == {(start, end)}
    existed_h = rows["gres/gpu:h100"].reported_card_hours / NODE_GPUS["h100"]
    assert 0 < existed_h <= (end - start).total_seconds() / 3600
    cards = {kind: n * MIG_CARD_SHARE.get(kind, 1.0) for kind, n in NODE_GPUS.items()}
    for kind, count in cards.items():
        assert rows[f"gres/gpu:{kind}"].reported_card_hours == pytest.approx(count * existed_h)
    assert rows["gres/gpu"].reported_card_hours == pytest.approx(sum(cards.values()) * existed_h)
    workload_low = sum(expected_card_seconds(slurm_workload, a)[0] for a in slurm_workload.accounts)
    assert rows["gres/gpu"].allocated_card_hours * 3600 >= workload_low - 2


def test_allocated_is_what_every_teams_records_add_up_to(slurm_workload, test_cluster, tmp_path):
    """The cluster report and the report of every account (other tests' too), both imported:
    Allocated of each card model is the sum of the usage records of that model."""

    def adds_up() -> None:
        UsageRecord.objects.filter(cluster=test_cluster).delete()
        import_report(tmp_path, sreport(slurm_workload, "utilization", "-P"))
        import_report(tmp_path, sreport(slurm_workload, "AccountUtilizationByUser", "-P"))
        rows = SreportUtilization.objects.filter(cluster=test_cluster)
        allocated_h: dict[str, float] = defaultdict(float)
        for row in rows.exclude(tres_name="gres/gpu").select_related("accelerator"):
            allocated_h[row.accelerator.name] += row.allocated_card_hours
        records = pd.DataFrame.from_records(
            UsageRecord.objects.filter(cluster=test_cluster).values(
                "accelerator__name", "card_hours"
            )
        )
        used_h = records.groupby("accelerator__name")["card_hours"].sum().to_dict()
        assert used_h == pytest.approx(dict(allocated_h), abs=1e-9)
        total = rows.get(tres_name="gres/gpu").allocated_card_hours
        assert records["card_hours"].sum() == pytest.approx(total, abs=1e-9)

    retried(adds_up)


@pytest.mark.parametrize("report", ["utilization", "AccountUtilizationByUser"])
def test_a_percent_report_is_refused_naming_hours(slurm_workload, test_cluster, tmp_path, report):
    text = sreport(slurm_workload, report, "-P", unit="percent")
    with pytest.raises(CommandError, match="percent output carries no card-hours; use -t hours"):
        import_report(tmp_path, text)
    job = ImportJob.objects.latest("pk")
    assert job.status == JobStatus.FAILED
    assert not SreportUtilization.objects.exists() and not UsageRecord.objects.exists()


def test_a_percent_unit_cannot_be_given_for_a_bannerless_report(
    slurm_workload, test_cluster, tmp_path
):
    text = sreport(slurm_workload, "utilization", "-P", "-n", unit="percent")
    options = ["--columns-preset", "default", *period_options(slurm_workload)]
    with pytest.raises(CommandError, match=r"One of hours, minutes, seconds \(sreport -t\)"):
        import_report(tmp_path, text, *options, "--time-unit", "percent")
    with pytest.raises(CommandError, match="is a percentage: .*use -t hours"):
        import_report(tmp_path, text, *options, "--time-unit", "hours")
    assert not SreportUtilization.objects.exists()


def test_a_bannerless_report_needs_its_unit_and_period(slurm_workload, test_cluster, tmp_path):
    text = sreport(slurm_workload, "utilization", "-P", "-n")
    preset = ["--columns-preset", "default"]
    assert list(SREPORT_PRESETS["default"])[:2] == ["Cluster", "TRES Name"]
    with pytest.raises(CommandError, match="unknown time unit"):
        import_report(tmp_path, text, *preset, *period_options(slurm_workload))
    with pytest.raises(CommandError, match="no report period"):
        import_report(tmp_path, text, *preset, "--time-unit", "seconds")
    import_report(
        tmp_path, text, *preset, "--time-unit", "seconds", *period_options(slurm_workload)
    )
    assert SreportUtilization.objects.filter(cluster=test_cluster).count() == 4


def test_sreports_default_table_is_refused_naming_the_columns_and_widths(
    slurm_workload, test_cluster, tmp_path
):
    """The default widths cut "fleetwise-test" (Cluster, 9) and "gres/gpu:1g.10gb" (TRES Name,
    14): the refusal names sreport's format= fields and widths, and stores nothing."""
    text = sreport(slurm_workload, "utilization")
    with pytest.raises(CommandError) as refused:
        import_report(tmp_path, text)
    message = str(refused.value)
    assert "column Cluster: 'fleetwis+' was cut to the column's 9 characters" in message
    assert "column TRES Name: 'gres/gpu:1g.1+' was cut to the column's 14" in message
    assert "format=...,Cluster%24" in message and "format=...,TresName%30" in message
    assert "TresName" in FORMATS["utilization"]
    assert not SreportUtilization.objects.exists()
