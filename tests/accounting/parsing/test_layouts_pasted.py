"""Layouts people paste: sacct's and sreport's fixed-width tables read by the dashed line's
widths, ElapsedRaw/TimelimitRaw, and look-alikes (site wrappers, GPU telemetry) refused by
name with the export to make instead."""

from __future__ import annotations

import pandas as pd
import pytest

from accounting.parsing import SacctStats, UsageValidationError, read_sacct, read_sreport
from tests.support.sacct_pitfalls import as_source
from tests.support.slurm_tables import (
    DCGM_SCRAPE,
    JOBCHARGE,
    JOBSTATS,
    NVIDIA_SMI_CSV,
    RAW_COLUMNS,
    SACCT_FIXED_WIDTH,
    SACCT_FIXED_WIDTH_CUT,
    SACCT_FIXED_WIDTH_NARROW,
    SACCT_FIXED_WIDTH_PUSHED,
    SACCT_RAW_SECONDS,
    SEFF,
    SREPORT_ACCOUNTS_FIXED_WIDTH,
    SREPORT_FIXED_WIDTH_CUT,
)


def refusal(text: str, **options) -> list[str]:
    with pytest.raises(UsageValidationError) as raised:
        read_sacct(as_source(text), **options)
    return [str(issue) for issue in raised.value.issues]


def test_sacct_fixed_width_reads_every_value_exactly():
    stats = SacctStats()
    frame = read_sacct(as_source(SACCT_FIXED_WIDTH), stats=stats).set_index("job_id")
    assert list(frame.index) == ["1001", "1002", "1003"]  # 1004 pending, the step folded
    first = frame.loc["1001"]
    assert (first["account"], first["user"], first["partition"]) == ("team-a", "ann", "h100")
    assert (first["cards"], first["duration_h"], first["card_hours"]) == (8.0, 6.0, 48.0)
    assert first["start"] == pd.Timestamp("2025-02-03T10:00:00", tz="UTC")
    assert first["record_key"] == "1001@2025-02-03T09:55:00"
    assert first["accelerator_model"] == "H100 SXM5 80GB"
    cancelled = frame.loc["1002"]  # "CANCELLED+": the word survives the cut
    assert (cancelled["state"], cancelled["scheduler_state"]) == ("cancelled", "CANCELLED")
    assert (cancelled["cards"], cancelled["card_hours"], cancelled["nodes"]) == (16.0, 24.0, 2)
    assert cancelled["node_list"] == "gpu[002-003]"
    running = frame.loc["1003"]  # 2 h of Elapsed, and the file runs to 16:00: 2 h
    assert running["state"] == "running" and pd.isna(running["end"])
    assert running["card_hours"] == 8.0
    assert stats.skip_counts == {"pending or never started": 1}
    assert stats.as_of.value == pd.Timestamp("2025-02-03T16:00:00", tz="UTC")


def test_a_cut_value_in_a_column_that_is_read_names_the_width_to_use():
    assert refusal(SACCT_FIXED_WIDTH_CUT) == [
        "line 3, column AllocTRES: 'billing=1+' was cut to the column's 10 characters: export "
        "this column wider, e.g. --format=...,AllocTRES%100,... (or export with --parsable2, "
        "which never cuts a value)",
        "line 4, column State: 'OUT_OF_ME+' was cut to the column's 10 characters: export this "
        "column wider, e.g. --format=...,State%24,... (or export with --parsable2, which never "
        "cuts a value)",
    ]  # JobName 'pretrain-+' is cut too, but it is not read


def test_a_duration_wider_than_its_column_is_refused_not_misread():
    (issue,) = refusal(SACCT_FIXED_WIDTH_PUSHED)
    assert issue.startswith(
        "line 3, column Elapsed: a value is wider than its column and pushed the rest of the "
        "line out of place: export this column wider, e.g. --format=...,Elapsed%20,..."
    )


def test_a_narrow_time_column_and_a_cut_header_name_are_refused():
    issues = refusal(SACCT_FIXED_WIDTH_NARROW)
    assert issues[0].startswith(
        "line 1, column TRESUsageI: the column's name is cut to 10 characters "
        "(tresusageinave or tresusageintot?)"
    )
    assert issues[1].startswith(
        "line 2, column Start: the column is 10 characters wide, a time needs 19: export this "
        "column wider, e.g. --format=...,Start%19,..."
    )


def test_elapsed_in_seconds_and_the_limit_in_minutes_are_read():
    columns = RAW_COLUMNS.split(",")
    frame = read_sacct(as_source(SACCT_RAW_SECONDS), columns=columns, cluster="orion")
    hours = dict(zip(frame["job_id"], frame["duration_h"], strict=True))
    assert hours == {"3001": 1.5, "3002": 24.0, "3003": pytest.approx(600 / 3600)}
    assert list(frame["card_hours"]) == [12.0, 96.0, pytest.approx(2 / 6)]
    bad = SACCT_RAW_SECONDS.replace("|5400|120|", "|1:30|two hours|")
    assert refusal(bad, columns=columns, cluster="orion") == [
        "line 1, column ElapsedRaw: '1:30' is not a duration (whole seconds)",
        "line 1, column TimelimitRaw: 'two hours' is not minutes (or UNLIMITED, Partition_Limit)",
    ]


@pytest.mark.parametrize(
    ("text", "tool"),
    [(SEFF, "seff"), (JOBSTATS, "jobstats"), (JOBCHARGE, "jobcharge")],
)
def test_site_wrappers_are_named_with_the_sacct_command_to_use(text, tool):
    (issue,) = refusal(text)
    assert f"column file: this is {tool} output" in issue
    assert "export with sacct instead: sacct --allusers --allocations --duplicates" in issue
    assert "--parsable2" in issue and "AllocTRES" in issue


@pytest.mark.parametrize(
    ("text", "what"),
    [(DCGM_SCRAPE, "a dcgm-exporter /metrics scrape"), (NVIDIA_SMI_CSV, "nvidia-smi")],
)
def test_gpu_telemetry_uploaded_as_usage_is_named(text, what):
    (issue,) = refusal(text)
    assert f"this is {what}" in issue and "(GPU telemetry), not job usage" in issue


def test_sreport_fixed_width_account_table_keeps_the_user_lines():
    frame = read_sreport(as_source(SREPORT_ACCOUNTS_FIXED_WIDTH))
    used = {(row.account, row.user): row.used_card_hours for row in frame.itertuples()}
    assert used == {("physics", "ann"): 1800, ("physics", "bob"): 1200, ("chemistry", "cy"): 2280}
    assert frame["period_start"].iloc[0] == pd.Timestamp("2025-02-01", tz="UTC")


def test_sreport_fixed_width_with_a_cut_tres_name_is_refused():
    with pytest.raises(UsageValidationError) as raised:
        read_sreport(as_source(SREPORT_FIXED_WIDTH_CUT))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 8, column TRES Name: 'gres/gpu:a100+' was cut to the column's 14 characters: "
        "re-run sreport with -P (parsable), which never cuts a value, or widen the column "
        "(format=...,TresName%30)"  # sreport's format= name: "TRES Name" is an unknown field
    ]
