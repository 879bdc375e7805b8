"""sreport 22.05's own layouts, as the test cluster printed them (gpu01: 8 H100; gpu02: 8 A100
and 4 MIG 1g.10gb slices), read without a Slurm: MIG slices, percent without its banner, cut
fixed-width values, -n without -P and format=Planned.

The Slurm-backed checks of the same layouts are tests/accounting/real_slurm/test_sreport_*.py.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from accounting.parsing import UsageValidationError, read_sreport
from accounting.parsing.sreport_accounts import account_usage_frame
from tests.support.sacct_pitfalls import as_source

BANNER = """--------------------------------------------------------------------------------
{title} 2026-11-27T01:00:00 - 2026-11-27T01:59:59
Usage reported in {unit}
--------------------------------------------------------------------------------
"""
TEAMS = BANNER.format(title="Cluster/Account/User Utilization", unit="TRES Seconds") + (
    "Cluster|Account|Login|Proper Name|TRES Name|Used\n"
    "fleetwise-test|serving|||gres/gpu|233\n"
    "fleetwise-test|serving|||gres/gpu:h100|135\n"
    "fleetwise-test|serving|||gres/gpu:a100|15\n"
    "fleetwise-test|serving|||gres/gpu:1g.10gb|83\n"
    "fleetwise-test|serving|root|root|gres/gpu|233\n"
    "fleetwise-test|serving|root|root|gres/gpu:h100|135\n"
    "fleetwise-test|serving|root|root|gres/gpu:a100|15\n"
    "fleetwise-test|serving|root|root|gres/gpu:1g.10gb|83\n"
    "fleetwise-test|training|root|root|gres/gpu|40\n"
    "fleetwise-test|training|root|root|gres/gpu:h100|24\n"
    "fleetwise-test|training|root|root|gres/gpu:a100|16\n"
    "fleetwise-test|training|root|root|gres/gpu:1g.10gb|0\n"
)
UTILIZATION = BANNER.format(title="Cluster Utilization", unit="TRES Seconds") + (
    "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported\n"
    "fleetwise-test|gres/gpu|2225|24|0|9911|0|12160\n"
    "fleetwise-test|gres/gpu:h100|1166|0|0|3698|0|4864\n"
    "fleetwise-test|gres/gpu:a100|806|16|0|4042|0|4864\n"
    "fleetwise-test|gres/gpu:1g.10gb|253|8|0|2171|0|2432\n"
)


def used_s(frame: pd.DataFrame) -> dict[tuple[str, str], float]:
    rows = frame.set_index(["account", "tres_name"])["used_card_hours"] * 3600
    return {key: pytest.approx(value) for key, value in rows.items()}


def issues(text: str, **options: object) -> list[str]:
    with pytest.raises(UsageValidationError) as refused:
        read_sreport(as_source(text), **options)
    return [str(issue) for issue in refused.value.issues]


def test_a_mig_slice_is_its_share_of_a_card_and_the_gpu_line_loses_the_rest():
    """Slurm counts each slice as one gres/gpu: 83 slice-seconds are 83/7 card-seconds, and
    the gres/gpu line (233 = 135 + 15 + 83) becomes 135 + 15 + 83/7."""
    frame = read_sreport(as_source(TEAMS))
    assert used_s(frame)[("serving", "gres/gpu:1g.10gb")] == 83 / 7
    assert used_s(frame)[("serving", "gres/gpu")] == 135 + 15 + 83 / 7
    assert used_s(frame)[("serving", "gres/gpu:h100")] == 135
    assert used_s(frame)[("training", "gres/gpu")] == 40


def test_the_cluster_report_counts_the_slices_at_their_share_in_every_column():
    rows = read_sreport(as_source(UTILIZATION)).set_index("tres_name")
    untyped = rows.loc["gres/gpu"]
    assert untyped["reported_card_hours"] * 3600 == pytest.approx(4864 + 4864 + 2432 / 7)
    assert untyped["allocated_card_hours"] * 3600 == pytest.approx(1166 + 806 + 253 / 7)
    assert untyped["down_card_hours"] * 3600 == pytest.approx(16 + 8 / 7)
    assert rows.loc["gres/gpu:1g.10gb", "idle_card_hours"] * 3600 == pytest.approx(2171 / 7)


def test_without_the_slice_line_the_gpu_line_keeps_slurms_count():
    text = "\n".join(line for line in TEAMS.splitlines() if "1g.10gb" not in line) + "\n"
    assert used_s(read_sreport(as_source(text)))[("serving", "gres/gpu")] == 233


@pytest.mark.parametrize("chunk_lines", [6, 7, 8, 9, 10])
def test_an_entitys_lines_split_between_blocks_are_read_together(chunk_lines):
    """Blocks of `chunk_lines` records (the banner and header in the first) cut between a
    user's gres/gpu line and its typed lines: they are still read together."""
    whole = read_sreport(as_source(TEAMS))
    split = read_sreport(as_source(TEAMS), chunk_lines=chunk_lines)
    pd.testing.assert_frame_equal(split, whole)


