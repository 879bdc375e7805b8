"""sreport cluster utilization parser: banner, Planned/Reserved, units, bad lines."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from accounting.parsing import SREPORT_DTYPES, SreportStats, UsageValidationError, read_sreport
from tests.support.sacct_pitfalls import as_source

BANNER = """--------------------------------------------------------------------------------
Cluster Utilization 2024-03-01T00:00:00 - 2024-03-31T23:59:59
Usage reported in TRES {unit}
--------------------------------------------------------------------------------
"""
TABLE = """Cluster|TRES Name|Allocated|Down|PLND Down|Idle|{planned}|Reported
alpha|gres/gpu|8866|800|0|3294|0|12960
beta|gres/gpu|100|0|24|20|0|144
"""


@pytest.mark.parametrize("planned", ["Planned", "Reserved"])
def test_banner_header_and_both_spellings_of_planned(planned):
    frame = read_sreport(as_source(BANNER.format(unit="Hours") + TABLE.format(planned=planned)))
    assert list(frame.columns) == list(SREPORT_DTYPES)
    alpha = frame.set_index("cluster").loc["alpha"]
    assert alpha["allocated_card_hours"] == 8866
    assert alpha["down_card_hours"] == 800
    assert alpha["idle_card_hours"] == 3294
    assert alpha["reported_card_hours"] == 12960
    assert frame.set_index("cluster").loc["beta", "planned_down_card_hours"] == 24
    # The banner's last second becomes an exclusive end.
    assert alpha["period_start"] == pd.Timestamp("2024-03-01", tz="UTC")
    assert alpha["period_end"] == pd.Timestamp("2024-04-01", tz="UTC")
    assert frame["source_line"].tolist() == [6, 7]


def test_minutes_are_converted_and_percent_is_rejected():
    text = BANNER.format(unit="Minutes") + TABLE.format(planned="Planned")
    frame = read_sreport(as_source(text))
    assert frame.loc[0, "allocated_card_hours"] == pytest.approx(8866 / 60)
    percent = text.replace("TRES Minutes", "Percentage of Total")
    with pytest.raises(UsageValidationError, match="line 5, column Allocated: percent output"):
        read_sreport(as_source(percent))


def test_header_only_output_needs_unit_and_period():
    text = TABLE.format(planned="Planned")
    with pytest.raises(UsageValidationError, match="unknown time unit"):
        read_sreport(as_source(text))
    frame = read_sreport(
        as_source(text),
        time_unit="hours",
        period_start=datetime(2024, 3, 1),
        period_end=datetime(2024, 4, 1),
    )
    assert len(frame) == 2


def test_typed_tres_maps_to_a_model_and_hourper_figures_parse():
    text = BANNER.format(unit="Hours") + (
        "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported|\n"
        "alpha|gres/gpu:h100|100(69.44%)|0(0.00%)|0(0.00%)|44(30.56%)|0(0.00%)|144(100.00%)|\n"
    )
    frame = read_sreport(as_source(text))
    assert frame.loc[0, "accelerator_model"] == "H100 SXM5 80GB"
    assert frame.loc[0, "allocated_card_hours"] == 100


def test_bad_lines_are_rejected_and_sum_mismatch_is_a_warning():
    text = BANNER.format(unit="Hours") + (
        "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported\n"
        "alpha|gres/gpu|100|0|0|44|0|144\n"
        "beta|gres/gpu|-5|0|0|44|0|144\n"
        "gamma|gres/gpu|100|0|0|44|0\n"
        "delta|gres/gpu|lots|0|0|44|0|144\n"
    )
    with pytest.raises(UsageValidationError) as raised:
        read_sreport(as_source(text))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 7, column Allocated: '-5' is not a non-negative number",
        "line 8, column Reported: line has 7 fields, the header 8",
        "line 9, column Allocated: 'lots' is not a non-negative number",
    ]
    stats = SreportStats()
    read_sreport(
        as_source(
            BANNER.format(unit="Hours") + "Cluster|TRES Name|Allocated|Down|PLND Down|Idle"
            "|Planned|Reported\nalpha|gres/gpu|100|0|0|0|0|144\n"
        ),
        stats=stats,
    )
    assert stats.warnings and "differs from Reported by 44.0" in stats.warnings[0]
