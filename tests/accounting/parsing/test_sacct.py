"""sacct --parsable2 parser: every pitfall of the issue, on real-shaped text."""

from __future__ import annotations

import io
from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from accounting.parsing import (
    DEFAULT_GRES_ALIASES,
    DEFAULT_SACCT_COLUMNS,
    USAGE_COLUMNS,
    USAGE_DTYPES,
    SacctStats,
    UsageValidationError,
    iter_sacct_chunks,
    read_sacct,
)
from tests.support.sacct_pitfalls import (
    PARTITION_MODELS,
    SACCT_HEADER,
    SACCT_LINES,
    as_source,
    sacct_text,
)

H100 = "H100 SXM5 80GB"


def parse(text: str, **options) -> pd.DataFrame:
    options.setdefault("partition_models", PARTITION_MODELS)
    return read_sacct(as_source(text), **options)


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    frame = parse(sacct_text())
    return frame.set_index("record_key")


def test_chunk_has_documented_columns_and_dtypes():
    frame = parse(sacct_text())
    assert tuple(frame.columns) == USAGE_COLUMNS
    for name, dtype in USAGE_DTYPES.items():
        assert frame[name].dtype == pd.Series(dtype=dtype).dtype, name


def test_one_record_per_job_and_kind_skipping_non_usage():
    stats = SacctStats()
    frame = parse(sacct_text(), stats=stats)
    # 12 records: 10 GPU jobs, one of them with two kinds, the requeued job twice.
    assert len(frame) == 12
    assert frame["record_key"].is_unique
    assert stats.skipped_never_started == 2  # PENDING array remainder, cancelled before start
    assert stats.skipped_without_gpu == 1  # CPU-only job
    assert stats.step_lines == 4
    assert stats.records_with_unknown_model == 1


def test_gpus_come_from_alloc_tres_not_req_tres(records):
    job = records.loc["1001@2024-03-01T08:00:00"]
    assert job["cards"] == 8  # ReqTRES said gres/gpu=1 for this exclusive job
    assert job["accelerator_model"] == H100
    assert job["card_hours"] == pytest.approx(8 * 2.5)


def test_steps_are_folded_and_gpuutil_is_divided_by_gpu_count(records):
    job = records.loc["1001@2024-03-01T08:00:00"]
    # .0 reports 680 summed over 8 GPUs = 85 %; .batch has none, .extern is ignored.
    assert job["gpu_utilization"] == pytest.approx(0.85)
    assert not records.index.str.contains(r"\.batch|\.extern|\.0@").any()
    assert records.loc["1007@2024-03-01T11:00:05", "gpu_utilization"] == pytest.approx(0.5)


def test_mig_slice_counts_as_its_fraction_of_a_card(records):
    job = records.loc["1010@2024-03-01T09:00:00"]
    assert job["cards"] == pytest.approx(3 / 7)
    assert job["accelerator_model"] == "A100 SXM4 40GB"
    assert job["mig_profile"] == "3g.20gb"
    assert job["gres_type"] == "a100_3g.20gb"
    # Elapsed 45:30.500 (MM:SS.mmm)
    assert job["duration_h"] == pytest.approx(45 / 60 + 30.5 / 3600)


def test_array_task_and_het_components(records):
    array_task = records.loc["1010@2024-03-01T09:00:00"]
    assert (array_task["job_id"], array_task["job_label"], array_task["parent_job_id"]) == (
        "1010",
        "1002_4",
        "1002",
    )
    het0 = records.loc["1003@2024-03-01T08:00:00"]
    assert (het0["job_label"], het0["parent_job_id"], het0["nodes"]) == ("1003+0", "1003", 2)
    assert het0["card_hours"] == pytest.approx(16 * 26)  # Elapsed 1-02:00:00


