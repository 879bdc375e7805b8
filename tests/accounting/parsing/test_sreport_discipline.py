"""sreport files as Slurm prints them: only GPU rows are card-hours, CPU reports are refused.

Fixtures (``fixtures/sreport_*.txt``) are written in the shapes ``sreport -P`` prints; every
accepted one is checked against card-hours counted by hand from its lines.
"""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from accounting.parsing import SreportStats, UsageValidationError, read_sreport
from engine.usage import downtime_by_bucket, measured_utilization

FIXTURES = Path(__file__).parent / "fixtures"


def messages(name: str, **options: object) -> list[str]:
    with pytest.raises(UsageValidationError) as raised:
        read_sreport(FIXTURES / name, **options)
    return [str(issue) for issue in raised.value.issues]


def test_plain_cluster_utilization_without_tres_column_is_a_cpu_report():
    assert messages("sreport_cpu_default.txt") == [
        "line 5, column TRES Name: this is a CPU report: "
        "run sreport -P -t hours -T gres/gpu cluster utilization"
    ]


def test_banner_in_cpu_hours_is_refused_even_with_a_tres_column():
    assert messages("sreport_cpu_hours_banner.txt")[0].startswith(
        "line 5, column TRES Name: this is a CPU report"
    )


def test_billing_only_report_is_refused_naming_what_it_holds():
    assert messages("sreport_billing.txt") == [
        "line 5, column TRES Name: no gres/gpu rows (this report has billing): "
        "run sreport -P -t hours -T gres/gpu cluster utilization"
    ]


def test_only_gres_gpu_rows_are_kept_and_typed_rows_name_their_card():
    stats = SreportStats()
    frame = read_sreport(FIXTURES / "sreport_gpu_mixed_tres.txt", stats=stats)
    assert frame["tres_name"].tolist() == [
        "gres/gpu",
        "gres/gpu:a100",
        "gres/gpu:nvidia_h100_80gb_hbm3",
    ]
    by_tres = frame.set_index("tres_name")
    # Hand count from the file: total 5280 allocated, A100 1180, H100 4100.
    assert by_tres.loc["gres/gpu", "allocated_card_hours"] == 5280
    assert by_tres.loc["gres/gpu", "reported_card_hours"] == 8064
    assert by_tres.loc["gres/gpu:a100", "allocated_card_hours"] == 1180
    assert by_tres.loc["gres/gpu:nvidia_h100_80gb_hbm3", "accelerator_model"] == "H100 SXM5 80GB"
    assert by_tres.loc["gres/gpu:nvidia_h100_80gb_hbm3", "allocated_card_hours"] == 4100
    assert stats.warnings == [
        "rows of other TRES left out (not GPU card-hours): 1 cpu, 1 gres/gpumem, "
        "1 gres/gpuutil, 1 mem"
    ]


def test_bannerless_headerless_report_needs_columns_unit_and_period():
    columns = [
        "Cluster",
        "TRES Name",
        "Allocated",
        "Down",
        "PLND Down",
        "Idle",
        "Planned",
        "Reported",
    ]
    assert messages("sreport_gpu_noheader_minutes.txt")[0].startswith(
        "line 1, column Cluster: no sreport header line"
    )
    assert "unknown time unit" in messages("sreport_gpu_noheader_minutes.txt", columns=columns)[0]
    frame = read_sreport(
        FIXTURES / "sreport_gpu_noheader_minutes.txt",
        columns=columns,
        time_unit="minutes",
        period_start=datetime(2025, 2, 1),
        period_end=datetime(2025, 3, 1),
    )
    # 316800 minutes / 60 = 5280 card-hours; 483840 / 60 = 8064.
    assert frame.loc[0, "allocated_card_hours"] == pytest.approx(5280)
    assert frame.loc[0, "reported_card_hours"] == pytest.approx(8064)
    assert frame.loc[0, "period_end"] == pd.Timestamp("2025-03-01", tz="UTC")


def test_fixed_width_output_is_read_by_its_dashed_line():
    frame = read_sreport(FIXTURES / "sreport_fixed_width.txt")
    row = frame.iloc[0]
    assert (row["cluster"], row["tres_name"]) == ("orion", "gres/gpu")
    figures = [row[f"{name}_card_hours"] for name in ("allocated", "down", "planned_down")]
    assert figures == [5280, 96, 48]
    assert (row["idle_card_hours"], row["reported_card_hours"]) == (2640, 8064)
    assert row["period_end"] == pd.Timestamp("2025-03-01", tz="UTC")