def test_team_usage_has_no_record_for_a_gpu_line_its_typed_lines_cover():
    """135 + 15 + 83/7 taken from 233 - 83·6/7 leaves float dust, not an untyped record."""
    records = account_usage_frame(read_sreport(as_source(TEAMS)))
    assert records["gres_type"].notna().all()
    mig = records[records["gres_type"] == "1g.10gb"].iloc[0]
    assert mig["mig_profile"] == "1g.10gb"
    assert mig["cards"] == pytest.approx(83 / 7 / 3600)  # card-hours over the 1 h period


def test_percent_without_its_banner_is_refused_naming_hours():
    """-P -n -t percent: no banner to say so, the figures do ("12.06%")."""
    text = "fleetwise-test|gres/gpu|18.30%|0.20%|0.00%|81.50%|0.00%|16.89%\n"
    columns = ["Cluster", "TRES Name", "Allocated", "Down", "PLND Down", "Idle", "Planned"]
    found = issues(
        text,
        columns=[*columns, "Reported"],
        time_unit="hours",
        period_start=datetime(2026, 11, 27, 1),
        period_end=datetime(2026, 11, 27, 2),
    )
    assert found[0] == (
        "line 1, column Allocated: '18.30%' is a percentage: percent output carries no "
        "card-hours; use -t hours"
    )
    assert all("is a percentage" in issue for issue in found)


FIXED = BANNER.format(title="Cluster/Account/User Utilization", unit="TRES Seconds") + (
    "  Cluster         Account     Login     Proper Name      TRES Name     Used \n"
    "--------- --------------- --------- --------------- -------------- -------- \n"
    "fleetwis+ 6b08e393-infer+      root            root gres/gpu:1g.1+       83 \n"
)


def test_a_cut_value_is_refused_naming_sreports_format_field_and_a_width():
    """sreport's format= knows TresName and Accounts, not "TRES Name" (it answers "Unknown
    field" and leaves the column out)."""
    assert issues(FIXED) == [
        f"line 7, column {column}: '{value}' was cut to the column's {width} characters: "
        "re-run sreport with -P (parsable), which never cuts a value, or widen the column "
        f"(format=...,{field})"
        for column, value, width, field in (
            ("Account", "6b08e393-infer+", 15, "Accounts%32"),
            ("Cluster", "fleetwis+", 9, "Cluster%24"),
            ("TRES Name", "gres/gpu:1g.1+", 14, "TresName%30"),
        )
    ]


def test_a_fixed_width_table_without_its_header_is_refused_naming_p():
    """sreport -n without -P: neither the header nor the dashed line that place the columns."""
    text = "fleetwis+ 6b08e393-infer+      root            root       gres/gpu      233 \n"
    found = issues(
        text,
        columns=["Cluster", "Account", "Login", "Proper Name", "TRES Name", "Used"],
        time_unit="seconds",
    )
    assert found == [
        "line 1, column Cluster: a fixed-width table without its header (sreport -n without "
        "-P): nothing says where its columns are; re-run with -P (and -n, passing the "
        "columns, if you like)"
    ]


def test_format_planned_prints_a_second_plnd_down_and_is_refused_naming_reserved():
    text = BANNER.format(title="Cluster Utilization", unit="TRES Minutes") + (
        "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|PLND Down|Reported\n"
        "fleetwise-test|gres/gpu|37|0|0|165|0|203\n"
    )
    assert issues(text)[0] == (
        "line 5, column PLND Down: PLND Down is printed twice: sreport reads format=Planned "
        "as PlannedDown; ask for the Planned column as Reserved "
        "(format=...,PlannedDown,Idle,Reserved,Reported)"
    )