def test_two_typed_kinds_give_one_record_per_kind(records):
    h100 = records.loc["1004@2024-03-01T08:00:00/h100"]
    a100 = records.loc["1004@2024-03-01T08:00:00/a100_80g"]
    assert (h100["cards"], h100["accelerator_model"]) == (4, H100)
    assert (a100["cards"], a100["accelerator_model"]) == (2, "A100 SXM4 80GB")
    assert h100["card_hours"] + a100["card_hours"] == pytest.approx(6 * 26)
    assert h100["job_label"] == a100["job_label"] == "1003+1"


def test_running_job_and_untyped_gpus_take_partition_default(records):
    job = records.loc["1005@2024-03-01T09:00:00"]
    assert job["state"] == "running"
    assert pd.isna(job["end"])
    assert job["accelerator_model"] == "A100 SXM4 80GB"
    assert job["card_hours"] == pytest.approx(4 * 3.25)
    assert pd.isna(records.loc["1013@2024-03-01T09:00:00", "accelerator_model"])


def test_cluster_default_model_for_untyped_gpus():
    frame = parse(sacct_text(), default_model="L40S").set_index("record_key")
    assert frame.loc["1013@2024-03-01T09:00:00", "accelerator_model"] == "L40S"
    assert frame.loc["1005@2024-03-01T09:00:00", "accelerator_model"] == "A100 SXM4 80GB"


def test_states_are_normalised(records):
    assert records.loc["1006@2024-03-01T09:00:00", "state"] == "cancelled"  # CANCELLED by 1234
    assert records.loc["1006@2024-03-01T09:00:00", "scheduler_state"] == "CANCELLED"
    assert records.loc["1008@2024-03-01T09:00:00", "state"] == "node_fail"
    assert records.loc["1014@2024-03-01T09:00:00", "state"] == "failed"  # OUT_OF_MEMORY
    assert records.loc["1003@2024-03-01T08:00:00", "state"] == "timeout"


def test_requeued_runs_stay_separate_records(records):
    first = records.loc["1007@2024-03-01T09:00:00"]
    final = records.loc["1007@2024-03-01T11:00:05"]
    assert (first["state"], first["scheduler_state"], first["card_hours"]) == (
        "preempted",
        "REQUEUED",
        8.0,
    )
    assert (final["state"], final["card_hours"]) == ("completed", 16.0)
    assert first["job_id"] == final["job_id"] == "1007"


def test_header_less_file_with_column_list_and_shuffled_columns():
    with_header = parse(sacct_text())
    columns = SACCT_HEADER.split("|")
    without = parse(sacct_text(header=False), columns=columns)
    pd.testing.assert_frame_equal(
        with_header.drop(columns="source_line"), without.drop(columns="source_line")
    )
    assert (without["source_line"] == with_header["source_line"] - 1).all()
    # Columns are read by name: reverse them and nothing changes.
    reverse = ["|".join(reversed(line.split("|"))) for line in [SACCT_HEADER, *SACCT_LINES]]
    reordered = parse("\n".join(reverse) + "\n")
    pd.testing.assert_frame_equal(with_header, reordered)


def test_header_less_file_is_refused_unless_its_columns_are_given():
    line = (
        "77|77|beta|gpu|t|u|2024-01-01T00:00:00|2024-01-01T01:00:00|2024-01-01T02:00:00|01:00:00|"
        "COMPLETED|1|gres/gpu:mi300x=8,gres/gpu=8|n1\n"
    )
    with pytest.raises(UsageValidationError, match="no header: pass --columns or re-export"):
        read_sacct(as_source(line))
    frame = read_sacct(as_source(line), columns=DEFAULT_SACCT_COLUMNS)
    assert frame.loc[0, "accelerator_model"] == "MI300X"
    assert frame.loc[0, "card_hours"] == 8.0
    assert frame.loc[0, "cluster"] == "beta"


def test_parsable_trailing_pipe_crlf_and_blank_lines():
    text = "\r\n".join(line + "|" for line in [SACCT_HEADER, *SACCT_LINES]) + "\r\n\r\n"
    frame = parse(text)
    expected = parse(sacct_text())
    pd.testing.assert_frame_equal(frame, expected)