def test_a_fixed_width_header_without_its_dashed_line_asks_for_parsable():
    text = (FIXTURES / "sreport_fixed_width.txt").read_text().splitlines()
    del text[5]  # the dashed line under the header
    with pytest.raises(UsageValidationError) as raised:
        read_sreport(io.BytesIO("\n".join(text).encode()))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 5, column Cluster: fixed-width output: re-run with -P (parsable)"
    ]


def test_user_utilization_by_account_gives_the_same_user_by_account_card_hours():
    """UserUtilizationByAccount prints Login before Account: the same lines, read by name."""
    frame = read_sreport(FIXTURES / "sreport_user_by_account.txt")
    row = frame.iloc[0]
    assert (row["account"], row["user"], row["used_card_hours"]) == ("physics", "ada", 2500)


def test_account_utilization_by_user_gives_team_card_hours_from_user_lines():
    stats = SreportStats()
    frame = read_sreport(FIXTURES / "sreport_account_by_user.txt", stats=stats)
    assert stats.report == "cluster AccountUtilizationByUser"
    per_team = frame.groupby("account")["used_card_hours"].sum().to_dict()
    # Hand count of the user lines: account lines are sums over the tree and are left out.
    assert per_team == {"bio": 660, "lattice": 1520, "physics": 2700, "physics-qcd": 400}
    assert frame["used_card_hours"].sum() == 5280
    assert set(frame["user"]) == {"ada", "bo", "cy", "dee", "eve"}
    assert frame.loc[0, "period_start"] == pd.Timestamp("2025-02-01", tz="UTC")


def test_engine_ignores_non_gpu_downtime_rows():
    period = {"period_start": "2025-02-01", "period_end": "2025-03-01"}
    downtime = pd.DataFrame(
        {
            "cluster": ["orion", "orion", "orion"],
            "tres_name": ["cpu", "billing", "gres/gpu:h100"],
            "period_start": pd.to_datetime(["2025-02-01"] * 3, utc=True),
            "period_end": pd.to_datetime(["2025-03-01"] * 3, utc=True),
            "down_card_hours": [672.0, 9850.0, 96.0],
            "planned_down_card_hours": [0.0, 0.0, 48.0],
        }
    )
    edges = pd.DatetimeIndex(pd.to_datetime(["2025-02-01", "2025-03-01"], utc=True))
    down = downtime_by_bucket(downtime, edges)
    assert down["down_card_hours"].tolist() == [96.0]
    # A CPU-only frame gives no downtime at all, so utilization stays A / C.
    inventory = pd.DataFrame({"cluster": ["orion"], "cards": [16.0]})
    usage = pd.DataFrame(
        {
            "cluster": ["orion"],
            "start": pd.to_datetime(["2025-02-01"], utc=True),
            "end": pd.to_datetime(["2025-02-02"], utc=True),
            "duration_h": [24.0],
            "cards": [8.0],
            "state": ["completed"],
        }
    )
    result = measured_utilization(
        usage, inventory, frequency="total", downtime=downtime.iloc[:2], **period
    )
    assert result.loc[0, "down_card_hours"] == 0
    assert result.loc[0, "utilization"] == pytest.approx(8 * 24 / (16 * 672))


def test_header_without_banner_needs_unit_and_period_and_cpu_is_still_refused():
    assert messages("sreport_cpu_header_nobanner.txt")[0].startswith(
        "line 1, column TRES Name: this is a CPU report"
    )
    assert "unknown time unit" in messages("sreport_gpu_header_nobanner.txt")[0]
    assert "no report period" in messages("sreport_gpu_header_nobanner.txt", time_unit="hours")[0]
    frame = read_sreport(
        FIXTURES / "sreport_gpu_header_nobanner.txt",
        time_unit="hours",
        period_start=datetime(2025, 2, 1),
        period_end=datetime(2025, 3, 1),
    )
    # Hand count: 5280 allocated card-hours in all, 4100 of them on H100.
    by_model = frame.groupby(frame["accelerator_model"].fillna("all"))["allocated_card_hours"]
    assert by_model.sum().to_dict() == {"H100 SXM5 80GB": 4100.0, "all": 5280.0}