def test_custom_alias_table_and_unknown_model_as_error():
    text = (
        "JobID|Cluster|Start|End|State|AllocTRES\n"
        "5|c|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED|gres/gpu:hopper=8,gres/gpu=8\n"
    )
    assert pd.isna(read_sacct(as_source(text)).loc[0, "accelerator_model"])
    custom = {**DEFAULT_GRES_ALIASES, "Hopper": H100}
    assert read_sacct(as_source(text), aliases=custom).loc[0, "accelerator_model"] == H100
    with pytest.raises(UsageValidationError) as raised:
        read_sacct(as_source(text), unknown_model="error")
    assert str(raised.value.issues[0]) == (
        "line 2, column AllocTRES: gres type 'hopper' is not in the alias table"
    )


def test_timezone_and_as_of_for_running_jobs_without_elapsed():
    # Job 6 ended 15:00 Berlin: the file's latest time, so running job 5 held 3 h up to it.
    text = (
        "JobID|Cluster|Start|End|State|AllocTRES\n"
        "5|c|2024-07-01T12:00:00|Unknown|RUNNING|gres/gpu:h100=8,gres/gpu=8\n"
        "6|c|2024-07-01T13:00:00|2024-07-01T15:00:00|COMPLETED|gres/gpu:h100=1,gres/gpu=1\n"
    )
    stats = SacctStats()
    frame = read_sacct(as_source(text), timezone="Europe/Berlin", stats=stats)
    running = frame.set_index("job_id").loc["5"]
    assert running["start"] == pd.Timestamp("2024-07-01T10:00:00", tz="UTC")  # CEST
    assert running["duration_h"] == pytest.approx(3.0)
    assert running["card_hours"] == pytest.approx(24.0)
    assert stats.as_of.value == pd.Timestamp("2024-07-01T13:00:00", tz="UTC")
    assert stats.as_of.source == "file"
    # A given as-of does not move the file's own latest time.
    later = read_sacct(as_source(text), timezone="Europe/Berlin", as_of=datetime(2024, 7, 2))
    assert later.set_index("job_id").loc["5", "duration_h"] == pytest.approx(3.0)


MALFORMED = "\n".join(
    [
        "JobID|JobIDRaw|Cluster|Partition|Start|End|Elapsed|State|AllocTRES",
        "1|1|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=8",
        "2|2|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED",
        "3|3|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=8|x",
        "4|4|c|p|2024-13-45T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=8",
        "5|5|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=-8",
        "6|6|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|EXPLODED|gres/gpu=8",
        "7|7|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|1:2:3:4|COMPLETED|gres/gpu=8",
        "8|8|c|p|2024-01-01T02:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=8",
        "9|9||p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|gres/gpu=8",
        "10.batch|10.batch|c|p|2024-01-01T00:00:00|2024-01-01T01:00:00|01:00:00|COMPLETED|",
    ]
)


def test_malformed_lines_are_rejected_with_line_and_column():
    chunks: list[pd.DataFrame] = []
    with pytest.raises(UsageValidationError) as raised:
        for chunk in iter_sacct_chunks(as_source(MALFORMED), chunk_lines=3):
            chunks.append(chunk)
    messages = [str(issue) for issue in raised.value.issues]
    assert messages == [
        "line 3, column AllocTRES: missing field: line has 8 of 9 fields",
        "line 4, column 10: extra field: line has 10 of 9 fields",
        "line 5, column Start: '2024-13-45T00:00:00' is not a date-time",
        "line 6, column AllocTRES: gres/gpu count '-8' is not a non-negative whole number",
        "line 7, column State: unknown state 'EXPLODED'",
        "line 8, column Elapsed: '1:2:3:4' is not a duration ([D-]HH:MM:SS, MM:SS or MM:SS.mmm)",
        "line 9, column End: End is before Start",
        "line 10, column Cluster: no cluster name (add the Cluster column or pass cluster=...)",
        "line 11, column JobID: step of 10 follows the line of job 9",
    ]
    assert not raised.value.truncated
    # Nothing after the first bad line is yielded (line 2 sits in the first, clean, block).
    assert sum(len(chunk) for chunk in chunks) <= 1


def test_error_collection_stops_at_max_errors():
    bad = "\n".join(
        [SACCT_HEADER]
        + [
            f"{n}|{n}|c|p|x|y|z|2024-01-01T00:00:00|Unknown|01:00:00|BOGUS|1||gres/gpu=1|n|"
            for n in range(200)
        ]
    )
    with pytest.raises(UsageValidationError) as raised:
        list(iter_sacct_chunks(as_source(bad), max_errors=50, chunk_lines=7))
    assert len(raised.value.issues) == 50
    assert raised.value.truncated
    assert raised.value.issues[0].line == 2


def test_missing_alloc_tres_column_is_an_error():
    text = "JobID|Start|End|State|ReqTRES\n1|2024-01-01T00:00:00|Unknown|RUNNING|gres/gpu=8\n"
    with pytest.raises(UsageValidationError, match="column AllocTRES: required column is missing"):
        read_sacct(as_source(text))


def test_progress_reports_bytes_up_to_the_file_size():
    data = sacct_text().encode()
    seen = []
    list(
        iter_sacct_chunks(
            io.BytesIO(data), chunk_lines=4, partition_models=PARTITION_MODELS, progress=seen.append
        )
    )
    assert [p.bytes_read for p in seen] == sorted(p.bytes_read for p in seen)
    assert seen[-1].bytes_read == len(data)
    assert seen[-1].total_bytes == len(data)
    assert seen[-1].lines_read == len(SACCT_LINES) + 1


def test_path_source(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text(sacct_text())
    assert len(read_sacct(path, partition_models=PARTITION_MODELS)) == 12


# Block sizes of 1 line up to past the whole file: a boundary after every line, between the
# steps of one job, and none at all.
@pytest.mark.parametrize("chunk_lines", [1, 2, 3, 5, 8, 13, 25])
def test_chunk_boundaries_do_not_change_the_result(chunk_lines):
    # Steps may land in the next block: the parser holds the last job back until then.
    expected = parse(sacct_text())
    chunked = list(
        iter_sacct_chunks(
            as_source(sacct_text()), chunk_lines=chunk_lines, partition_models=PARTITION_MODELS
        )
    )
    got = pd.concat(chunked, ignore_index=True)
    pd.testing.assert_frame_equal(got, expected)
    assert all(len(chunk) for chunk in chunked)
    assert np.isclose(got["card_hours"].sum(), expected["card_hours"].sum())


def test_header_less_parsable_output_with_trailing_pipe():
    line = (
        "77|77|beta|gpu|t|u|2024-01-01T00:00:00|2024-01-01T01:00:00|2024-01-01T02:00:00|01:00:00|"
        "COMPLETED|1|gres/gpu:a100_80g=4,gres/gpu=4|n1|\n"
    )
    frame = read_sacct(as_source(line), columns=DEFAULT_SACCT_COLUMNS)
    assert (frame.loc[0, "accelerator_model"], frame.loc[0, "cards"]) == ("A100 SXM4 80GB", 4.0)


def test_progress_counts_records_delivered():
    seen = []
    chunks = list(
        iter_sacct_chunks(
            as_source(sacct_text()),
            chunk_lines=5,
            partition_models=PARTITION_MODELS,
            progress=seen.append,
        )
    )
    assert seen[-1].records_emitted == sum(len(chunk) for chunk in chunks) == 12


def test_steps_of_a_rejected_line_are_not_reported_again():
    text = "\n".join(
        [
            "JobID|Cluster|Start|End|State|AllocTRES",
            "1|c|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED|gres/gpu=8",
            "2|c|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED",
            "2.batch|c|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED|",
            "2.0|c|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED|gres/gpu=8",
        ]
    )
    with pytest.raises(UsageValidationError) as raised:
        read_sacct(as_source(text))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 3, column AllocTRES: missing field: line has 5 of 6 fields"
    ]
